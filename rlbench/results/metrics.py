"""The one registry of what rlbench measures: every figure of a results.csv or summary.csv row, with its unit,
format, label, family, source, aggregation and one line saying what it means. The sessions' allowed names, the
CSV columns, table headers and formats and docs/metrics.md (`python -m rlbench.results.metrics`) are read from
here. The harness's figures are defined here (HARNESS), each family's in its package (`Family.metrics`),
assembled on first use: this module imports nothing of rlbench at import time.
"""
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache

_FORMAT = {"steps/s": ",.0f", "frames/s": ",.0f", "units/s": ",.1f", "items/s": ",.0f", "updates/s": ",.1f",
           "MB/s": ",.1f", "GB/s": ".2f", "ms": ".3f", "s": ".3g", "share": ".1%", "cores": ".2f", "MB": ",.0f",
           "steps": ",.0f", "frames": ",.0f", "units": ",.0f", "count": ",.0f", "ratio": ".3g", "flag": ".0f",
           "return": ".1f", "versions": ".2f", "items": ".2f", "us": ",.1f"}

# Where a figure comes from: what the harness measures around every session (rlbench.running.timing, .runner,
# .child), what a session reports over the timed window (Metrics.read) or in its `info`, what the summary
# derives from a run's other fields, and what a family computes for a cell (Family.cell_part)
SOURCES = {"harness": "harness", "session": "session", "info": "session info", "derived": "derived",
           "family": "family summary"}

# summary.csv aggregates of a figure over a cell's ok repeats: column suffix, rlbench.results.stats.Summary field
AGGREGATES = {"median": (("_median", "median"),), "ci": (("_ci_low", "ci_low"), ("_ci_high", "ci_high")),
              "iqr": (("_iqr", "iqr"),), "cv": (("_cv", "cv"),), "min": (("_min", "minimum"),),
              "max": (("_max", "maximum"),)}
_AGG_WORDS = {"median": "median", "ci_low": "CI low", "ci_high": "CI high", "iqr": "IQR", "cv": "CV",
              "minimum": "min", "maximum": "max"}
_AGG_TEXT = {"median": "median over the cell's ok repeats of",
             "ci_low": "lower bound of the 95% CI of the median of",
             "ci_high": "upper bound of the 95% CI of the median of",
             "iqr": "interquartile range over the repeats of",
             "cv": "coefficient of variation (stdev / mean) over the repeats of",
             "minimum": "smallest over the repeats of", "maximum": "largest over the repeats of"}
CI_METHOD = "ci_method"  # text beside the CI columns: how the interval was computed (rlbench.results.stats)


@dataclass(frozen=True)
class Metric:
    """One figure. `summary` names its summary.csv aggregates (AGGREGATES, in column order; () = none); a
    `family`-sourced figure is one summary.csv column of its own name that its family computes."""
    name: str
    unit: str
    description: str
    source: str = "harness"
    summary: tuple = ("median",)
    label: str = ""                       # short column header; default: from the name
    derive: Callable = None               # source "derived": run -> value (None when the run has none)
    family: str = ""                      # set as the registry assembles: "all" (the harness) or a family's name
    of: str = ""                          # a summary column: the figure it aggregates ...
    stat: str = ""                        # ... and the rlbench.results.stats.Summary field it is

    def __post_init__(self):
        if self.source not in SOURCES:
            raise ValueError(f"metric {self.name}: source {self.source!r} (valid: {', '.join(SOURCES)})")
        if self.unit not in _FORMAT:
            raise ValueError(f"metric {self.name}: unit {self.unit!r} (valid: {', '.join(_FORMAT)})")
        unknown = [a for a in self.summary if a not in AGGREGATES]
        if unknown:
            raise ValueError(f"metric {self.name}: aggregate {unknown[0]!r} (valid: {', '.join(AGGREGATES)})")
        if not self.label:
            object.__setattr__(self, "label", _label(self.name))

    @property
    def session(self) -> bool:
        """A session's Metrics.read may report it."""
        return self.source == "session"

    @property
    def row(self) -> bool:
        """A results.csv column: one value per repeat, as measured."""
        return self.source in ("harness", "session", "info")

    def format(self, value) -> str:
        """Shown in tables: '-' for a missing value, else in the unit's usual precision."""
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "-"
        if not isinstance(value, (int, float)):
            return str(value)
        return format(value, _FORMAT[self.unit])

    def columns(self) -> tuple:
        """Its summary.csv columns, in order (CI_METHOD follows a CI)."""
        if self.source == "family":
            return (self.name,)
        names = []
        for agg in self.summary:
            names += [self.name + suffix for suffix, _ in AGGREGATES[agg]] + ([CI_METHOD] if agg == "ci" else [])
        return tuple(names)

    def summary_columns(self) -> tuple:
        """A Metric per numeric summary.csv column (what `metric(column)` returns): its header, unit, format
        and description."""
        if self.source == "family":
            return (self,)
        out = []
        for agg in self.summary:
            for suffix, stat in AGGREGATES[agg]:
                label = self.label if len(self.summary) == 1 else f"{self.label} {_AGG_WORDS[stat]}"
                out.append(replace(self, name=self.name + suffix, label=label, summary=(), of=self.name,
                                   unit="share" if stat == "cv" else self.unit, stat=stat, derive=None,
                                   description=f"{_AGG_TEXT[stat]} {self.name} ({self.description})"))
        return tuple(out)


