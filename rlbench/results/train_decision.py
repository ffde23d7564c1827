"""`rlbench tune --train`'s answer as one frozen value: the configuration that trains fastest (to a target return
over seeds, or in training env steps/s with learning checked), its three levels (env step alone, + inference,
+ training), the bottleneck named, and every configuration's standing. rlbench.tuning.training builds it whole;
tune.json and env.json keep its `to_json`, the report's Training recommendation reads its attributes."""
from dataclasses import dataclass, fields
from typing import Optional

from rlbench.results.frozen import thaw


@dataclass(frozen=True)
class Levels:
    """Isaac Lab's three levels of one configuration, in env steps/s of the same env, policy and num_envs: the
    env stepped alone (random actions), + the policy's inference, + training (the training run's own rate).
    `source` says how the first two were had: measured apart (the learner's own vector env, its collector) or
    from the training run's split of its time (env / inference / learn)."""
    env_steps_per_s: Optional[float]
    inference_steps_per_s: Optional[float]
    training_steps_per_s: float
    source: str
    env_cell: str = ""             # the cells measured apart ("" from the split)
    inference_cell: str = ""
    training_peak_rss_mb: Optional[float] = None
    training_setup_s: Optional[float] = None    # the training process's start: imports, envs, the network
    compile_s: Optional[float] = None           # a JAX program's compile, inside setup
    env_peak_rss_mb: Optional[float] = None
    env_setup_s: Optional[float] = None


@dataclass(frozen=True)
class Standing:
    """One configuration raced: its per-seed figures (a None time: the seed did not reach the target within its
    cap, `caps_s`), and where the race left it."""
    cell_id: str
    config: str
    adapter: str
    num_envs: int
    recipe: str                    # rollout length x envs = batch, epochs x minibatches: what it trained with
    status: str                    # finalist | screened | censored | failed | budget | not learning
    why: str = ""
    seeds: tuple = ()
    times_s: tuple = ()            # time to the target per seed (None: not reached within the cap)
    caps_s: tuple = ()             # each seed's training cap
    steps_to_target: tuple = ()
    steps_per_s: tuple = ()        # training env steps/s per seed
    return_first: tuple = ()
    return_last: tuple = ()
    setup_s: Optional[float] = None
    compile_s: Optional[float] = None
    median_time_s: Optional[float] = None
    median_steps_per_s: Optional[float] = None


@dataclass(frozen=True)
class TrainDecision:
    label: str                     # the env and policy
    algo: str
    objective: str                 # "time to return R" | "training env steps/s"
    target_return: Optional[float]
    seeds: int
    budget_s: float
    used_s: float
    stop_reason: str
    winner: Optional[Standing]
    figure: str = ""               # the winner's objective with its CI, in words
    median: Optional[float] = None
    ci_low: Optional[float] = None
    ci_high: Optional[float] = None
    runner_up: str = ""            # the runner-up and whether the seeds tell them apart
    levels: Optional[Levels] = None
    bottleneck: str = ""
    bottleneck_kind: str = ""      # learner | env | inference | transfer | fused | unknown
    vec_note: str = ""             # the winner's recipe under the other settings (vector envs): ranked or tied
    startup: str = ""              # setup and compile apart, and the run length a slower starter would need
    why_none: str = ""
    command: str = ""              # the `rlbench run` of the winner over seeds
    interrupted: str = ""
    standings: tuple = ()          # Standing, every configuration
    devices: str = ""              # the learner's devices raced, and why no other ("cpu (no NVIDIA GPU here)")

    def to_json(self) -> dict:
        out = {f.name: thaw(getattr(self, f.name)) for f in fields(self)}
        out["winner"] = _json(self.winner)
        out["levels"] = _json(self.levels)
        out["standings"] = [_json(s) for s in self.standings]
        return out

    @classmethod
    def from_json(cls, doc: dict) -> "TrainDecision":
        names = {f.name for f in fields(cls)}
        doc = {k: v for k, v in dict(doc).items() if k in names}
        doc["winner"] = _standing(doc.get("winner"))
        doc["levels"] = Levels(**doc["levels"]) if doc.get("levels") else None
        doc["standings"] = tuple(_standing(s) for s in doc.get("standings") or ())
        return cls(**doc)


def _json(value) -> Optional[dict]:
    return None if value is None else {f.name: thaw(getattr(value, f.name)) for f in fields(value)}


def _standing(doc) -> Optional[Standing]:
    if doc is None:
        return None
    names = {f.name for f in fields(Standing)}
    return Standing(**{k: tuple(v) if isinstance(v, list) else v for k, v in doc.items() if k in names})
