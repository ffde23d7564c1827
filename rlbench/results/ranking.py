"""The one ranking engine: which cell of a workload is fastest, its speedup over the serial baseline, the runner-up
and whether the lead is significant, and the words for it. The run's headline, the report's winners table,
`rlbench tune`'s answer and `rlbench compare` all read this module, so the same rows always give the same verdict
in the same words. The serial baseline is the fastest one-process loop measured (BASELINES), at any num_envs.

It sits beside the results model, below every reader (tuning, the families, the report), and speaks in the
words of rlbench.results.text: a verdict is told the same by whoever asks, so its sentence belongs to it.
Which kinds compete is each family's to say (rlbench.contract.Family.races), as for `rlbench tune`'s race.
"""
import math
from dataclasses import dataclass, field
from typing import Mapping, Optional

import numpy as np

from rlbench import registry
from rlbench.results.stats import ratio_ci
from rlbench.results.text import env_label, group_by, is_num, sig, speedup
from rlbench.workload import kv_label

BASELINES = ("serial", "rlpyt-serial")  # the one-process loops every speedup is over
MIN_TESTED = 2                          # repeats an entry needs to rank against entries with a CI


@dataclass(frozen=True)
class Entry:
    """One configuration as ranked: what it is and the env steps/s of each successful repeat."""
    cell_id: str
    adapter: str
    num_envs: int
    options: Mapping = field(default_factory=dict)   # the options given (defaults left out)
    values: tuple = ()
    batch_size: Optional[int] = None                 # as resolved, shown when no option set it

    @property
    def median(self) -> float:
        return float(np.median(self.values)) if self.values else 0.0

    @property
    def strategy(self) -> tuple:
        return self.adapter, kv_label(self.options)

    @property
    def is_baseline(self) -> bool:
        return self.adapter in BASELINES

    @property
    def text(self) -> str:
        """`envpool-async (num_envs=16, batch_size=8)`: the adapter, num_envs, the options given, and a batch
        size below num_envs (the adapter's default resolved) when no option set it."""
        parts = [f"num_envs={self.num_envs}", *(kv_label({k: self.options[k]}) for k in sorted(self.options))]
        if "batch_size" not in self.options and is_num(self.batch_size) and self.batch_size != self.num_envs:
            parts.append(f"batch_size={self.batch_size}")
        return f"{self.adapter} ({', '.join(parts)})"


@dataclass(frozen=True)
class Ratio:
    """A ratio of medians with its percentile-bootstrap 95% CI (NaN bounds: fewer than 2 repeats a side)."""
    value: float
    low: float
    high: float

    @classmethod
    def of(cls, numerator: Entry, denominator: Entry) -> "Ratio":
        if numerator is denominator:
            return cls(1.0, 1.0, 1.0)
        return cls(*ratio_ci(numerator.values, denominator.values))

    @property
    def tested(self) -> bool:
        return is_num(self.low) and is_num(self.high)

    def inverse(self) -> "Ratio":
        if not self.tested:
            return Ratio(1 / self.value, math.nan, math.nan)
        return Ratio(1 / self.value, 1 / self.high, 1 / self.low)

    @property
    def text(self) -> str:
        return speedup(self.value, self.low, self.high)


LEAD_WORDS = {"significant": "lead significant", "not significant": "lead not significant (the 95% CI includes 1x)",
              "untested": "lead untested (fewer than 2 repeats)", "alone": "the only strategy measured"}