def _label(name: str) -> str:
    words = name.replace("_per_s", "/s").replace("_gbps", " GB/s").replace("_frac", " share").split("_")
    return " ".join({"mb": "MB", "mb/s": "MB/s", "gb": "GB", "gb/s": "GB/s", "h2d": "H2D"}.get(w, w) for w in words)


def _policy_frac(run):   # run: a Run (rlbench.results.model)
    policy_s, seconds = run.policy_s, run.seconds
    return policy_s / seconds if policy_s is not None and seconds else None


HARNESS = (  # measured by the harness around every session, one value per repeat (family "all")
    Metric("env_steps", "steps", "env steps made in the timed window, over all envs", summary=(), label="env steps"),
    Metric("frames", "frames", "env_steps x frameskip (Atari: 4)", summary=()),
    Metric("units", "units", "units of work in the timed window: step() calls (a vector step, a rollout, a scan)",
      summary=()),
    Metric("seconds", "s", "length of the timed window, from the end of warm-up to the end of its last unit",
      summary=()),
    Metric("steps_per_s", "steps/s", "env steps per second over the timed window, env_steps / seconds (the figure "
      "strategies are compared on)", summary=("median", "ci", "iqr", "cv", "min", "max"), label="steps/s"),
    Metric("frames_per_s", "frames/s", "steps_per_s x frameskip, to match published FPS", label="frames/s"),
    Metric("units_per_s", "units/s", "units of work per second over the timed window", summary=(), label="units/s"),
    Metric("latency_p50_ms", "ms", "median time of one unit of work: for a 16-env vector step, the time of 16 env "
      "steps", label="p50 ms"),
    Metric("latency_p95_ms", "ms", "95th percentile of the unit time", summary=(), label="p95 ms"),
    Metric("latency_p99_ms", "ms", "99th percentile of the unit time", label="p99 ms"),
    Metric("latency_p999_ms", "ms", "99.9th percentile of the unit time", summary=(), label="p99.9 ms"),
    Metric("latency_max_ms", "ms", "the slowest unit of the window", summary=(), label="max ms"),
    Metric("latency_mean_ms", "ms", "mean time of one unit of work", summary=(), label="mean ms"),
    Metric("policy_s", "s", "time inside the policy over the timed window, when it ran in the harness's process "
      "(empty when the strategy acts inside its own workers)", summary=(), label="policy s"),
    Metric("env_s", "s", "seconds - policy_s: time outside the policy (env, transport, waiting)", summary=(),
      label="env s"),
    Metric("policy_frac", "share", "policy_s / seconds: the share of the window inside the policy, the rest is env and "
      "transport", source="derived", derive=_policy_frac, label="policy share"),
    Metric("cpu_util", "cores", "busy cores of the whole process tree over the timed window (1.0 = one core)",
      label="CPU cores busy"),
    Metric("peak_rss_mb", "MB", "each process's peak resident set, summed over the tree (an upper bound of the tree's "
      "peak)", summary=("max",), label="peak RSS MB"),
    Metric("gpu_mem_peak_mb", "MB", "the GPU memory the cell's process took at its peak, as JAX, torch and Warp "
      "count it (rlbench.running.gpu_memory; CUDA contexts and worker processes not in it); empty on a CPU",
      summary=("max",), label="peak GPU MB"),
    Metric("setup_s", "s", "opening the session: imports, env construction, workers' start (compile_s and "
      "runtime_init_s are inside it); never in a rate", summary=(), label="setup s"),
    Metric("close_s", "s", "closing the session", summary=(), label="close s"),
    Metric("runtime_init_s", "s", "starting or joining a framework runtime (Ray), inside setup_s", source="info",
      summary=(), label="runtime init s"),
    Metric("wall_s", "s", "the whole repeat as the harness timed it: process start, setup, warm-up, timed window, "
      "close and cleanup", summary=(), label="wall s"),
    Metric("warmup_units", "units", "units of work in the warm-up before the timed window", summary=(),
      label="warm-up units"),
    Metric("warmup_steps", "steps", "env steps made in the warm-up", summary=(), label="warm-up steps"),
    Metric("window_ci_width", "share", "with a stopping rule (protocol stop_ci_width): the width of the 95% CI of "
      "the median of the window's ten block rates, as a share of that median, when the window closed", summary=(),
      label="window CI width"),
)


