"""Cells that cannot run anywhere, known at planning: an adapter's `supports(workload, options)` names why
(EnvPool has no native rlbench/Synthetic-v0; envpool-async needs 0 < batch_size < num_envs). They leave
the plan before anything is written: one line per reason on stderr, the list in env.json and plan.json
(`dropped`), a short note in the report; never a results row. What depends on this machine stays in the
plan and becomes a row as the sweep meets it: a package not installed here (`available()`, or a
`supports()` reason saying so), an adapter environment that failed to build."""
import sys
from dataclasses import dataclass, replace

from rlbench import registry
from rlbench.envs import refusal
from rlbench.errors import UsageError
from rlbench.report.format import reason_counts

MACHINE_REASONS = ("package not installed",)  # what a supports() may say that is this machine's, not the cell's


@dataclass(frozen=True)
class Dropped:
    cell_id: str
    reason: str

    def to_dict(self) -> dict:
        return {"cell_id": self.cell_id, "reason": self.reason}


def impossible(cell):
    """Why this cell cannot run on any machine, or None (also when the reason is this machine's, or the
    adapter's supports() needs a framework that is not installed here to say)."""
    adapter = registry.get(cell.adapter)()
    try:
        reason = refusal(adapter, cell.workload, cell.options)
    except ImportError:
        return None  # supports() is meant to stay import-free; the sweep's own check decides here
    if not reason or str(reason).startswith(MACHINE_REASONS):
        return None
    return str(reason)


def split(cells) -> tuple:
    """(the cells that may run, a Dropped for each that cannot), both in plan order."""
    kept, dropped = [], []
    for cell in cells:
        reason = impossible(cell)
        if reason:
            dropped.append(Dropped(cell.cell_id, reason))
        else:
            kept.append(cell)
    return tuple(kept), tuple(dropped)


def summary_lines(dropped) -> list:
    """One line per reason: `rlbench: 6 cells dropped: envpool has no native rlbench/Synthetic-v0`."""
    return [f"rlbench: {n} cell{'s' if n != 1 else ''} dropped: {reason}" for reason, n in counts(dropped).items()]


def counts(dropped) -> dict:
    """reason (or its pattern) -> how many cells it drops, most first."""
    return reason_counts(d.reason for d in dropped)


def drop_impossible(suite, out=None) -> tuple:
    """(the suite without the cells that cannot run, their Dropped records). Says on `out` what was dropped;
    a UsageError (exit 2, nothing written) when no cell is left."""
    kept, dropped = split(suite.cells)
    if dropped and not kept:
        reasons = "; ".join(f"{reason} (x{n})" for reason, n in counts(dropped).items())
        raise UsageError(f"no cell can run: all {len(dropped)} planned cells are impossible: {reasons}")
    for line in summary_lines(dropped):
        print(line, file=out or sys.stderr)
    return replace(suite, cells=kept), dropped
