"""One cell over its repeats, typed: what ran, its outcome, the statistics of every registered figure and
each family's part. Readers use its attributes; summary.csv's row is made of `value(column)` of each of
rlbench.results.model.SUMMARY_COLUMNS."""
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

from rlbench import SCHEMA_VERSION
from rlbench.results import metrics
from rlbench.results.stats import Summary


@dataclass(frozen=True)
class CellSummary:
    """One per cell (a `Run` is one per repeat). What ran comes from the cell's first ok run (its first run
    when none is ok); `stats` holds the statistics over the ok runs of each registered figure summary.csv
    aggregates; `parts` holds each family's own typed part (rlbench.contract.Family.cell_part), by
    family name."""
    cell_id: str
    cell_index: int
    suite: str
    adapter: str
    kind: str                # the adapter kind (rlbench.contract.Adapter.kind), the family it belongs to
    env: str
    env_kwargs: Mapping
    num_envs: int
    workers: object          # int, or None where the strategy has no workers
    batch_size: object       # int, or None where the strategy steps every env at once
    policy: str
    device: str
    options: Mapping
    frameskip: int
    omp_threads: object
    cpus: object
    n: int                   # ok repeats, the profiled one not counted
    status: str              # ok, or its repeats' statuses joined: ok+error, timeout, unsupported, ...
    warning: str             # the statistics' warning (too few repeats, a high CV), '' when none
    error: str               # the failed repeats' errors, joined
    profile: str             # the py-spy profile's path in the run folder, '' when none
    stats: Mapping           # figure name -> rlbench.results.stats.Summary
    parts: Mapping           # family name -> its part

    def stat(self, name: str) -> Summary:
        return self.stats[name]

    @property
    def steps_per_s(self) -> Summary:
        """The figure strategies are compared on."""
        return self.stats["steps_per_s"]

    def part(self, family: str):
        """The family's part of this cell, None when the family adds none to it."""
        return self.parts.get(family)

    def value(self, column: str):
        """The value of one summary.csv column: an attribute, a family part's field, or a figure's aggregate
        (`latency_p99_ms_median` -> stats['latency_p99_ms'].median, through the metrics registry)."""
        if column in _OWN:
            return getattr(self, column)
        if column == "schema":
            return SCHEMA_VERSION
        if column == metrics.CI_METHOD:
            return next((s.ci_method for name, s in self.stats.items() if "ci" in metrics.metric(name).summary), None)
        for part in self.parts.values():
            if part is not None and column in part.__dataclass_fields__:
                return getattr(part, column)
        if column in _family_columns():
            return None
        m = metrics.metric(column)
        return getattr(self.stats[m.of], m.stat)


_OWN = frozenset(CellSummary.__dataclass_fields__) - {"stats", "parts"}


@cache
def _family_columns() -> frozenset:
    """Every family's summary.csv columns (the families are plug-ins: assembled on first use)."""
    from rlbench import registry
    return frozenset(k for f in registry.families() for k in (*f.identity_keys, *f.summary_keys))
