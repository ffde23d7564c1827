"""A training configuration's three levels, as Isaac Lab reports them (env step alone; + policy inference;
+ training), and the bottleneck they name. The third level is the training run's own rate; the first two are
measured apart on the learner's own vector env (its collector, rlbench.contract.Adapter.collector) with random
actions and with the policy, at the same env, policy and num_envs, or, where that was not measured, taken from the
training run's split of its time (env / inference / learn). One env step's time then splits into env, inference
and update: 1/L1, 1/L2 - 1/L1, 1/L3 - 1/L2; the largest share is the bottleneck, and what would move it follows
from Amdahl's law (a vector env twice as fast gains at most 1 / (1 - env share / 2))."""
import math
from typing import Optional

from rlbench.results.train_decision import Levels

BOUND_SHARE = 0.5   # a stage taking at least this share of a step's time bounds it


def _ok(value) -> Optional[float]:
    return float(value) if value is not None and math.isfinite(float(value)) and float(value) > 0 else None


def env_level(run):
    """Level 1 from a training run's split: the env steps/s its envs would give if stepping were all it did
    (steps_per_s / env_frac); None without a split."""
    env = _ok(run.get("env_frac"))
    return float(run["steps_per_s"]) / env if env is not None and run.get("steps_per_s") else None


def inference_level(run):
    """Level 2 from a training run's split: steps_per_s / (env_frac + inference_frac + the copy of observations to
    the policy, transfer_frac, where a synchronous learner reports it); None without env and inference."""
    env, infer = _ok(run.get("env_frac")), _ok(run.get("inference_frac"))
    if env is None or infer is None or not run.get("steps_per_s"):
        return None
    return float(run["steps_per_s"]) / (env + infer + _transfer(run))


def _transfer(run) -> float:
    """A synchronous learner's share of its time copying observations into its network's tensors (on its
    device); 0 for an actor-learner, whose learner copies batches while actors step."""
    return 0.0 if asynchronous(run) else (_ok(run.get("transfer_frac")) or 0.0)


def from_rows(training, env_row=None, inference_row=None) -> Levels:
    """The levels of one configuration: `training` its training run's row (rlbench.results.model.Run), `env_row`
    and `inference_row` its collector's rows with random actions and with the policy (None: not measured)."""
    train = float(training.steps_per_s)
    common = {"training_peak_rss_mb": training.get("peak_rss_mb"), "training_setup_s": training.get("setup_s"),
              "compile_s": training.get("compile_s")}
    if env_row is not None and inference_row is not None and env_row.ok and inference_row.ok:
        return Levels(float(env_row.steps_per_s), float(inference_row.steps_per_s), train,
                      f"measured apart on {env_row.adapter} (random actions, then the policy)",
                      env_row.cell_id, inference_row.cell_id, env_peak_rss_mb=env_row.get("peak_rss_mb"),
                      env_setup_s=env_row.get("setup_s"), **common)
    if asynchronous(training):
        return Levels(None, None, train, "not from the split: actors and learner run at once (an asynchronous "
                      "learner), their shares do not add up to one step's time", **common)
    if _ok(training.get("env_frac")) is None:
        return Levels(None, None, train, "not separable: the training run reports no split of its time", **common)
    return Levels(env_level(training), inference_level(training), train,
                  "from the training run's split of its time (env / inference / learn)", **common)


def asynchronous(run) -> bool:
    """An actor-learner run (IMPALA's, SEED's, ...): it reports the policy lag its batches ran at."""
    return _ok(run.get("policy_lag_mean")) is not None or run.get("policy_lag_mean") == 0


def with_transfer(split: dict, training) -> dict:
    """The split with the copy of observations to the policy's device (the training run's transfer_frac, as a share
    of its loop's time) taken out of inference, which level 2 measured it within."""
    fracs = [_ok(training.get(f"{s}_frac")) or 0.0 for s in ("env", "inference", "learn")]
    copy = _transfer(training)
    if not copy or not sum(fracs):
        return split
    moved = min(copy / (sum(fracs) + copy), split["inference"])
    return {**split, "inference": split["inference"] - moved, "transfer": moved}


