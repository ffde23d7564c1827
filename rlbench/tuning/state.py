"""tune.json, typed: what a tune keeps of itself (the workload, budget and what it used, the profile, the
calibration, every candidate and its fate, what could not race, the decision) as a `TuneState` written as its
search starts (no decision yet: what a resume reads if the tune is killed) and at its end. A resumed tune reads it
back by attribute; a tune.json of another schema is refused in one line, never half-read."""
import json
import math
import os
from dataclasses import asdict, dataclass, field, fields
from typing import Optional

from rlbench.errors import UsageError
from rlbench.planning.plan import Settings
from rlbench.results.decision import Decision
from rlbench.tuning.calibration import Calibration
from rlbench.tuning.candidates import Left
from rlbench.tuning.profile import EnvProfile
from rlbench.workload import Workload

TUNE_JSON = "tune.json"
SCHEMA = 3   # 3: the calibration's record with its figures per adapter and size (rlbench.tuning.figures)


@dataclass(frozen=True)
class CandidateRecord:
    """One configuration the search tried: where it came from (origin, round), what the calibration allowed it,
    its repeats and rates, and its fate (status, the round it left, the p-value it lost by, why)."""
    cell_id: str
    config: str
    adapter: str
    num_envs: int
    options: dict
    origin: str
    round_added: int
    predicted_max_steps_per_s: Optional[float]
    status: str
    repeats: int
    ok_repeats: int
    steps_per_s: tuple
    steps_per_s_median: Optional[float]
    round_out: Optional[int]
    p_slower_than_leader: Optional[float]
    why: str

    @classmethod
    def of(cls, c) -> "CandidateRecord":
        """From the search's rlbench.tuning.search.Candidate."""
        return cls(c.cell.cell_id, c.config, c.adapter, c.num_envs, dict(c.cell.given_options), c.origin, c.round,
                   c.predicted, c.status, c.repeats, len(c.values), tuple(c.values),
                   c.median if c.values else None, c.round_out or None, None if math.isnan(c.p) else c.p, c.why)

    def to_json(self) -> dict:
        return {**asdict(self), "steps_per_s": list(self.steps_per_s)}

    @classmethod
    def from_json(cls, doc: dict) -> "CandidateRecord":
        return cls(**{**{f.name: doc.get(f.name) for f in fields(cls)}, "steps_per_s": tuple(doc.get("steps_per_s")
                                                                                           or ())})


@dataclass(frozen=True)
class TuneState:
    workload: Workload
    budget_s: float
    used_s: float                       # the budget's (the calibration's time apart: calibration_s)
    max_envs: int
    settings: Settings
    profile: Optional[EnvProfile]
    calibration: Optional[Calibration]  # None: cut short while calibrating (a resume calibrates what is missing)
    calibration_s: float                # every session's time calibrating
    stop_reason: str = ""
    converged: bool = False
    rows_before: tuple = ()             # (cell_id, repeat) measured before this session's search
    candidates: tuple = ()              # CandidateRecord
    left_out: tuple = ()                # rlbench.tuning.candidates.Left
    decision: Optional[Decision] = None
    extra: dict = field(default_factory=dict)   # what a newer writer kept that this one does not read

    def to_json(self) -> str:
        doc = {"schema": SCHEMA, "workload": self.workload.to_dict(), "budget_s": self.budget_s,
               "used_s": self.used_s, "max_envs": self.max_envs, "settings": self.settings.__dict__,
               "profile": self.profile.to_json() if self.profile else None,
               "calibration": self.calibration.to_json() if self.calibration else None,
               "calibration_s": self.calibration_s, "stop_reason": self.stop_reason, "converged": self.converged,
               "rows_before": [list(job) for job in self.rows_before],
               "candidates": [c.to_json() for c in self.candidates],
               "left_out": [{**asdict(x), "repeats": 0} for x in self.left_out],
               "decision": self.decision.to_json() if self.decision else None}
        return json.dumps(doc, indent=2, default=str) + "\n"

    @classmethod
    def from_json(cls, doc: dict, where: str = TUNE_JSON) -> "TuneState":
        if doc.get("schema") != SCHEMA:
            raise UsageError(f"{where} is of schema {doc.get('schema')}; this rlbench resumes schema {SCHEMA} only "
                             "(valid: `rlbench rerun` of its folder tunes again from the start)")
        known = {f.name for f in fields(cls)} | {"schema"}
        settings = {k: tuple(v) if isinstance(v, list) else v for k, v in (doc.get("settings") or {}).items()}
        return cls(Workload.from_dict(doc["workload"]), float(doc["budget_s"]), float(doc.get("used_s") or 0.0),
                   doc.get("max_envs"), Settings(**settings),
                   EnvProfile.from_json(doc["profile"]) if doc.get("profile") else None,
                   Calibration.from_json(doc["calibration"]) if doc.get("calibration") else None,
                   float(doc.get("calibration_s") or 0.0), doc.get("stop_reason") or "", bool(doc.get("converged")),
                   tuple(tuple(job) for job in doc.get("rows_before") or ()),
                   tuple(CandidateRecord.from_json(c) for c in doc.get("candidates") or ()),
                   tuple(Left(x["adapter"], x["cell_id"], x["status"], x["reason"]) for x in doc.get("left_out") or ()),
                   Decision.from_json(doc["decision"]) if doc.get("decision") else None,
                   {k: v for k, v in doc.items() if k not in known})


def read(path: str) -> Optional[TuneState]:
    """The tune.json an earlier session of this tune wrote in folder `path`; None when it never got that far (it
    starts over)."""
    where = os.path.join(path, TUNE_JSON)
    try:
        with open(where) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None
    return TuneState.from_json(doc, where) if isinstance(doc, dict) else None
