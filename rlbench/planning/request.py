"""What a command was asked, as frozen values: the CLI builds one from its flags, `rlbench resume` and
`rlbench rerun` from a run folder's plan.json; nothing below reads argparse's Namespace.

Each flag is declared once, as the field it fills (`flag`): its help, type and whether plan.json keeps it.
rlbench.cli builds every command's parser from its request's fields (rlbench.commands), and
`planned`/`from_plan` read the same marks, so a flag, the value it becomes and what a resumed run plans from
cannot drift apart. A flag several commands take is one function here (the sweep's and the build's) or in
rlbench.commands.flags (the regression gates'), called once per request that takes it."""
from dataclasses import MISSING, dataclass, field, fields, replace

from rlbench.errors import UsageError
from rlbench.machine.limits import positive_int


def flag(help: str, default=None, *, planned: bool = False, validate: bool = True, positional: bool = False,
         name: str = None, **argparse_kw):
    """A request field that is a command-line flag. `help` as --help prints it (argparse's: a % is written
    %%); `default` (MISSING: a required flag) is the field's and the flag's. `planned`: plan.json keeps it, as
    what plans the same run again (resume, rerun). `validate`: `rlbench validate` takes it too (false for what
    describes a sweep: validate runs its own suite). `positional`: an argument, not an option; `name`: the
    option when it is not --<field>. The rest goes to argparse as given (metavar, nargs, choices, type,
    action); without them the field's type decides: bool a switch, tuple a repeatable option, int or float
    converted, str taken as typed."""
    meta = {"help": help, "planned": planned, "validate": validate, "positional": positional, "name": name,
            "argparse": argparse_kw}
    return field(default=default, metadata={"flag": meta})


def flag_of(f) -> dict:
    """A field's flag (see `flag`), or None for a field no flag fills (RunRequest.suite_text)."""
    return f.metadata.get("flag")


# declared once for every command that takes them
def _env_kwarg(**kw):
    return flag("env argument (repeat); VALUE read as TOML reads it (4, 0.5, true, {a = 1}), else a string, and a "
                "string where the env declares one", (), planned=True, metavar="KEY=VALUE", **kw)


def _env_wrapper(**kw):
    return flag("a wrapper applied to every env built, in every process (repeat: applied in order)", (),
                planned=True, metavar="MODULE:FN", **kw)


def run_dir():
    return flag("run directory (default reports/<run-id>)")   # None: reports/<run-id>


POLICY_HELP = ("the policy acting for every env: random | fixed_cost:cost_us=100 | mlp:hidden=64x64,threads=1 | cnn "
               "(the Nature CNN, on frames or each image of a Dict/Tuple) | cnn:impala (the IMPALA ResNet) | lstm "
               "(an LSTM on the MLP or the CNN) | module:function (your own); a network takes device=cuda")


def policy_flag(**kw):
    """The policy every command that runs one takes (run, tune): its help lists every network (a test holds it
    to the registered policies)."""
    return flag(POLICY_HELP, "random", planned=True, **kw)


def no_build():
    """A build flag: every command that may prepare an adapter's own environment takes it."""
    return flag("never build an adapter's own environment: its cells are unsupported until built", False)


def allow_errors():
    """A build flag, beside no_build: what a failed row does to the exit code."""
    return flag("exit 0 even when a cell has error or timeout rows (default: exit 1)", False)


def adapters(help: str):
    """The adapters a command takes, as `A,B` items of a repeatable flag (`names` splits them)."""
    return flag(help, (), planned=True, metavar="A,B")


def names(items: tuple) -> list:
    """`--adapters a,b --adapters c` as [a, b, c]."""
    return [a for item in items for a in item.split(",") if a]


class Request:
    """What every request does with its flags and its plan.json: one way to read and keep them, whichever
    command (run, tune) planned the folder."""

    @classmethod
    def from_flags(cls, flags):
        """From argparse's result: the names it shares with the fields, lists as tuples, None as default."""
        given = vars(flags)
        return cls(**{f.name: _value(f, given[f.name]) for f in fields(cls) if f.name in given})

    @classmethod
    def from_plan(cls, plan: dict, **rest):
        """A run folder's plan.json: the request it planned from (its `planned` fields, as kept in `args`),
        and `rest` (out, no_build, ...): what the new invocation says, which plan.json does not keep."""
        kept = plan.get("args") or {}
        values = {f.name: _value(f, kept.get(f.name)) for f in cls._planned_fields()}
        missing = [name for name, v in values.items() if v is MISSING]  # required, yet not kept
        if missing:
            raise UsageError(f"plan.json keeps no {', '.join(missing)} (another command's plan?)")
        return replace(cls(**values), **rest)

    def planned(self) -> dict:
        """What plan.json keeps of it (its `args`): enough to plan the same run again; lists for JSON."""
        return {f.name: _jsonable(getattr(self, f.name)) for f in self._planned_fields()}

    @classmethod
    def _planned_fields(cls) -> list:
        return [f for f in fields(cls) if (flag_of(f) or {}).get("planned")]


