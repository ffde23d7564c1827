"""Results model, as pyperf has it: Run (one repeat) -> Benchmark (one cell) -> ResultSet (a run dir),
read from results.jsonl (rlbench.results.store), the source of truth; CSV and HTML are rebuilt from it."""
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType

from rlbench import SCHEMA_VERSION, registry
from rlbench.results.metrics import SESSION_METRICS
from rlbench.results.stats import Summary, summarize
from rlbench.results.store import RESULTS, read_rows

ENV = "env.json"

# What each family's sessions may add to a row, what summary.csv repeats of it from a cell's first ok run,
# and the summary columns a family computes, in family order (rlbench.registry.FAMILIES)
FAMILY_INFO = tuple(k for f in registry.families() for k in f.info_keys)
FAMILY_IDENTITY = tuple(k for f in registry.families() for k in f.identity_keys)
FAMILY_SUMMARY = tuple(k for f in registry.families() for k in f.summary_keys)

# results.csv columns, in order (tidy: one row per repeat)
RUN_COLUMNS = (
    "schema", "run_id", "suite", "cell_id", "cell_index", "adapter", "kind", "env", "env_kwargs", "num_envs", "workers",
    "batch_size", "policy", "device", "options", "frameskip", "seed", "repeat", "profiled", "env_steps",
    "frames", "units", "seconds", "steps_per_s", "frames_per_s", "latency_p50_ms", "latency_p95_ms",
    "latency_p99_ms", "latency_p999_ms", "latency_max_ms", "policy_s", "env_s", "cpu_util", "peak_rss_mb", "setup_s",
    "runtime_init_s", *FAMILY_INFO, "wall_s", "omp_threads",
    "torch_threads", "affinity", "cpus", "placement", *SESSION_METRICS,
    "status", "error", "log", "profile", "started_at",
)
SUMMARY_COLUMNS = (
    "schema", "suite", "cell_id", "adapter", "kind", "env", "env_kwargs", "num_envs", "workers", "batch_size",
    "policy", "device", "options", "frameskip", "omp_threads", "cpus", *FAMILY_IDENTITY, "n", "status",
    "steps_per_s_median", "steps_per_s_ci_low",
    "steps_per_s_ci_high", "ci_method", "steps_per_s_iqr", "steps_per_s_cv", "steps_per_s_min", "steps_per_s_max",
    "frames_per_s_median", "latency_p50_ms_median", "latency_p99_ms_median", "policy_frac_median",
    "cpu_util_median", "peak_rss_mb_max", *(f"{m}_median" for m in SESSION_METRICS), *FAMILY_SUMMARY,
    "warning", "error", "profile",
)


def frames(row: dict) -> dict:
    """Accounting: frames = env steps x frameskip, derived in one place."""
    if row.get("env_steps") is not None:
        row["frames"] = row["env_steps"] * row["frameskip"]
        row["frames_per_s"] = row["steps_per_s"] * row["frameskip"]
    return row


# A run's own fields: what the harness records about every repeat (identity, protocol figures, outcome).
# The session's figures are its counters (SESSION_METRICS, as google/benchmark's user counters); anything
# else the cell reported (workers, placement, replay store facts, ...) is its info.
RUN_FIELDS = (
    "schema", "run_id", "suite", "cell_id", "cell_index", "adapter", "kind", "env", "env_kwargs", "num_envs",
    "policy", "device", "options", "frameskip", "seed", "repeat", "profiled", "env_steps", "frames", "units",
    "seconds", "steps_per_s", "frames_per_s", "latency_p50_ms", "latency_p95_ms", "latency_p99_ms",
    "latency_p999_ms", "latency_max_ms", "policy_s", "env_s", "cpu_util", "peak_rss_mb", "setup_s", "wall_s",
    "status", "error", "log", "profile", "started_at",
)


@dataclass(frozen=True)
class Run(Mapping):
    """One repeat, immutable: its fields, counters and info, read as one mapping (`run["steps_per_s"]`,
    `run.get("workers")`) in the row's key order, so it reads like the results.jsonl line it came from."""
    fields: Mapping
    counters: Mapping
    info: Mapping
    order: tuple

    @classmethod
    def from_row(cls, row: Mapping) -> "Run":
        fields = {k: v for k, v in row.items() if k in _FIELDS}
        counters = {k: v for k, v in row.items() if k in _COUNTERS}
        info = {k: v for k, v in row.items() if k not in _FIELDS and k not in _COUNTERS}
        return cls(MappingProxyType(fields), MappingProxyType(counters), MappingProxyType(info), tuple(row))

    def __getitem__(self, key):
        for part in (self.fields, self.counters, self.info):
            if key in part:
                return part[key]
        raise KeyError(key)

    def __iter__(self):
        return iter(self.order)

    def __len__(self):
        return len(self.order)

    @property
    def cell_id(self) -> str:
        return self.fields["cell_id"]

    @property
    def status(self) -> str:
        return self.fields["status"]

    @property
    def ok(self) -> bool:
        """Counts in the cell's statistics: a finished repeat, not the extra profiled one."""
        return self.status == "ok" and not self.fields.get("profiled")

    def to_row(self) -> dict:
        return {k: self[k] for k in self.order}


_FIELDS, _COUNTERS = frozenset(RUN_FIELDS), frozenset(SESSION_METRICS)


