"""Replay and storage: the survey's replay workloads (replay/<name>) on every store, their add and sample
rates as fractions of the machine's measured limits (memory copy, disk reads), which are measured on the
run's own filesystem before the sweep."""
import math
import sys
from dataclasses import dataclass

from rlbench import registry
from rlbench.contract import Family
from rlbench.errors import UsageError
from rlbench.results.metrics import Metric

# KWARGS' ranges: 0 = the workload's own item_bytes / batch_size; replay_spec then checks that an item holds
# its header and that max_mb holds a batch (max_mb=0 holds none), which depend on the workload
RANGES = {"max_mb": (0, math.inf), "item_bytes": (0, math.inf), "batch_size": (0, math.inf),
          "max_reuse": (-1, math.inf)}


@dataclass(frozen=True)
class ReplayCell:
    """What a replay cell's summary says beyond its figures: what was stored, and the machine limit its rate
    is a share of."""
    item_bytes: int            # bytes per stored item
    capacity_items: int        # items held: the workload's capacity x capacity_scale
    capacity_scale: float
    page_cache: str            # on disk: the page cache as timing began
    bound: str                 # the machine limit the rate is a fraction of (rlbench.machine.limits)
    max_reuse: int             # the samples an item may serve (None: unbounded)
    limit_gbps: float          # that limit, as measured (None when unknown)
    limit_frac: float          # steps/s median x item_bytes / limit_gbps