def shares(levels: Levels) -> Optional[dict]:
    """A step's time split into env, inference and update (shares summing to 1), None without level 1."""
    if levels.env_steps_per_s is None:
        return None
    t1 = 1 / levels.env_steps_per_s
    t2 = 1 / levels.inference_steps_per_s if levels.inference_steps_per_s else t1
    t3 = 1 / levels.training_steps_per_s
    parts = {"env": t1, "inference": max(t2 - t1, 0.0), "update": max(t3 - t2, 0.0)}
    total = sum(parts.values())
    return {k: v / total for k, v in parts.items()}


def bottleneck(levels: Levels, training) -> tuple:
    """(kind, sentence): what bounds the configuration, with the figure behind it and what would move it; for an
    asynchronous learner, the policy lag it ran at. kind: learner | env | inference | transfer | fused | unknown."""
    lag = training.get("policy_lag_mean")
    lag_text = f"; it ran at a policy lag of {lag:.1f} versions" if lag is not None else ""
    if asynchronous(training) and _ok(training.get("learn_frac")) is not None:
        wait, learn = float(training.get("wait_frac") or 0.0), float(training.get("learn_frac"))
        copy = _ok(training.get("transfer_frac")) or 0.0
        if wait >= BOUND_SHARE:
            return "env", (f"actor-bound: the learner waits {wait:.0%} of its time for batches (it updates "
                           f"{learn:.0%}); more actors or cores, or a faster vector env in them, would move it"
                           + lag_text)
        if copy > learn:
            return "transfer", (f"transfer-bound: the learner spends {copy:.0%} of its time copying batches in (out "
                                f"of shared memory, to its device) against {learn:.0%} updating: larger batches per "
                                "copy, pinned memory, or actors writing where the learner reads would move it"
                                + lag_text)
        return "learner", (f"learner-bound: the learner is busy {1 - wait:.0%} of its time ({learn:.0%} in the "
                           f"update) and waits {wait:.0%} for batches: more actors would queue, a faster learner "
                           "would move it" + lag_text)
    split = shares(levels)
    split = with_transfer(split, training) if split is not None else None
    if split is None:
        if training.get("compile_s") is not None:
            return "fused", ("one compiled program (env, inference and update fused): the levels do not separate "
                             f"on this learner{lag_text}")
        return "unknown", f"the training run reports no split of its time{lag_text}"
    env, infer, update = split["env"], split["inference"], split["update"]
    env_gain = 1 / (1 - env / 2)   # a vector env twice as fast
    kind, share = max(split.items(), key=lambda kv: kv[1])
    copy = f", copying observations {split['transfer']:.0%}" if "transfer" in split else ""
    if kind == "transfer":
        return "transfer", (f"transfer-bound: {share:.0%} of each env step's time is copying observations into the "
                            f"network's tensors on its device (inference {infer:.0%}, env {env:.0%}, update "
                            f"{update:.0%}); observations born on the device (a JAX env, EnvPool's XLA interface) or "
                            "fewer, larger copies would move it" + lag_text)
    if kind == "update":
        text = (f"learner-bound: {update:.0%} of each env step's time is the update (env {env:.0%}, inference "
                f"{infer:.0%}{copy}); a vector env twice as fast would gain at most {env_gain:.2f}x, a faster learner "
                "(a GPU, a smaller network, fewer epochs) is what would move it")
        return "learner", text + lag_text
    if kind == "env":
        text = (f"env-bound: {env:.0%} of each env step's time is stepping envs (inference {infer:.0%}, update "
                f"{update:.0%}{copy}); a vector env twice as fast would gain {env_gain:.2f}x: more workers or cores, "
                "or a faster vector env, would move it")
        return "env", text + lag_text
    text = (f"inference-bound: {infer:.0%} of each env step's time is the policy's forward pass (env {env:.0%}, "
            f"update {update:.0%}{copy}); batching more envs per forward pass or a GPU policy would move it")
    return "inference", text + lag_text
