"""The results model: Run (one repeat) -> Benchmark (one cell) -> ResultSet (a run dir), all
immutable, read from results.jsonl (rlbench.results.store), the source of truth; CSV and HTML are rebuilt from
it. A cell's summary is computed once, when first asked for, and every view (summary.csv, the HTML tables,
exports) reads that one. Which figures a row and a summary carry comes from the metrics registry
(rlbench.results.metrics); only the identity columns are listed here."""
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType

from rlbench import registry
from rlbench.errors import UsageError
from rlbench.results import metrics
from rlbench.results.frozen import FrozenDict, freeze, thaw
from rlbench.results.record import RunRecord
from rlbench.results.stats import Summary, summarize
from rlbench.results.store import RESULTS, read_rows
from rlbench.results.summary import CellSummary

ENV = "env.json"

# What each family's sessions may add to a row, what summary.csv repeats of it from a cell's first ok run,
# and the summary columns a family computes, in family order (rlbench.registry.FAMILIES)
FAMILY_INFO = tuple(k for f in registry.families() for k in f.info_keys)
FAMILY_IDENTITY = tuple(k for f in registry.families() for k in f.identity_keys)
FAMILY_SUMMARY = tuple(k for f in registry.families() for k in f.summary_keys)

METRICS = metrics.metrics()                 # every figure, in registry order: the harness's, then each family's
SESSION_METRICS = metrics.session_metrics()

# results.csv (tidy: one row per repeat): what ran, the harness's figures, what the families' sessions told
# (their info: facts and figures), how the cell was placed, the sessions' figures, the outcome
RUN_IDENTITY = ("schema", "run_id", "suite", "cell_id", "cell_index", "adapter", "kind", "env", "env_kwargs",
                "num_envs", "workers", "batch_size", "policy", "device", "options", "frameskip", "seed", "repeat",
                "profiled")
RUN_SETTINGS = ("omp_threads", "torch_threads", "affinity", "cpus", "placement", "node", "node_class")
RUN_OUTCOME = ("status", "error", "log", "profile", "started_at")
HARNESS_FIGURES = tuple(n for n, m in METRICS.items() if m.family == "all" and m.row)
RUN_COLUMNS = (*RUN_IDENTITY, *HARNESS_FIGURES, *FAMILY_INFO, *RUN_SETTINGS, *SESSION_METRICS, *RUN_OUTCOME)

# summary.csv (one row per cell): what ran (from its first ok run), n and status, each figure's aggregates
# (Metric.columns: steps_per_s its median, CI, IQR, CV, min and max), the columns families compute, the outcome
SUMMARY_IDENTITY = ("schema", "suite", "cell_id", "adapter", "kind", "env", "env_kwargs", "num_envs", "workers",
                    "batch_size", "policy", "device", "options", "frameskip", "omp_threads", "cpus")
_SUMMARIZED = tuple(m for m in METRICS.values() if m.source != "family" and m.summary)
SUMMARY_FIGURES = tuple(c for m in _SUMMARIZED for c in m.columns())
FAMILY_FIGURES = tuple(n for n, m in METRICS.items() if m.source == "family")
SUMMARY_COLUMNS = (*SUMMARY_IDENTITY, *FAMILY_IDENTITY, "n", "status", *SUMMARY_FIGURES, *FAMILY_FIGURES,
                   *(k for k in FAMILY_SUMMARY if k not in FAMILY_FIGURES), "warning", "error", "profile")

for _columns in (RUN_COLUMNS, SUMMARY_COLUMNS):
    if len(set(_columns)) != len(_columns):
        raise ValueError(f"a column twice: {sorted(c for c in set(_columns) if _columns.count(c) > 1)}")


def frames(row: dict) -> dict:
    """Accounting: frames = env steps x frameskip, derived in one place."""
    if row.get("env_steps") is not None:
        row["frames"] = row["env_steps"] * row["frameskip"]
        row["frames_per_s"] = row["steps_per_s"] * row["frameskip"]
    return row