class Replay(Family):
    name = "replay"
    order = 40
    kinds = ("replay",)
    workload_prefix = "replay/"
    workload_example = "replay/DQN-Qbert"
    # bytes per stored item; items held (the workload's capacity x capacity_scale) and that scale; on disk,
    # the page cache as timing began; the machine limit the rate is a fraction of, and that limit when the
    # session measured it itself (host-to-device copies)
    info_keys = ("item_bytes", "capacity_items", "capacity_scale", "page_cache", "bound", "bound_gbps", "max_reuse")
    identity_keys = ("item_bytes", "capacity_items", "capacity_scale", "page_cache", "bound", "max_reuse")
    summary_keys = ("limit_gbps", "limit_frac")
    record_keys = ("limits",)
    cell_type = ReplayCell
    metrics = (
        Metric("bound_gbps", "GB/s", "the limit the session measured itself (e.g. a host-to-device copy), used when "
               "the run's limits have no figure named `bound`", source="info", summary=(), label="bound GB/s"),
        Metric("add_items_per_s", "items/s", "items written into the store (all actors)", source="session"),
        Metric("add_mb_per_s", "MB/s", "bytes written into the store", source="session"),
        Metric("sample_items_per_s", "items/s", "items sampled and read by the learner", source="session"),
        Metric("sample_mb_per_s", "MB/s", "bytes sampled and read", source="session"),
        Metric("sample_latency_p50_ms", "ms", "median time of one sample call", source="session",
               label="sample p50 ms"),
        Metric("sample_latency_p99_ms", "ms", "99th percentile of it", source="session", label="sample p99 ms"),
        Metric("sample_latency_p999_ms", "ms", "99.9th percentile of it", source="session", label="sample p99.9 ms"),
        Metric("sample_latency_max_ms", "ms", "the slowest sample call", source="session", label="sample max ms"),
        Metric("add_latency_p99_ms", "ms", "target mode: 99th percentile add time from each op's scheduled start "
               "(no coordinated omission)", source="session", label="add p99 ms"),
        Metric("add_latency_max_ms", "ms", "target mode: the slowest add, from its scheduled start",
               source="session", label="add max ms"),
        Metric("keeps_up", "flag", "target mode: 1 when neither the add nor the sample schedule fell behind at any "
               "point of the window (an op started, or was still owed at the end, later than the tolerance past its "
               "scheduled start: 50 ms, or one op's period when longer), else 0", source="session"),
        Metric("sample_lag_max_ms", "ms", "target mode: the most a sample started (or was owed) behind its scheduled "
               "start over the window", source="session", summary=("median", "max"), label="sample lag max ms"),
        Metric("add_lag_max_ms", "ms", "target mode: the most an add started (or was owed) behind its scheduled start "
               "over the window", source="session", summary=("median", "max"), label="add lag max ms"),
        Metric("late_ops_frac", "share", "target mode: the share of the window's scheduled adds and samples that "
               "started later than the tolerance", source="session", label="late ops share"),
        Metric("max_reuse", "count", "the samples an item may serve in this cell (bounded-reuse workloads in target "
               "and max-both mode); absent where unbounded", source="info", summary=(), label="reuse bound"),
        Metric("reuse_mean", "ratio", "samples per item: the mean over the items sampled, from the session's first "
               "sample to the window's end (read from each sampled item's id)", source="session",
               label="reuse mean"),
        Metric("reuse_max", "count", "the most samples any one item served, over the same span", source="session",
               summary=("median", "max"), label="reuse max"),
        Metric("limit_gbps", "GB/s", "the machine limit the cell is bound by: the run's measured figure named "
               "`bound` (rlbench.machine.limits), else the session's bound_gbps", source="family",
               label="limit GB/s"),
        Metric("limit_frac", "share", "steps_per_s_median x item_bytes / limit_gbps: the share of that limit the "
               "store reached", source="family", label="share of limit"),
    )

    def workload_info(self, env_id: str):
        """What replay backends store and sample: one of the survey's workloads."""
        from rlbench.envs import EnvInfo
        from rlbench.families.replay import driver
        if env_id[len(self.workload_prefix):] not in driver.WORKLOADS:
            raise UsageError(f"unknown replay workload '{env_id}' (valid: "
                             f"{', '.join(self.workload_prefix + w for w in driver.WORKLOADS)})")
        return EnvInfo(env_id, self.name, kwargs=driver.KWARGS, choices=driver.CHOICES, ranges=RANGES)

    def check_workload(self, workload) -> None:
        from rlbench.families.replay.driver import replay_spec
        replay_spec(workload)

    def before_sweep(self, suite, out_dir: str, record) -> dict:
        """The machine limits replay figures are fractions of, measured on this run's filesystem (once per
        run: a resumed run keeps its own); a failure is recorded ({"error": ...}) and the sweep runs without
        them."""
        ours = any(registry.get(c.adapter).kind in self.kinds for c in suite.cells)
        if not (ours and suite.limits["measure"]) or "limits" in record.measured:
            return {}
        from rlbench.machine.limits import measure_in_subprocess, summary_line
        sizes = suite.limits
        print("rlbench: limits: ", end="", file=sys.stderr, flush=True)  # the figures end the line (~15 s)
        try:
            limits = measure_in_subprocess(out_dir, sizes["memcpy_mb"], sizes["disk_mb"], sizes["repeats"])
        except KeyboardInterrupt:
            print(file=sys.stderr)
            raise
        print(summary_line(limits), file=sys.stderr)
        return {"limits": limits}

    def cell_part(self, benchmark, first, measured: dict):
        if first.get("kind") not in self.kinds:
            return None
        gbps = self.limit_gbps(benchmark, first.get("bound"), measured.get("limits") or {})
        item_bytes = first.get("item_bytes")
        frac = (None if gbps is None or item_bytes is None else
                benchmark.stat("steps_per_s").median * item_bytes / (gbps * 1e9))
        return ReplayCell(**{k: first.get(k) for k in self.identity_keys}, limit_gbps=gbps, limit_frac=frac)

    @staticmethod
    def limit_gbps(benchmark, bound, limits: dict):
        """The limit a replay cell is bound by: the run's measured figure of that name (memcpy_1core or
        memcpy_1core_gbps, ...), else the one its session measured (bound_gbps)."""
        if not bound:
            return None
        figure = limits.get(bound) or limits.get(f"{bound}_gbps")
        if isinstance(figure, dict) and figure.get("median"):
            return figure["median"]
        own = benchmark.stat("bound_gbps")
        return own.median if own.n else None

    def exports(self, results, out_dir: str) -> dict:
        from rlbench.families.replay.report import replay_csv
        return replay_csv(results)

    def section(self, results, out_dir: str) -> str:
        from rlbench.families.replay.report import replay_section
        return replay_section(results)
