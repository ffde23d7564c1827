"""`rlbench tune`'s answer as one frozen value: the winner and its statistics, the ranking engine's verdict, each
other strategy's fate, the search drawn and traced, and why the search stopped. rlbench.tuning.decide builds it
whole; tune.json and env.json keep its `to_json` (the key names of earlier decisions, so older run folders still
read), and the report's Recommendation section reads its attributes."""
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Optional

from rlbench.results.frozen import freeze, thaw

NAN = float("nan")


def _from(cls, doc):
    """A value of `cls` from its JSON, unknown keys left out and missing ones defaulted (older decisions)."""
    if doc is None:
        return None
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in dict(doc).items() if k in names})


def _json(value) -> Optional[dict]:
    return None if value is None else {f.name: thaw(getattr(value, f.name)) for f in fields(value)}


def _num(value) -> float:
    """A JSON figure that may be missing or null (NaN then: `format.with_ci` shows it as unknown)."""
    return NAN if value is None else float(value)


@dataclass(frozen=True)
class Winner:
    cell_id: str
    config: str                    # `adapter (num_envs=N, option=value)`
    adapter: str
    num_envs: int
    options: Mapping               # the options given (defaults left out)
    steps_per_s: float             # median of its repeats
    ci_low: float
    ci_high: float
    n: int
    snippet: str = ""              # the library call a user writes ("" for rlbench's own implementations)
    command: str = ""              # the `rlbench run` of this configuration

    def __post_init__(self):
        object.__setattr__(self, "options", freeze(dict(self.options or {})))


@dataclass(frozen=True)
class Speedup:
    """The winner over the fastest serial loop measured, with the ratio's bootstrap 95% CI."""
    ratio: float
    ci_low: float
    ci_high: float
    baseline: str                  # the serial loop's cell id
    baseline_steps_per_s: float


@dataclass(frozen=True)
class RunnerUp:
    cell_id: str
    config: str
    steps_per_s: float
    ratio: float                   # of the winner's median, with the ratio's 95% CI
    ci_low: float
    ci_high: float
    lead: str                      # significant | not significant | untested (rlbench.results.ranking)


@dataclass(frozen=True)
class Fate:
    """A strategy that did not win: its best measured configuration and why it lost, or, never measured, why not
    (pruned with its prediction, failed, unsupported, out of budget)."""
    adapter: str
    status: str
    why: str
    config: str = ""
    best: str = ""                 # its best configuration's cell id; "" when it never completed a repeat
    steps_per_s: Optional[float] = None
    ratio_to_winner: float = NAN
    ratio_ci_low: float = NAN
    ratio_ci_high: float = NAN
    predicted_max_steps_per_s: Optional[float] = None

    def __post_init__(self):
        for name in ("ratio_to_winner", "ratio_ci_low", "ratio_ci_high"):
            object.__setattr__(self, name, _num(getattr(self, name)))

    @property
    def measured(self) -> bool:
        return bool(self.best)


@dataclass(frozen=True)
class Point:
    """One configuration of the search as its chart draws it: measured (its median) or pruned (its prediction)."""
    strategy: str
    num_envs: int
    steps_per_s: float
    status: str
    config: str
    n: int = 0


@dataclass(frozen=True)
class Decision:
    label: str = ""                # `env(kwargs) with policy P`
    where: str = "this machine"    # or the class of cluster nodes it raced on
    winner: Optional[Winner] = None
    why_none: str = ""             # no winner: why
    verdict: str = ""              # the ranking engine's sentence, as a run's headline gives it
    speedup: Optional[Speedup] = None
    runner_up: Optional[RunnerUp] = None
    strategies: tuple = ()         # Fate of every other strategy, fastest first
    points: tuple = ()             # Point of every configuration measured or pruned
    stop_reason: str = ""          # converged, budget spent, or interrupted
    interrupted: str = ""          # `interrupted after 55 s (SIGTERM)`, or the disk's error; "" when it ended itself
    budget_s: float = None
    used_s: float = None
    note: str = ""
    trace: tuple = ()              # the search's rounds: what each added, pruned, dropped and measured
    # the machine's calibration, apart from the budget: measured now (its seconds) or cached (when, by whom), and
    # the strategies it gave no prediction, each with the reason (they raced without one)
    calibration: str = ""
    calibration_s: Optional[float] = None
    uncalibrated: Mapping = None   # adapter -> why its calibration gave no prediction
    placement: str = ""            # where the winner's policy runs (device, central or in workers), with the figures
    # the budget too small to separate the contenders (the lead untested or within the noise), with one that would
    budget_note: str = ""
    regime: str = ""               # what bounds the winner, the figure that shows it, what would move it

    def __post_init__(self):
        object.__setattr__(self, "trace", freeze(list(self.trace)))
        object.__setattr__(self, "uncalibrated", freeze(dict(self.uncalibrated or {})))

    @property
    def search(self) -> str:
        """How the search ended and what of the budget it used, in a sentence."""
        used = (f"; {self.used_s:.0f} s of the {self.budget_s:.0f} s budget used"
                if self.used_s is not None and self.budget_s is not None else "")
        return f"{self.stop_reason}{used}"

    def to_json(self) -> dict:
        return {"label": self.label, "where": self.where, "winner": _json(self.winner), "why_none": self.why_none,
                "verdict": self.verdict, "speedup_over_serial": _json(self.speedup),
                "runner_up": _json(self.runner_up), "strategies": [_json(s) for s in self.strategies],
                "points": [_json(p) for p in self.points], "stop_reason": self.stop_reason,
                "interrupted": self.interrupted, "budget_s": self.budget_s, "used_s": self.used_s,
                "search": self.search, "note": self.note, "rounds": thaw(self.trace),
                "calibration": self.calibration, "calibration_s": self.calibration_s,
                "uncalibrated": thaw(self.uncalibrated), "placement": self.placement, "budget_note": self.budget_note,
                "regime": self.regime}

    @classmethod
    def from_json(cls, doc: Mapping) -> Optional["Decision"]:
        """None for no decision (a run that is not a tune). A decision older than stop_reason kept its search
        sentence whole: it stands as the stop reason."""
        if not doc:
            return None
        doc = dict(doc)
        return cls(label=doc.get("label", ""), where=doc.get("where", "this machine"),
                   winner=_from(Winner, doc.get("winner")), why_none=doc.get("why_none", ""),
                   verdict=doc.get("verdict", ""), speedup=_from(Speedup, doc.get("speedup_over_serial")),
                   runner_up=_from(RunnerUp, doc.get("runner_up")),
                   strategies=tuple(_from(Fate, s) for s in doc.get("strategies", ())),
                   points=tuple(_from(Point, p) for p in doc.get("points") or ()),
                   stop_reason=doc.get("stop_reason") or doc.get("search", ""),
                   interrupted=doc.get("interrupted", ""), budget_s=doc.get("budget_s"), used_s=doc.get("used_s"),
                   note=doc.get("note", ""), trace=tuple(doc.get("rounds") or ()),
                   calibration=doc.get("calibration") or "", calibration_s=doc.get("calibration_s"),
                   uncalibrated=doc.get("uncalibrated") or {}, placement=doc.get("placement") or "",
                   budget_note=doc.get("budget_note") or "", regime=doc.get("regime") or "")