# A run's own fields: what the harness records about every repeat (identity, its own figures, outcome). The
# session's figures are its counters (SESSION_METRICS, as google/benchmark's user counters); anything else the
# cell reported (workers, placement, replay store facts, compile time, ...) is its info.
RUN_FIELDS = (*(k for k in RUN_IDENTITY if k not in ("workers", "batch_size")),
              *(n for n in HARNESS_FIGURES if METRICS[n].source == "harness"), *RUN_OUTCOME)


@dataclass(frozen=True)
class Run(Mapping):
    """One repeat, immutable (its lists as tuples, its tables as FrozenDict): its fields, counters and info,
    read as one mapping (`run["steps_per_s"]`, `run.get("workers")`) in the row's key order, so it reads like
    the results.jsonl line it came from; the keys read most are also typed properties (`run.steps_per_s`,
    `run.workers`: what `.get` of the key gives)."""
    fields: Mapping
    counters: Mapping
    info: Mapping
    order: tuple

    @classmethod
    def from_row(cls, row: Mapping) -> "Run":
        fields, counters, info = {}, {}, {}
        for k, v in row.items():
            (fields if k in _FIELDS else counters if k in _COUNTERS else info)[k] = freeze(v)
        return cls(MappingProxyType(fields), MappingProxyType(counters), MappingProxyType(info), tuple(row))

    @classmethod
    def of(cls, row: Mapping) -> "Run":
        """The row as a Run: itself when it is one already."""
        return row if isinstance(row, Run) else cls.from_row(row)

    def __getitem__(self, key):
        for part in (self.fields, self.counters, self.info):
            if key in part:
                return part[key]
        raise KeyError(key)

    def __iter__(self):
        return iter(self.order)

    def __len__(self):
        return len(self.order)

    # -- the keys read most, typed (each as `.get(key)` reads it: None when the row lacks it, unless told) --

    @property
    def cell_id(self) -> str:
        return self.fields["cell_id"]

    @property
    def status(self) -> str:
        return self.fields["status"]

    @property
    def repeat(self) -> int:
        return self.fields["repeat"]

    @property
    def cell_index(self) -> int:
        """The cell's place in its suite (0 when the row lacks it)."""
        return self.get("cell_index", 0)

    @property
    def suite(self):
        """The suite's name (str)."""
        return self.get("suite")

    @property
    def adapter(self):
        """The strategy's registry name (str; every stored row has it)."""
        return self.get("adapter")

    @property
    def kind(self):
        """The adapter kind, the family it belongs to (str)."""
        return self.get("kind")

    @property
    def env(self):
        """The env id (str)."""
        return self.get("env")

    @property
    def env_kwargs(self):
        """The env's keyword arguments (a FrozenDict), None when the row has none."""
        return self.get("env_kwargs")

    @property
    def num_envs(self):
        """Envs stepped at once (int)."""
        return self.get("num_envs")

    @property
    def workers(self):
        """Worker processes (int), None where the strategy has none or did not say."""
        return self.get("workers")

    @property
    def batch_size(self):
        """Envs per batch (int), None where the strategy steps every env at once."""
        return self.get("batch_size")

    @property
    def policy(self):
        """The policy's label (str)."""
        return self.get("policy")

    @property
    def device(self):
        """Where the policy ran (str: cpu, cuda, ...)."""
        return self.get("device")

    @property
    def options(self):
        """The strategy's options (a FrozenDict), None when the row has none."""
        return self.get("options")

    @property
    def frameskip(self):
        """Frames per env step (int: 4 on Atari)."""
        return self.get("frameskip")

    @property
    def profiled(self) -> bool:
        """The extra repeat run under py-spy (never in the cell's statistics); False when the row lacks it."""
        return bool(self.get("profiled"))

    @property
    def omp_threads(self):
        """OMP_NUM_THREADS the cell ran with (int), None when unset."""
        return self.get("omp_threads")

    @property
    def cpus(self):
        """Cores the cell could run on (int)."""
        return self.get("cpus")

    @property
    def steps_per_s(self):
        """Env steps per second over the timed window (float, steps/s): the figure strategies are compared on;
        None when the repeat did not finish."""
        return self.get("steps_per_s")

    @property
    def env_steps(self):
        """Env steps made in the timed window, over all envs (int, steps)."""
        return self.get("env_steps")

    @property
    def seconds(self):
        """Length of the timed window (float, s)."""
        return self.get("seconds")

    @property
    def policy_s(self):
        """Time inside the policy over the timed window (float, s); None where the strategy acts inside its own
        workers."""
        return self.get("policy_s")

    @property
    def env_s(self):
        """seconds - policy_s: time outside the policy (float, s)."""
        return self.get("env_s")

    @property
    def cpu_util(self):
        """Busy cores of the whole process tree over the timed window (float, cores: 1.0 = one core)."""
        return self.get("cpu_util")

    @property
    def wall_s(self):
        """The whole repeat as the harness timed it, process start to cleanup (float, s)."""
        return self.get("wall_s")

    @property
    def error(self):
        """Why the repeat failed (str), None or '' when it did not."""
        return self.get("error")

    @property
    def profile(self):
        """The py-spy profile's path in the run folder (str), None or '' when none."""
        return self.get("profile")

    @property
    def started_at(self):
        """When the repeat started (str: ISO 8601, UTC, to the second)."""
        return self.get("started_at")

    @property
    def job(self) -> tuple:
        """(cell_id, repeat, profiled): the job it finished, as a sweep counts what is done."""
        return self.cell_id, self.repeat, self.profiled

    @property
    def ok(self) -> bool:
        """Counts in the cell's statistics: a finished repeat, not the extra profiled one."""
        return self.status == "ok" and not self.profiled

    def to_row(self) -> dict:
        """The row as plain JSON-able values (lists and dicts again)."""
        return {k: thaw(self[k]) for k in self.order}