@dataclass(frozen=True)
class RunRequest(Request):
    """`rlbench run` (and `validate`, `resume`, `rerun`)."""
    suite: str = flag("suite file (TOML); omit to describe a sweep with --adapter/--env", planned=True,
                      validate=False, positional=True, nargs="?")   # None: one sweep described by the flags
    suite_text: str = None     # the suite's text as once planned (resume, rerun), read instead of the file
    adapter: tuple = flag("adapter name (repeatable)", (), planned=True, validate=False)
    env: tuple = flag("env id (repeatable)", (), planned=True, validate=False)
    num_envs: str = flag("comma-separated, e.g. 1,4,16", "1", planned=True, validate=False)
    policy: str = policy_flag(validate=False)
    opt: tuple = flag("adapter option", (), planned=True, validate=False, metavar="KEY=VALUE")
    env_kwarg: tuple = _env_kwarg(validate=False)
    env_wrapper: tuple = _env_wrapper(validate=False)
    out: str = run_dir()
    # the protocol's values given on the command line (None: the suite's)
    repeats: int = flag("repeats per cell (fresh process each)", planned=True)
    seeds: int = flag("run each cell with N seeds, a repeat per seed (the suite's seed, +1, ...): a training "
                      "cell's median and CI over seeds; sets --repeats N", planned=True, metavar="N",
                      type=positive_int)
    duration: float = flag("minimum timed seconds per repeat", planned=True)
    warmup: float = flag("minimum warm-up seconds per repeat (discarded)", planned=True)
    stop_ci_width: float = flag("close a window before --duration once the 95%% CI of its median block rate spans "
                                "at most this share of it (e.g. 0.02; 0 = fixed windows)", planned=True,
                                metavar="SHARE")
    min_duration: float = flag("with --stop-ci-width: the shortest window, seconds", planned=True)
    timeout: float = flag("wall-clock limit per repeat, seconds", planned=True)
    only: tuple = flag("run only cells whose id matches", (), planned=True, metavar="GLOB")
    profile: bool = flag("one extra py-spy run per cell (speedscope)", False, planned=True)
    ray_address: str = flag("run Ray-based adapters on this existing cluster (HOST:PORT, auto)", planned=True)
    cluster: str = flag("run the cells on this Ray cluster's nodes (HOST:PORT, auto), each on cores of its own",
                        planned=True, metavar="ADDRESS")
    node_class: str = flag("on --cluster: the class of identical nodes to use (default: the largest)", planned=True,
                           metavar="ID")
    no_build: bool = no_build()
    allow_errors: bool = allow_errors()
    resume: str = flag("run only the repeats missing from the run in DIR (its plan, settings and machine must be "
                       "the same)", validate=False, metavar="DIR")

    @classmethod
    def from_plan(cls, plan: dict, **rest) -> "RunRequest":
        """As every request (`Request.from_plan`), planned from the suite text it kept, not the file."""
        return super().from_plan(plan, **{"suite_text": plan.get("suite_text"), **rest})


@dataclass(frozen=True)
class TuneRequest(Request):
    """`rlbench tune`."""
    env: str = flag("env id: registered gymnasium id, module:EnvId-v0 or package.module:make_env", MISSING,
                    planned=True)
    env_kwarg: tuple = _env_kwarg()
    env_wrapper: tuple = _env_wrapper()
    policy: str = policy_flag()
    budget: str = flag("wall-clock budget of the whole search (default 10m; 90s, 1h)", "10m", planned=True)
    max_envs: int = flag("largest num_envs the search may climb to (default: what half the free memory holds, at "
                         "most 4096)", planned=True, type=positive_int)   # None: what half the free memory holds
    adapters: tuple = adapters("race only these adapters (default: every env-stepping adapter available here)")
    out: str = run_dir()
    cluster: str = flag("race the candidates on this Ray cluster's nodes, several at once (HOST:PORT, auto)",
                        planned=True, metavar="ADDRESS")
    node_class: str = flag("on --cluster: the class of identical nodes to use", planned=True, metavar="ID")
    train: str = flag("race what trains ALGO fastest (ppo, impala, ...): its learners x their vector env, num_envs "
                      "and workers, each training on its recipe (--policy: the network trained, default mlp)",
                      planned=True, metavar="ALGO")
    target_return: float = flag("with --train: race the wall time to this mean return (median over --seeds); "
                                "without it, training env steps/s with learning checked", planned=True,
                                metavar="R")
    seeds: int = flag("with --train: seeds each finalist trains on (default 3)", planned=True, metavar="N",
                      type=positive_int)
    sizes: str = flag("with --train: the num_envs tried, comma-separated (default 2, 4 and 8 envs per core)",
                      planned=True, metavar="N,N,...")
    opt: tuple = flag("with --train: a recipe option every learner raced trains with (repeat; e.g. num_steps=512, "
                      "lr=3e-4): a learner without it is left out", (), planned=True, metavar="KEY=VALUE")


def _value(f, raw):
    """None (not given) as the field's default (MISSING when it has none); a list (repeatable flag, JSON) as a
    tuple."""
    if raw is None:
        return f.default
    return tuple(raw) if isinstance(raw, list) else raw


def _jsonable(v):
    return list(v) if isinstance(v, tuple) else v
