"""Verdict stability: the claims matrix judged on separate runs of one machine, claim by claim, and whether a
verdict flipped between `reproduced` and `not reproduced` across them (`make claims-stability`). A run's own
noise may leave a claim `inconclusive` in one run and decided in another; that is allowed, since the three-way
verdict exists for it. A flip is not: a verdict one run of the same machine contradicts says nothing.
"""
from collections import Counter
from dataclasses import dataclass

from rlbench.families.validation.claims import NOT_REPRODUCED, REPRODUCED

DECIDED = (REPRODUCED, NOT_REPRODUCED)


@dataclass(frozen=True)
class ClaimStability:
    """One claim over the runs: its verdict in each (run order), the measured text of each, how many runs gave
    its most common verdict, and whether it flipped."""
    claim: str
    verdicts: tuple
    measured: tuple

    @property
    def held(self) -> int:
        """Runs that gave the claim's most common verdict."""
        return Counter(self.verdicts).most_common(1)[0][1] if self.verdicts else 0

    @property
    def flipped(self) -> bool:
        """Both `reproduced` and `not reproduced` among the runs."""
        return all(v in self.verdicts for v in DECIDED)

    @property
    def verdict(self) -> str:
        """What the runs say together: the one verdict all gave, `flipped`, or the verdicts seen (with how many
        runs gave each)."""
        if len(set(self.verdicts)) == 1:
            return self.verdicts[0]
        if self.flipped:
            return "flipped"
        return ", ".join(f"{v} {n}/{len(self.verdicts)}" for v, n in Counter(self.verdicts).most_common())

    def record(self, labels) -> dict:
        """stability.csv's row: the claim, one verdict column per run (labels), held, flipped, the measured texts."""
        return {"claim": self.claim, **{f"verdict {label}": v for label, v in zip(labels, self.verdicts)},
                "held": f"{self.held}/{len(self.verdicts)}", "flipped": self.flipped, "together": self.verdict,
                **{f"measured {label}": m for label, m in zip(labels, self.measured)}}


def stability(matrices) -> list:
    """matrices: one claims matrix per run (each a list of rows with .claim, .verdict, .measured, as
    claims.JudgedClaim or claims.csv's rows read back), all judged by the same claims. One ClaimStability per
    claim, in the first matrix's order; a claim a run lacks counts as `not measured` there."""
    by_run = [{r.claim: r for r in m} for m in matrices]
    order = [r.claim for r in matrices[0]] if matrices else []
    for rows in by_run[1:]:
        order += [c for c in rows if c not in order]
    out = []
    for claim in order:
        got = [rows.get(claim) for rows in by_run]
        out.append(ClaimStability(claim, tuple(r.verdict if r else "not measured" for r in got),
                                  tuple(r.measured if r else "" for r in got)))
    return out