_FIELDS, _COUNTERS = frozenset(RUN_FIELDS), frozenset(SESSION_METRICS)


@dataclass(frozen=True)
class Benchmark:
    """All runs of one cell, fixed when it is built; its statistics and its summary row are computed once,
    when first asked for. measured: what the families measured before the sweep (RunRecord.measured, by env.json
    key), which their part of the cell's summary may read (the replay family: the machine's limits)."""
    cell_id: str
    runs: tuple
    measured: Mapping = None

    def __post_init__(self):
        object.__setattr__(self, "runs", tuple(self.runs))

    @cached_property
    def ok_runs(self) -> tuple:
        return tuple(r for r in self.runs if r.ok)

    @property
    def first(self) -> Run:
        return self.runs[0]

    def stat(self, key: str) -> Summary:
        """The statistics of one figure over the ok runs (a derived one, policy_frac, computed per run)."""
        if key not in self._stats:
            m = METRICS.get(key)
            value = m.derive if m is not None and m.derive is not None else (lambda r: r.get(key))
            self._stats[key] = summarize([value(r) for r in self.ok_runs])
        return self._stats[key]

    @cached_property
    def _stats(self) -> dict:
        return {}

    @property
    def status(self) -> str:
        statuses = {r.status for r in self.runs if not r.profiled}
        if statuses == {"ok"}:
            return "ok"
        return "ok+" + "+".join(sorted(statuses - {"ok"})) if "ok" in statuses else "+".join(sorted(statuses))

    @cached_property
    def summary(self) -> CellSummary:
        """The cell over its repeats, computed once: what ran from its first ok run, each registered figure's
        statistics, then each family's part (Family.cell_part)."""
        ok = self.ok_runs
        first = ok[0] if ok else self.first
        errors = sorted({r.error for r in self.runs if r.error and r.status != "ok"})
        s = self.stat("steps_per_s")
        stats = MappingProxyType({m.name: self.stat(m.name) for m in _SUMMARIZED})
        parts = MappingProxyType({f.name: f.cell_part(self, first, self.measured or {}) for f in registry.families()})
        return CellSummary(
            cell_id=self.cell_id, cell_index=first.cell_index, suite=first.suite, adapter=first.adapter,
            kind=first.kind, env=first.env, env_kwargs=first.env_kwargs or FrozenDict(), num_envs=first.num_envs,
            workers=first.workers, batch_size=first.batch_size, policy=first.policy, device=first.device,
            options=first.options or FrozenDict(), frameskip=first.frameskip, omp_threads=first.omp_threads,
            cpus=first.cpus, n=s.n, status=self.status, warning=s.warning if ok else "", error="; ".join(errors),
            profile=next((r.profile for r in self.runs if r.profile), ""), stats=stats,
            parts=MappingProxyType({k: v for k, v in parts.items() if v is not None}))


