"""What a command was asked, as frozen values: the CLI builds one from its flags, `rlbench resume` and
`rlbench rerun` from a run folder's plan.json; nothing below reads argparse's Namespace."""
from dataclasses import dataclass, fields, replace


@dataclass(frozen=True)
class RunRequest:
    """`rlbench run` (and `validate`, `resume`, `rerun`)."""
    suite: str = None          # suite file (TOML); None: one sweep described by adapter/env/num_envs/...
    suite_text: str = None     # the suite's text as once planned (resume, rerun), read instead of the file
    adapter: tuple = ()        # --adapter NAME, repeatable: the sweep's adapters
    env: tuple = ()            # --env ID, repeatable
    num_envs: str = "1"        # --num-envs 1,4,16
    policy: str = "random"     # --policy random | fixed_cost:cost_us=100 | mlp:hidden=64x64 | module:function
    opt: tuple = ()            # --opt KEY=VALUE: adapter options
    env_kwarg: tuple = ()      # --env-kwarg KEY=VALUE: env arguments
    env_wrapper: tuple = ()    # --env-wrapper MODULE:FN, applied in order to every env built
    repeats: int = None        # the protocol's values given on the command line (None: the suite's)
    duration: float = None
    warmup: float = None
    stop_ci_width: float = None
    min_duration: float = None
    timeout: float = None
    only: tuple = ()           # --only GLOB: cells whose id matches
    profile: bool = False      # one extra py-spy run per cell
    ray_address: str = None    # Ray-based adapters' actors on this cluster
    cluster: str = None        # the cells on this Ray cluster's nodes
    node_class: str = None     # which class of its nodes
    out: str = None            # the run folder (None: reports/<run-id>)
    resume: str = None         # the run folder whose missing repeats to run
    no_build: bool = False     # never build an adapter's own environment
    allow_errors: bool = False  # exit 0 with error, timeout or lost rows

    # what plan.json keeps of it: enough to plan the same run again (resume, rerun)
    PLANNED = ("suite", "adapter", "env", "num_envs", "policy", "opt", "env_kwarg", "env_wrapper", "repeats",
               "duration", "warmup", "stop_ci_width", "min_duration", "timeout", "only", "profile", "ray_address",
               "cluster", "node_class")

    @classmethod
    def from_flags(cls, flags) -> "RunRequest":
        return _from_flags(cls, flags)

    @classmethod
    def from_plan(cls, plan: dict, **rest) -> "RunRequest":
        """A run folder's plan.json, planned from the suite text it kept; `rest`: out, no_build, ..."""
        kept = plan.get("args") or {}
        planned = {f.name: _value(f, kept.get(f.name)) for f in fields(cls) if f.name in cls.PLANNED}
        return replace(cls(**planned, suite_text=plan.get("suite_text")), **rest)

    def planned(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in ((k, getattr(self, k)) for k in self.PLANNED)}


@dataclass(frozen=True)
class TuneRequest:
    """`rlbench tune`."""
    env: str                   # env id: registered gymnasium id, module:EnvId-v0 or package.module:make_env
    env_kwarg: tuple = ()      # KEY=VALUE
    env_wrapper: tuple = ()    # MODULE:FN, applied in order
    policy: str = "random"
    budget: str = "10m"        # the whole search's wall-clock budget: 90s, 10m, 1h
    max_envs: int = None       # the largest num_envs climbed to (None: what half the free memory holds)
    adapters: tuple = ()       # A,B items: race only these
    out: str = None
    cluster: str = None        # race on this Ray cluster's nodes
    node_class: str = None

    @classmethod
    def from_flags(cls, flags) -> "TuneRequest":
        return _from_flags(cls, flags)


def _from_flags(cls, flags):
    """From argparse's result: the names it shares with the fields, lists as tuples, None as default."""
    given = vars(flags)
    return cls(**{f.name: _value(f, given[f.name]) for f in fields(cls) if f.name in given})


def _value(f, raw):
    """None (not given) as the field's default; a list (repeatable flag, JSON) as a tuple."""
    if raw is None:
        return f.default
    return tuple(raw) if isinstance(raw, list) else raw