@dataclass(frozen=True)
class Verdict:
    ranked: tuple                       # every competing entry, fastest first
    winner: Entry
    baseline: Optional[Entry]           # the fastest one-process loop; None when none was measured
    speedup: Optional[Ratio]            # winner over baseline (exactly 1 when the winner is the loop)
    runner_up: Optional[Entry]          # the fastest entry of another strategy
    lead_ratio: Optional[Ratio]         # winner over runner-up

    @property
    def lead(self) -> str:
        """significant (the winner-over-runner-up CI wholly above 1x) | not significant | untested | alone."""
        if self.runner_up is None:
            return "alone"
        if not self.lead_ratio.tested:
            return "untested"
        return "significant" if self.lead_ratio.low > 1 else "not significant"

    @property
    def runner_share(self) -> Optional[Ratio]:
        """The runner-up as a fraction of the winner (the lead ratio turned round)."""
        return self.lead_ratio.inverse() if self.lead_ratio else None

    def sentence(self) -> str:
        """The verdict in words, the same wherever it is shown: "X is fastest at R env steps/s, S the serial
        loop (B); runner-up Y at F of it, lead significant"."""
        win, base = self.winner, self.baseline
        text = f"{win.text} is fastest at {sig(win.median)} env steps/s"
        if base is None:
            text += ", no serial loop measured to compare with"
        elif base is win:
            text += ", the serial loop itself"
        else:
            text += f", {self.speedup.text} the serial loop ({base.adapter}, num_envs={base.num_envs})"
        if self.runner_up is None:
            return text + "; " + LEAD_WORDS["alone"]
        return text + f"; runner-up {self.runner_up.text} at {self.runner_share.text} of it, {LEAD_WORDS[self.lead]}"


def rank(entries, min_tested: int = MIN_TESTED) -> tuple:
    """Measured entries (a positive median), fastest first; ties keep the order given. Where any entry has
    min_tested repeats, those with fewer are not ranked: one lucky repeat does not beat a median with a CI."""
    measured = [e for e in entries if e.values and e.median > 0]
    tested = [e for e in measured if len(e.values) >= min_tested]
    return tuple(sorted(tested or measured, key=lambda e: -e.median))


def verdict(entries, min_tested: int = MIN_TESTED) -> Optional[Verdict]:
    """The verdict over these entries (one workload), or None when none was measured; min_tested=1 ranks a
    configuration measured once beside those with a CI (a tune whose budget ended before its second repeat)."""
    ranked = rank(entries, min_tested)
    if not ranked:
        return None
    win = ranked[0]
    base = next((e for e in ranked if e.is_baseline), None)
    runner = next((e for e in ranked if e.strategy != win.strategy), None)
    return Verdict(ranked, win, base, Ratio.of(win, base) if base is not None else None, runner,
                   Ratio.of(win, runner) if runner is not None else None)


# -- a run's cells as entries --------------------------------------------------------------------------

def entry(cell, results=None) -> Entry:
    """A CellSummary as an Entry: its repeats' steps/s from the ResultSet (the values its median and CI come
    from), else its median alone."""
    if results is not None and cell.cell_id in results.benchmarks:
        values = tuple(r.steps_per_s for r in results.benchmarks[cell.cell_id].ok_runs if r.steps_per_s)
    else:
        median = cell.steps_per_s.median
        values = (median,) if is_num(median) else ()
    return Entry(cell.cell_id, cell.adapter, cell.num_envs, dict(cell.options), values,
                 cell.batch_size if is_num(cell.batch_size) else None)


def raced_kinds() -> set:
    """The adapter kinds whose env steps/s compete, as the families say (Family.races): a learner or a runner
    trains as well, so its env steps/s is no sampler's."""
    return {kind for family in registry.families() for kind in family.races}


def competing(cells) -> list:
    """The cells whose env steps/s compete: those of a raced kind measured at a positive rate."""
    kinds = raced_kinds()
    return [c for c in cells if c.kind in kinds and c.n and is_num(c.steps_per_s.median)
            and c.steps_per_s.median > 0]


def workloads(results) -> dict:
    """(env label, policy) -> that workload's competing cells, in the run's order."""
    return group_by(competing(results.cells.values()), lambda c: (env_label(c), c.policy))


def verdicts(results) -> dict:
    """(env label, policy) -> the Verdict of every workload of a run with a measured competing cell."""
    out = {}
    for key, cells in workloads(results).items():
        v = verdict([entry(c, results) for c in cells])
        if v is not None:
            out[key] = v
    return out