def _superseded_lost(runs: list) -> list:
    """A repeat lost with its node and run again (`rlbench resume`) counts once: the later row."""
    def key(r):
        return r.get("repeat"), r.profiled
    later = {}
    for i, r in enumerate(runs):
        later[key(r)] = i
    return [r for i, r in enumerate(runs) if r.status != "lost" or later[key(r)] == i]


@dataclass(frozen=True)
class ResultSet:
    """One run directory: env.json (`env` as written, `record` its RunRecord) and its benchmarks (cell_id ->
    Benchmark, read-only, in first-seen order), built once; each cell's summary is computed once and read by
    every view."""
    env: dict
    benchmarks: Mapping
    skipped: tuple = ()  # line numbers of results.jsonl that are not rows
    record: RunRecord = None  # env.json as a RunRecord (from_rows reads it once): what the report reads

    @classmethod
    def from_rows(cls, rows, env=None, skipped=()) -> "ResultSet":
        env = env or {}
        grouped = {}
        for row in rows:
            run = Run.of(row)
            grouped.setdefault(run.cell_id, []).append(run)
        grouped = {c: _superseded_lost(runs) for c, runs in grouped.items()}
        record = RunRecord.from_json(env)
        benchmarks = {c: Benchmark(c, tuple(runs), record.measured) for c, runs in grouped.items()}
        return cls(env, MappingProxyType(benchmarks), tuple(skipped), record)

    @classmethod
    def load(cls, run_dir: str) -> "ResultSet":
        path = os.path.join(run_dir, RESULTS)
        if not os.path.exists(path):
            raise UsageError(f"no {RESULTS} in {run_dir} (is it a run directory?)")
        env_path = os.path.join(run_dir, ENV)
        try:
            with open(env_path) as f:
                env = json.load(f)
        except FileNotFoundError:
            env = {}
        except ValueError as exc:
            raise UsageError(f"{env_path} is not valid JSON ({exc})") from None
        skipped = []
        rows = read_rows(path, skipped)
        return cls.from_rows(rows, env if isinstance(env, dict) else {}, skipped)

    @cached_property
    def cells(self) -> Mapping:
        """cell_id -> its CellSummary (Benchmark.summary, computed once), one per cell, in the order the suite
        lists its cells: what every view of a cell reads."""
        ordered = sorted(self.benchmarks.values(), key=lambda b: b.first.cell_index)
        return MappingProxyType({b.cell_id: b.summary for b in ordered})

    def summary_rows(self) -> list:
        """summary.csv's rows, one per cell, in the suite's order (fresh dicts of what is computed once)."""
        return [{column: cell.value(column) for column in SUMMARY_COLUMNS} for cell in self.cells.values()]

    def summary_frame(self):
        """summary.csv as a pandas DataFrame, in its column order."""
        import pandas as pd
        return pd.DataFrame(self.summary_rows(), columns=list(SUMMARY_COLUMNS), dtype=object)

    def runs_frame(self):
        """results.csv as a pandas DataFrame, one row per repeat, in its column order."""
        import pandas as pd
        return pd.DataFrame([r.to_row() for r in self.runs], columns=list(RUN_COLUMNS), dtype=object)

    @property
    def runs(self) -> list:
        """Every Run, one per repeat, cell by cell."""
        return [r for b in self.benchmarks.values() for r in b.runs]
