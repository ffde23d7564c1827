"""env.json as a value: the machine a run measured on and what the run was. The pipeline builds a new
RunRecord at each stage from what the stage returned and writes it whole (rlbench.running.rundir.RunDir):
when the run begins (a run that dies is still described), once prepared, and when it ends."""
from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from rlbench.results.decision import Decision
from rlbench.results.frozen import FrozenDict, freeze, thaw
from rlbench.results.train_decision import TrainDecision


@dataclass(frozen=True)
class RunRecord:
    machine: Mapping                  # rlbench.machine.fingerprint.fingerprint(): machine, software, started_at
    run_id: str = ""
    command: str = "run"              # run | tune
    suite_path: str = None            # the suite file planned from, and its sha256 (None: from flags)
    suite_sha256: str = None
    settings: Mapping = field(default_factory=FrozenDict)      # the resolved protocol (Settings)
    cells: int = 0                    # cells planned (tune: candidates)
    dropped: tuple = ()               # run: planned cells no machine can run, with why
    cluster: Mapping = None           # --cluster: the class of nodes, each node, what was left out
    measured: Mapping = field(default_factory=FrozenDict)      # families' before_sweep, by env.json key
    adapter_envs: Mapping = field(default_factory=FrozenDict)  # adapter -> its environment's Python, packages
    resumed_at: tuple = ()
    ended_at: str = None
    ray_cluster: Mapping = None       # the Ray cluster the cells' actors ran on, where each cell's actors ran
    tune: Decision = None             # a tune's answer (its budget, search and winner), the report's Recommendation
    train_tune: TrainDecision = None  # `tune --train`'s answer, the report's Training recommendation

    def __post_init__(self):
        for f in fields(self):
            object.__setattr__(self, f.name, freeze(getattr(self, f.name)))

    def to_json(self) -> dict:
        """env.json's keys: the machine's at the top, then the run's (empty optional parts left out)."""
        out = {**self.machine, "suite_path": self.suite_path, "suite_sha256": self.suite_sha256,
               "run_id": self.run_id, "command": self.command, "settings": self.settings, "cells": self.cells,
               "dropped": self.dropped}
        if self.cluster is not None:
            out["cluster"] = self.cluster
        out.update(self.measured, adapter_envs=self.adapter_envs)
        optional = {"resumed_at": self.resumed_at, "ended_at": self.ended_at, "ray_cluster": self.ray_cluster,
                    "tune": self.tune.to_json() if self.tune else None,
                    "train_tune": self.train_tune.to_json() if self.train_tune else None}
        out.update({k: v for k, v in optional.items() if v not in (None, ())})
        return thaw(out)

    @classmethod
    def from_json(cls, doc: Mapping, measured_keys: tuple = None) -> "RunRecord":
        """A record read back (a resumed run's, a report's): the run's keys to their fields, the families'
        (measured_keys, default: every family's Family.record_keys) to `measured`, the rest is the machine."""
        if measured_keys is None:
            from rlbench import registry
            measured_keys = tuple(k for f in registry.families() for k in f.record_keys)
        own = {f.name for f in fields(cls)} - {"machine", "measured"}
        doc = dict(doc or {})
        doc.pop("budget_s", None)  # an older tune's, kept beside its decision (which holds it now)
        typed = {k: doc[k] for k in own if k in doc and doc[k] is not None}
        if "tune" in typed:
            typed["tune"] = Decision.from_json(typed["tune"])
        if "train_tune" in typed:
            typed["train_tune"] = TrainDecision.from_json(typed["train_tune"])
        return cls(machine={k: v for k, v in doc.items() if k not in own and k not in measured_keys},
                   measured={k: doc[k] for k in measured_keys if k in doc}, **typed)

