"""The one regression gate: what rlbench says about a cell that changed, whichever way it judged it.

rlbench judges a change two ways: run against run (`rlbench compare`, rlbench.results.compare: the U test over the
two runs' repeats) and a run against its history (`rlbench history check`, rlbench.results.changes: the t
prediction test against the series' current level, with Holm's adjustment). The tests differ; what they conclude
does not: a cell is slower, faster, the same, or could not be judged, and only a significant slowdown beyond the
threshold fails. So both return CellChange values, and one vocabulary of verdicts, one exit rule, one counts label,
one ratio label and one table for the CSV serve both, where each gate once kept its own copy of each (and the
copies drifted: one gate's verdicts were not the other's). Each gate still names its CSV's columns (compare.csv and
history-check.csv are read by scripts and people), as a mapping from column to CellChange field.
"""
import math
from dataclasses import dataclass, replace

from rlbench.errors import UsageError

# verdict -> does it fail the gate. Only a significant slowdown beyond the threshold fails: a cell that could not be
# judged (failed, not run, on one side only, on another machine, without history) is said as such, never failed,
# so that a broken or partial run is not taken for a regression (a failed repeat is the run's own exit code).
VERDICTS = {"slower": True, "faster": False, "same": False, "uncertain": False, "not comparable": False,
            "failed": False, "not run": False, "only in base": False, "only in new": False, "no history": False}


@dataclass(frozen=True)
class CellChange:
    """One cell's change as a gate judged it: the new median against the base (the base run's median, or the
    history's level), their ratio new/base with its 95% CI where known, the test that decided and why. Frozen: a
    later step (the confirmation run of `history check --confirm`) makes a new value, so what the gate first said
    is never lost under what came after."""
    cell_id: str
    verdict: str
    base: float = None          # the base run's median (compare), the history's level (history check)
    new: float = None           # the new run's median
    ratio: float = None         # new / base
    ratio_low: float = None     # its bootstrap 95% CI (compare only)
    ratio_high: float = None
    p_value: float = None
    reason: str = ""
    test: str = None            # the test that decided (or why none could)
    # the pairwise gate's: each side's repeats and the 95% CI of its median
    base_n: int = None
    new_n: int = None
    base_ci_low: float = None
    base_ci_high: float = None
    new_ci_low: float = None
    new_ci_high: float = None
    # the history gate's: Holm's adjusted p, the runs that set the level, the run-to-run noise and where it came from
    p_holm: float = None
    window: int = None
    noise_sd: float = None
    noise_source: str = None
    # the confirmation's (history check --confirm): the verdict before it, and the second run's ratio
    first_verdict: str = None
    confirm_ratio: float = None

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"CellChange {self.cell_id}: verdict {self.verdict!r} (valid: {', '.join(VERDICTS)})")

    @property
    def fails(self) -> bool:
        """Does this change fail the gate (VERDICTS)."""
        return VERDICTS[self.verdict]

    @property
    def change_pct(self):
        """The change in percent, 100 (ratio - 1); None without a ratio."""
        return None if self.ratio is None else 100 * (self.ratio - 1)


def regressions(changes) -> tuple:
    """The changes that fail the gate."""
    return tuple(c for c in changes if c.fails)


def exit_code(changes) -> int:
    """Both gates' exit rule: 1 when any change fails, else 0."""
    return 1 if regressions(changes) else 0


def counts_label(changes) -> str:
    """'1 failed, 41 same, 2 slower': cells per verdict, in the verdicts' alphabetical order."""
    counts = {}
    for c in changes:
        counts[c.verdict] = counts.get(c.verdict, 0) + 1
    return ", ".join(f"{n} {verdict}" for verdict, n in sorted(counts.items()))


def ratio_label(change: CellChange) -> str:
    """'1.29x [1.10, 1.52]': a cell's new/base ratio and its bootstrap 95% CI ('' when the cell has no ratio; no
    bracket when the CI is unknown, with fewer than 2 repeats on a side or none computed)."""
    ratio, lo, hi = change.ratio, change.ratio_low, change.ratio_high
    if ratio is None or math.isnan(ratio):
        return ""
    if lo is None or hi is None or math.isnan(lo) or math.isnan(hi):
        return f"{ratio:.2f}x"
    return f"{ratio:.2f}x [{lo:.2f}, {hi:.2f}]"


def confirmed(first: CellChange, again) -> CellChange:
    """A cell found slower, after its confirmation run found it `again` (its CellChange there, or None where that
    run gave no ok repeat): slower only if the second run says so too, as a host's passing hiccup (these VMs lose
    20-30% for a minute now and then) does not last into the next run. A new value; the first verdict is kept."""
    if again is not None and again.verdict == "slower":
        return replace(first, confirm_ratio=again.ratio)
    said = f"{again.ratio - 1:+.1%}" if again is not None and again.ratio is not None else "no ok repeat"
    return replace(first, verdict="same", confirm_ratio=again.ratio if again is not None else None,
                   reason=f"{first.reason}; not in its confirmation run ({said})")


def table(changes, columns: dict):
    """The gate's CSV as a DataFrame, one row per change: `columns` maps each CSV column to its CellChange field
    (or property), in the CSV's order; rlbench.report.csv_reporter.frame_to_csv writes it as every CSV of a report
    is written. dtype object keeps each value as the gate made it (an int stays an int, None stays missing)."""
    import pandas as pd
    return pd.DataFrame([[getattr(c, field) for field in columns.values()] for c in changes],
                        columns=list(columns), dtype=object)


def parse_threshold(text: str) -> float:
    """'10%' or '0.1' -> 0.1: both gates' --threshold."""
    raw = str(text).strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value < 10:
        raise UsageError(f"--threshold {text!r} must be a relative change such as 10% or 0.1 (> 0)")
    return value