@dataclass
class Benchmark:
    """All runs of one cell; its statistics are computed once, when first asked for."""
    cell_id: str
    runs: list = field(default_factory=list)

    @cached_property
    def ok_runs(self) -> list:
        return [r for r in self.runs if r.ok]

    @property
    def first(self) -> Run:
        return self.runs[0]

    def stat(self, key: str) -> Summary:
        if key not in self._stats:
            self._stats[key] = summarize([r.get(key) for r in self.ok_runs])
        return self._stats[key]

    @cached_property
    def _stats(self) -> dict:
        return {}

    @property
    def status(self) -> str:
        statuses = {r["status"] for r in self.runs if not r.get("profiled")}
        if statuses == {"ok"}:
            return "ok"
        return "ok+" + "+".join(sorted(statuses - {"ok"})) if "ok" in statuses else "+".join(sorted(statuses))

    def summary_row(self, limits: dict = None) -> dict:
        """limits: the run's env["limits"] (rlbench.machine.limits), what a replay cell's rate is a fraction of.
        Cheap once computed: every statistic it reads is kept by `stat`."""
        s = self.stat("steps_per_s")
        ok = self.ok_runs
        first = ok[0] if ok else self.first
        policy_frac = summarize([r["policy_s"] / r["seconds"] for r in ok if r.get("policy_s") is not None])
        errors = sorted({r["error"] for r in self.runs if r.get("error") and r["status"] != "ok"})
        profile = next((r["profile"] for r in self.runs if r.get("profile")), "")
        row = {k: first.get(k) for k in ("schema", "suite", "cell_id", "adapter", "kind", "env", "env_kwargs",
                                         "num_envs", "workers", "batch_size", "policy", "device", "options",
                                         "frameskip", "omp_threads", "cpus", *FAMILY_IDENTITY)}
        row.update(
            n=s.n, status=self.status, steps_per_s_median=s.median, steps_per_s_ci_low=s.ci_low,
            steps_per_s_ci_high=s.ci_high, ci_method=s.ci_method, steps_per_s_iqr=s.iqr, steps_per_s_cv=s.cv,
            steps_per_s_min=s.minimum, steps_per_s_max=s.maximum,
            frames_per_s_median=self.stat("frames_per_s").median,
            latency_p50_ms_median=self.stat("latency_p50_ms").median,
            latency_p99_ms_median=self.stat("latency_p99_ms").median,
            policy_frac_median=policy_frac.median, cpu_util_median=self.stat("cpu_util").median,
            peak_rss_mb_max=max((r["peak_rss_mb"] for r in ok), default=float("nan")),
            **{f"{m}_median": self.stat(m).median for m in SESSION_METRICS},
            warning=s.warning if ok else "", error="; ".join(errors), profile=profile, schema=SCHEMA_VERSION)
        for family in registry.families():
            row.update(family.summary_extras(self, row, limits or {}))
        return row


@dataclass
class ResultSet:
    """One run directory: its environment fingerprint and its benchmarks, in first-seen order."""
    env: dict
    benchmarks: dict
    skipped: list = field(default_factory=list)  # line numbers of results.jsonl that are not rows

    @classmethod
    def from_rows(cls, rows, env=None) -> "ResultSet":
        benchmarks = {}
        for row in rows:
            run = row if isinstance(row, Run) else Run.from_row(row)
            benchmarks.setdefault(run.cell_id, Benchmark(run.cell_id)).runs.append(run)
        return cls(env or {}, benchmarks)

    @classmethod
    def load(cls, run_dir: str) -> "ResultSet":
        path = os.path.join(run_dir, RESULTS)
        if not os.path.exists(path):
            from rlbench.errors import UsageError
            raise UsageError(f"no {RESULTS} in {run_dir} (is it a run directory?)")
        env_path = os.path.join(run_dir, ENV)
        try:
            with open(env_path) as f:
                env = json.load(f)
        except FileNotFoundError:
            env = {}
        except ValueError as exc:
            from rlbench.errors import UsageError
            raise UsageError(f"{env_path} is not valid JSON ({exc})") from None
        skipped = []
        results = cls.from_rows(read_rows(path, skipped), env if isinstance(env, dict) else {})
        results.skipped = skipped
        return results

    def summary_rows(self) -> list:
        """One row per cell, in the order the suite lists its cells: a fresh copy of what is computed once."""
        return [dict(row) for row in self._summary_rows]

    @cached_property
    def _summary_rows(self) -> list:
        benchmarks = sorted(self.benchmarks.values(), key=lambda b: b.first.get("cell_index", 0))
        return [b.summary_row(self.env.get("limits")) for b in benchmarks]

    def summary_frame(self):
        """The summaries as a pandas DataFrame, columns in summary.csv's order (the tabular view exporters
        and reports read)."""
        import pandas as pd
        return pd.DataFrame(self.summary_rows(), columns=list(SUMMARY_COLUMNS), dtype=object)

    def runs_frame(self):
        """Every run as a pandas DataFrame, columns in results.csv's order."""
        import pandas as pd
        return pd.DataFrame([r.to_row() for r in self.rows], columns=list(RUN_COLUMNS), dtype=object)

    @property
    def rows(self) -> list:
        return [r for b in self.benchmarks.values() for r in b.runs]
