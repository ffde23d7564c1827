"""A training tune's tune.json, typed: the workload, the algorithm, budget and what it used, the seeds and target,
the configurations raced and those left out, and the decision; written as the race starts (no decision: what a
resume reads if the tune is killed) and at its end. Its schema is its own (`kind: train`): a stepping tune's
tune.json is rlbench.tuning.state's."""
import json
import os
from dataclasses import asdict, dataclass
from typing import Optional

from rlbench.errors import UsageError
from rlbench.results.train_decision import TrainDecision
from rlbench.tuning.candidates import Left
from rlbench.workload import Workload

SCHEMA = 1


@dataclass(frozen=True)
class TrainState:
    workload: Workload
    algo: str
    budget_s: float
    used_s: float
    seeds: int
    target_return: Optional[float]
    configs: tuple                     # the cell ids raced, in the order tried
    left_out: tuple                    # rlbench.tuning.candidates.Left
    rows_before: tuple = ()            # (cell_id, repeat) measured before this session
    decision: Optional[TrainDecision] = None

    def to_json(self) -> str:
        doc = {"schema": SCHEMA, "kind": "train", "workload": self.workload.to_dict(), "algo": self.algo,
               "budget_s": self.budget_s, "used_s": round(self.used_s, 2), "seeds": self.seeds,
               "target_return": self.target_return, "configs": list(self.configs),
               "left_out": [asdict(x) for x in self.left_out], "rows_before": [list(j) for j in self.rows_before],
               "decision": self.decision.to_json() if self.decision else None}
        return json.dumps(doc, indent=2, default=str) + "\n"

    @classmethod
    def from_json(cls, doc: dict, where: str) -> "TrainState":
        if doc.get("kind") != "train" or doc.get("schema") != SCHEMA:
            raise UsageError(f"{where} is not a training tune's of schema {SCHEMA} (kind {doc.get('kind')}, schema "
                             f"{doc.get('schema')}; valid: `rlbench rerun` of its folder tunes again)")
        return cls(Workload.from_dict(doc["workload"]), doc["algo"], float(doc["budget_s"]),
                   float(doc.get("used_s") or 0.0), int(doc["seeds"]), doc.get("target_return"),
                   tuple(doc.get("configs") or ()), tuple(Left(**x) for x in doc.get("left_out") or ()),
                   tuple(tuple(j) for j in doc.get("rows_before") or ()),
                   TrainDecision.from_json(doc["decision"]) if doc.get("decision") else None)


def read_train_state(path: str) -> Optional[TrainState]:
    where = os.path.join(path, "tune.json")
    try:
        with open(where) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None
    return TrainState.from_json(doc, where) if isinstance(doc, dict) else None
