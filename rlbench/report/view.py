"""The view models exporters read, each built once: `RunView` of a run directory's ResultSet and `CompareView` of a
comparison. An exporter takes the view and returns its files, {name: bytes}; rlbench.report.writer writes them.
What a view holds (DataFrames, cells, headlines, py-spy rows, what each family's section is drawn from) is
computed at most once, when first read.
"""
from functools import cached_property

from rlbench import SCHEMA_VERSION, registry


class RunView:
    """A run directory as its report shows it."""

    def __init__(self, results, out_dir: str = ""):
        self.results = results      # per-repeat values (bootstrap CIs) and the families' hooks read it
        self.out_dir = out_dir      # where the report goes: profiles are found relative to it
        self.env = results.env          # env.json as written: the page's machine table lists every key
        self.record = results.record    # the same as a RunRecord: what the rest of the page reads

    @cached_property
    def cells(self) -> list:
        """One CellSummary per cell, in suite order."""
        return list(self.results.cells.values())

    @cached_property
    def summaries(self):
        """summary.csv as a DataFrame: one row per cell, its columns."""
        return self.results.summary_frame()

    @cached_property
    def runs(self):
        """results.csv as a DataFrame: one row per repeat; rows older than the schema field get the current one."""
        runs = self.results.runs_frame()
        runs["schema"] = runs["schema"].where(runs["schema"].notna(), SCHEMA_VERSION)
        return runs

    @property
    def suite(self) -> str:
        return self.cells[0].suite if self.cells else "(no results)"

    @cached_property
    def ran(self) -> list:
        """The cells the summary table shows: measured, or tried and failed here."""
        return [c for c in self.cells if c.n or c.status != "unsupported"]

    @cached_property
    def skipped(self) -> list:
        """The cells this machine could not run (unsupported, never measured)."""
        return [c for c in self.cells if not c.n and c.status == "unsupported"]

    @property
    def dropped(self) -> list:
        """The planned cells left out because no machine can run them (env.json's `dropped`)."""
        return self.record.dropped

    @cached_property
    def headlines(self) -> list:
        """Every family's headline sentences, in family order (rlbench.contract.Family.headlines)."""
        return [line for f in registry.families() for line in f.headlines(self.results)]

    @cached_property
    def profiles(self) -> list:
        """One row per profiled cell: the seconds py-spy saw in each stage and their shares."""
        from rlbench.report.profiles_section import profile_rows
        return profile_rows(self.cells, self.out_dir)


def run_view(source, out_dir: str = "") -> RunView:
    """The view of a ResultSet (or the view itself, given one)."""
    return source if isinstance(source, RunView) else RunView(source, out_dir)


class CompareView:
    """A comparison of two run directories as compare.csv and compare.html show it."""

    def __init__(self, comparison, base_dir: str, new_dir: str, base=None, new=None):
        self.comparison = comparison
        self.base_dir, self.new_dir = base_dir, new_dir
        self.base, self.new = base, new   # the two ResultSets, for each side's verdict

    @cached_property
    def winners(self) -> list:
        """(workload, base verdict, new verdict, whether the fastest strategy changed) of every workload of
        either run, each side's verdict from rlbench.results.ranking (the run's own headline); None on a side
        without that workload."""
        from rlbench.results.ranking import verdicts
        if self.base is None or self.new is None:
            return []
        base, new = verdicts(self.base), verdicts(self.new)
        out = []
        for key in list(dict.fromkeys([*base, *new])):
            b, n = base.get(key), new.get(key)
            changed = b is not None and n is not None and b.winner.strategy != n.winner.strategy
            out.append((" · ".join(map(str, key)), b, n, changed))
        return out

    @property
    def changes(self) -> tuple:
        """One CellChange (rlbench.results.gate) per compared cell, in the new run's order: what the page shows."""
        return self.comparison.rows

    @cached_property
    def rows(self):
        """compare.csv as a DataFrame: a row per compared cell, its columns (rlbench.results.compare.COLUMNS)."""
        from rlbench.results.compare import COLUMNS
        from rlbench.results.gate import table
        return table(self.comparison.rows, COLUMNS)

    @property
    def machines(self) -> list:
        """(key, base, new) of each machine figure the comparison checked."""
        c = self.comparison
        return [(k, c.base_machine[k], c.new_machine[k]) for k in c.base_machine]