@cache
def _assembled() -> tuple:
    """(metrics by name, summary columns by name): the harness's figures, then each family's in the order of
    rlbench.registry.families(). A name given twice is refused."""
    from rlbench import registry  # not at import time: the families import Metric from here
    found = {}
    for family, defined in (("all", HARNESS), *((f.name, f.metrics) for f in registry.families())):
        for m in defined:
            if m.name in found:
                raise ValueError(f"metric {m.name} of {family} is already registered by {found[m.name].family}")
            found[m.name] = replace(m, family=family)
    ci = [m.name for m in found.values() if "ci" in m.summary]
    if len(ci) > 1:
        raise ValueError(f"only one figure can have a CI (its {CI_METHOD} column): {', '.join(ci)}")
    columns = {c.name: c for m in found.values() for c in m.summary_columns()}
    clash = set(columns) & {n for n, m in found.items() if m.source != "family"}
    if clash:
        raise ValueError(f"summary column(s) named like a figure: {', '.join(sorted(clash))}")
    return found, columns


def metrics() -> dict:
    """Every figure, name -> Metric, in registry order."""
    return dict(_assembled()[0])


def metric(name: str) -> Metric:
    """The figure of a results.csv column, or the summary.csv column of one (`latency_p99_ms_median`,
    `steps_per_s_ci_low`, `peak_rss_mb_max`, `limit_frac`): what tables read its header, unit, format and
    description from. KeyError for a column that is no figure (cell_id, status, ci_method, ...)."""
    found, columns = _assembled()
    if name in columns:
        return columns[name]
    if name in found:
        return found[name]
    raise KeyError(f"no metric named {name!r} (rlbench.results.metrics)")


def session_metrics() -> tuple:
    """The names a session's Metrics.read may report, in registry order."""
    return tuple(n for n, m in _assembled()[0].items() if m.session)


def __getattr__(name):
    # METRICS and SESSION_METRICS read like constants, assembled on first use (the families are plug-ins)
    if name == "METRICS":
        return metrics()
    if name == "SESSION_METRICS":
        return session_metrics()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _summary_text(m: Metric) -> str:
    if m.source == "family":
        return f"`{m.name}`"
    if not m.summary:
        return ""
    if len(m.summary) == 1:
        return f"`{m.columns()[0]}`"
    first, *rest = m.columns()  # NAME_median, _ci_low, ...: the name once
    return ", ".join([f"`{first}`", *(f"`{c[len(m.name):]}`" if c.startswith(m.name) else f"(`{c}`)" for c in rest)])


def markdown() -> str:
    """The column reference of docs/metrics.md, a table per family: each figure's unit, whether results.csv has it
    (one value per repeat), its summary.csv columns and what it is."""
    from rlbench import registry
    found = _assembled()[0]
    where = {"all": "the harness, every cell (`rlbench.results.metrics`)",
             **{f.name: f"family `{f.name}` (`{type(f).__module__}`)" for f in registry.families()}}
    out = []
    for family in dict.fromkeys(m.family for m in found.values()):
        out += [f"**{where[family]}**", "", "| metric | unit | from | results.csv | summary.csv | what it is |",
                "|---|---|---|---|---|---|"]
        out += [f"| `{m.name}` | {m.unit} | {SOURCES[m.source]} | {'yes' if m.row else ''} | {_summary_text(m)} | "
                f"{m.description} |" for m in found.values() if m.family == family]
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    sys.stdout.write(markdown())
