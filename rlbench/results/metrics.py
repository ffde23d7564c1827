"""The one registry of what rlbench measures, as pyperf's `_metadata` is for its runs: every figure a
repeat can carry, with its unit, the family that reports it, how summary.csv aggregates it and one line
saying what it means. The sessions' allowed names (SESSION_METRICS), the summary columns of session
figures and the README's column reference are all read from here, so a new figure is added in one place.

A leaf: imports nothing of rlbench. `python -m rlbench.results.metrics` prints the README's reference table.
"""
import math
import sys
from dataclasses import dataclass

_FORMAT = {"steps/s": ",.0f", "items/s": ",.0f", "updates/s": ",.1f", "MB/s": ",.1f", "GB/s": ".2f", "ms": ".3f",
           "s": ".3g", "share": ".1%", "cores": ".2f", "MB": ",.0f", "count": ",.0f", "ratio": ".3g", "flag": ".0f",
           "return": ".1f", "versions": ".2f", "items": ".2f"}


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    family: str                # a family's name (rlbench.registry.families), or "all"
    description: str
    session: bool = False      # a session's Metrics.read may report it (the rest the harness measures)
    summary: str = "median"    # its summary.csv column: "median" -> NAME_median, "" -> none

    def format(self, value) -> str:
        """Shown in tables: '-' for a missing value, else in the unit's usual precision."""
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "-"
        return format(value, _FORMAT[self.unit])


def _m(name, unit, family, description, **kw) -> Metric:
    return Metric(name, unit, family, description, **kw)


_HARNESS = (  # measured by the harness around every session (rlbench.running.timing), one value per repeat
    _m("steps_per_s", "steps/s", "all", "env steps per second over the timed window (the figure strategies are "
       "compared on)", summary=""),
    _m("frames_per_s", "steps/s", "all", "steps_per_s x frameskip, to match published FPS"),
    _m("latency_p50_ms", "ms", "all", "median time of one unit of work (a vector step, a rollout, a scan)"),
    _m("latency_p99_ms", "ms", "all", "99th percentile of the unit time"),
    _m("cpu_util", "cores", "all", "busy cores of the whole process tree over the timed window (1.0 = one core)"),
)

_SESSION = (  # reported by sessions (Metrics.read) over exactly the timed window
    _m("updates_per_s", "updates/s", "learners", "optimiser updates per second", session=True),
    _m("replay_ratio", "ratio", "learners", "samples consumed by updates / env steps added", session=True),
    _m("policy_lag_mean", "versions", "learners", "parameter versions between acting and learning", session=True),
    _m("policy_lag_max", "versions", "learners", "the largest such lag in the window", session=True),
    _m("priority_lag_mean", "versions", "learners", "apex, r2d2: learner updates between the parameters that "
       "computed a sampled item's priority (its actor's, or the learner's at its last replay) and the learner's",
       session=True),
    _m("sequence_mb_per_s", "MB/s", "learners", "r2d2: bytes of stored sequences (observations, actions, rewards, "
       "recurrent state) the learner sampled", session=True),
    _m("env_frac", "share", "learners", "time stepping envs (mean over the processes that do)", session=True),
    _m("inference_frac", "share", "learners", "time selecting actions", session=True),
    _m("learn_frac", "share", "learners", "time in forward/backward/optimiser step", session=True),
    _m("wait_frac", "share", "learners", "time blocked on other processes", session=True),
    _m("sync_frac", "share", "learners", "time copying or all-reducing parameters", session=True),
    _m("return_mean", "return", "learners", "mean episodic return reached (purejaxrl-ppo: last 100 episodes, "
       "mean over agents)", session=True),
    _m("time_to_target_s", "s", "learners", "training wall time, compile excluded, until return_mean first "
       "reached the target", session=True),
    _m("steps_to_target", "count", "learners", "env steps per agent until then", session=True),
    _m("time_per_agent_s", "s", "jax", "wall time per agent of one whole training run at the window's "
       "aggregate rate", session=True),
    _m("state_gb_per_s", "GB/s", "jax", "the compiled loop's carry read and written per second", session=True),
    _m("device_copy_gbps", "GB/s", "jax", "the devices' measured copy rate", session=True),
    _m("state_bw_frac", "share", "jax", "state_gb_per_s / device_copy_gbps", session=True),
    _m("samples_per_s", "steps/s", "learners", "env steps (transitions) consumed by learner updates", session=True),
    _m("actor_steps_per_s", "steps/s", "learners", "env steps the actors made (may run ahead of consumption: "
       "queued, or dropped)", session=True),
    _m("transfer_frac", "share", "learners", "time moving data between processes or host and device",
       session=True),
    _m("queue_wait_ms", "ms", "learners", "mean time the learner waited for its next batch", session=True),
    _m("h2d_mb_per_s", "MB/s", "learners", "bytes copied host to device (0 on CPU)", session=True),
    _m("prediction_queue_mean", "items", "learners", "ga3c: prediction requests waiting as a predictor came for "
       "its next batch (mean over batches)", session=True),
    _m("training_queue_mean", "items", "learners", "ga3c: experiences waiting as a trainer came for its next "
       "batch (mean over updates)", session=True),
    _m("predict_batch_mean", "items", "learners", "ga3c: prediction requests (one agent's envs each) per "
       "forward pass (mean)", session=True),
    _m("train_batch_mean", "items", "learners", "ga3c: experiences (t_max steps of one agent's envs) per update "
       "(mean)", session=True),
    _m("add_items_per_s", "items/s", "replay", "items written into the store (all actors)", session=True),
    _m("add_mb_per_s", "MB/s", "replay", "bytes written into the store", session=True),
    _m("sample_items_per_s", "items/s", "replay", "items sampled and read by the learner", session=True),
    _m("sample_mb_per_s", "MB/s", "replay", "bytes sampled and read", session=True),
    _m("sample_latency_p50_ms", "ms", "replay", "median time of one sample call", session=True),
    _m("sample_latency_p99_ms", "ms", "replay", "99th percentile of it", session=True),
    _m("sample_latency_p999_ms", "ms", "replay", "99.9th percentile of it", session=True),
    _m("sample_latency_max_ms", "ms", "replay", "the slowest sample call", session=True),
    _m("add_latency_p99_ms", "ms", "replay", "target mode: 99th percentile add time from each op's scheduled "
       "start (no coordinated omission)", session=True),
    _m("add_latency_max_ms", "ms", "replay", "target mode: the slowest add, from its scheduled start",
       session=True),
    _m("keeps_up", "flag", "replay", "target mode: 1 when neither the add nor the sample schedule fell behind, "
       "else 0", session=True),
)

METRICS = {m.name: m for m in (*_HARNESS, *_SESSION)}
SESSION_METRICS = tuple(m.name for m in _SESSION)


def metric(name: str) -> Metric:
    return METRICS[name]


def markdown() -> str:
    """The README's column reference: summary.csv carries NAME_median of each (steps_per_s its own
    median/CI columns); results.csv the per-repeat value."""
    lines = ["| metric | unit | family | what it is |", "|---|---|---|---|"]
    lines += [f"| `{m.name}` | {m.unit} | {m.family} | {m.description} |" for m in METRICS.values()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(markdown())
