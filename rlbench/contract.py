"""The plug-in contract: what an execution model implements (Adapter, its Options, the Session it opens and the
Metrics it may report), what a kind of work implements (Family) and what a JAX env API implements (JaxEnvApi).
A leaf: it imports nothing of rlbench at run time, so every layer, from the registry to the adapters, can depend
on it without a cycle. The harness owns timing, warm-up and latency recording; a
session's `step()` does one unit of work (one vector step, one rollout of T steps, one jitted scan) and returns
how many env steps it made.
"""
import importlib.util
import math
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

_TYPE_WORDS = {bool: "true or false", str: "a string"}  # numbers: Option.valid
_BOOL = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


@dataclass(frozen=True)
class Option:
    """One adapter option. Numbers are checked against [low, high] at load time, so a bad value is refused
    before anything runs: the default low is 0 because nearly every option is a count, a size, a rate or
    seconds (0 often meaning "auto"); NaN is never valid, and +-inf only where `finite` is False (a target
    that is never reached)."""
    name: str
    type: type
    default: Any
    help: str = ""
    choices: tuple = ()
    low: float = 0
    high: float = math.inf
    open_low: bool = False  # the value must be > low (a learning rate), not >= low
    finite: bool = True

    @property
    def valid(self) -> str:
        """What a valid value is, in words, so every refusal names the range (`rlbench list` could too)."""
        if self.type not in (int, float):
            return _TYPE_WORDS[self.type]
        bounds = [f"{'>' if self.open_low else '>='} {self.low:g}"] if self.low > -math.inf else []
        bounds += [f"<= {self.high:g}"] if self.high < math.inf else []
        word = "an integer" if self.type is int else "a finite number" if self.finite else "a number"
        text = " and ".join([f"{word} {bounds[0]}", *bounds[1:]]) if bounds else word
        infs = [] if self.finite else [s for s in ("inf", "-inf") if self._in_range(float(s))]
        return f"{text}, inf or -inf" if len(infs) == 2 else " or ".join([text, *infs])

    def _in_range(self, value) -> bool:
        return (value > self.low if self.open_low else value >= self.low) and value <= self.high

    def parse(self, raw):
        """Typed value from a CLI string or a TOML value; ValueError names the valid range or choices."""
        try:
            if self.type is bool:
                value = raw if isinstance(raw, bool) else _BOOL[str(raw).lower()]
            elif self.type in (int, float) and isinstance(raw, bool):
                raise ValueError  # TOML `true` is no number
            elif self.type is int and isinstance(raw, float) and not raw.is_integer():
                raise ValueError
            else:
                value = self.type(raw)
        except (KeyError, TypeError, ValueError, OverflowError):
            raise ValueError(f"option {self.name}={raw!r} must be {self.valid}") from None
        if self.type in (int, float) and (not self._in_range(value)  # NaN is in no range
                                          or (self.finite and value in (math.inf, -math.inf))):
            raise ValueError(f"option {self.name}={raw!r} must be {self.valid}")
        if self.choices and value not in self.choices:
            raise ValueError(f"option {self.name}={raw!r} (valid: {', '.join(map(str, self.choices))})")
        return value


# The option every disk-backed replay store takes (rlbench.machine.pagecache sets and records the state)
PAGE_CACHE = Option("cache", str, "cold", "page cache as timing starts: cold (dropped) or warm (read once)",
                    ("cold", "warm"))


class Session(Protocol):
    info: dict          # optional: see rlbench.running.child.info_keys (workers, batch_size, compile_s, ...)
    metrics: "Metrics"  # optional: figures beyond env steps, over the timed window

    def drain(self) -> None: ...    # optional: wait for work step() only dispatched (block_until_ready)
    def reached(self) -> bool: ...  # optional, a learner's: its target return reached (protocol until_target)

    def step(self) -> int: ...
    def close(self) -> None: ...


class Metrics(Protocol):
    """What a session reports beside env steps; `read` returns names from SESSION_METRICS only."""

    def reset(self) -> None: ...
    def read(self, seconds: float) -> dict: ...


class Adapter:
    """Subclass, set the class attributes, implement `open`, decorate with `rlbench.api.register`. The
    `workload` each method takes is an rlbench.workload.Workload (not imported here: the contract stays a
    leaf, type-checking imports included)."""
    name: ClassVar[str] = ""
    kind: ClassVar[str] = "vector_env"
    description: ClassVar[str] = ""
    options: ClassVar[tuple] = ()
    requires: ClassVar[tuple] = ()      # importable module names
    environment: ClassVar[str] = ""     # own virtual env pinned by envs/<environment>.txt beside the module
    jax_env_apis: ClassVar[tuple] = ()  # the JAX env APIs (JaxEnvApi.name) of a user's env it runs
    # the option that sets how many steps of each env one unit takes (rlpyt's batch_T, a compiled scan's scan_T, a
    # rollout's length): `rlbench tune` shortens it where the env's cost would make a unit long
    # (rlbench.tuning.units); "" where a unit is one step of every env
    unit_option: ClassVar[str] = ""
    # a learner's: the algorithm it trains (ppo, impala, a2c, dqn, r2d2): `rlbench tune --train ALGO` races the
    # learners of one algorithm, each over the settings its tune_space names (the vector env underneath, workers)
    algo: ClassVar[str] = ""

    def available(self):
        """None when usable here, else the reason (checked without importing the framework)."""
        missing = [m for m in self.requires if importlib.util.find_spec(m) is None]
        return f"package not installed: {', '.join(missing)}" if missing else None

    def supports(self, workload, options: dict):
        """None when this adapter can host the workload, else the reason. Must stay cheap."""
        return None

    def open(self, workload, options: dict) -> Session:
        raise NotImplementedError

    def tune_space(self, num_envs: int, cpus: int) -> list:
        """The option settings `rlbench tune` tries at this num_envs on `cpus` cores: the knobs that set
        this strategy's parallelism (workers, threads, batch size), sized to the machine. Default: the
        adapter's defaults only. Settings supports() refuses are left out by the tuner. Where the defaults are
        not among them, a tune's probe starts from the first: put the likeliest fastest first."""
        return [{}]

    def collector(self, options: dict) -> tuple:
        """A learner's: (adapter name, options) of the env-stepping adapter that steps the same vector env as it
        does with these options (cleanrl-ppo on vec=subproc: gymnasium-async), for `rlbench tune --train`'s first two
        levels (env step alone, + inference), measured apart from the training run; () where none does."""
        return ()

    def policy_placement(self, options: dict) -> str:
        """Where the policy acts for the envs: "central" (one copy in the main process, batched over the envs it
        steps, on the policy's device) or "workers" (each worker process its own copy on the CPU, as rlpyt's
        CpuSampler). `rlbench tune` offers a central policy every device the machine has."""
        return "central"

    def snippet(self, workload, options: dict) -> str:
        """The library call a user writes to get this configuration (`rlbench tune` prints the winner's);
        "" when the strategy is rlbench's own implementation of a design rather than a library's API."""
        return ""

    @classmethod
    def option(cls, name: str) -> Option:
        for opt in cls.options:
            if opt.name == name:
                return opt
        raise ValueError(f"unknown option '{name}' for {cls.name} "
                         f"(valid: {', '.join(o.name for o in cls.options) or 'none'})")

    @classmethod
    def resolve_options(cls, given: dict) -> dict:
        """Defaults filled in, every value typed; ValueError on an unknown key or bad value."""
        resolved = {o.name: o.default for o in cls.options}
        for key, raw in given.items():
            resolved[key] = cls.option(key).parse(raw)
        return resolved


class Family:
    """A kind of work rlbench measures (env stepping, learners, compiled JAX programs, replay stores, checks
    against published figures), plugged in like an adapter: it owns the adapter kinds whose cells it runs,
    the workloads of its own they take, what their sessions may report, what runs before a sweep, what a
    summary row adds, and its files and section of the report. The core loops over families and never
    compares a kind name. Keep the module that defines one cheap to import (cell processes read info_keys):
    import what a section draws with inside `section`/`exports`."""
    name: ClassVar[str] = ""
    order: ClassVar[int] = 50             # where its section sits in the report (lower first)
    kinds: ClassVar[tuple] = ()           # adapter kinds it owns
    workload_prefix: ClassVar[str] = ""   # env ids of its own workloads ("replay/"); "" = environments
    workload_example: ClassVar[str] = ""  # one of them, for messages
    info_keys: ClassVar[tuple] = ()       # what its sessions' `info` may carry into a results row
    identity_keys: ClassVar[tuple] = ()   # of those, what summary.csv repeats from a cell's first ok run
    summary_keys: ClassVar[tuple] = ()    # the summary.csv columns it computes
    # the frozen dataclass of its part of a cell's summary (rlbench.results.summary.CellSummary.parts): its
    # fields are identity_keys then summary_keys, in summary.csv's order
    cell_type: ClassVar[type] = None
    record_keys: ClassVar[tuple] = ()     # what its before_sweep adds to env.json (RunRecord.measured)
    races: ClassVar[tuple] = ()           # of its kinds, those whose env steps/s `rlbench tune` races
    metrics: ClassVar[tuple] = ()         # its figures (rlbench.results.metrics.Metric): CSV columns, formats, docs
    # the framework whose adapters' cells run on the machine's accelerator whenever it has one, whatever their
    # policy device says ("jax": a compiled program goes to JAX's default device); "" = none. A family may own
    # such cells whatever their kind, so they are told by the adapter's `requires`: on a cluster, each job of an
    # adapter requiring it reserves a GPU where the nodes have one
    accelerator_framework: ClassVar[str] = ""

    def workload_info(self, env_id: str):
        """The rlbench.envs.EnvInfo of one of its own workloads (its env_kwargs, their choices and ranges);
        a UsageError naming the valid ones for an unknown one."""
        raise NotImplementedError

    def check_workload(self, workload) -> None:
        """Raise ValueError naming what is wrong with one of its own workloads (checked as a suite loads)."""

    def before_sweep(self, suite, out_dir: str, record) -> dict:
        """Anything the run needs measured first, {record key: value} (the replay family: the machine's
        limits); record (rlbench.results.record.RunRecord) says what an earlier session of the run has."""
        return {}

    def cell_part(self, benchmark, first, measured: dict):
        """Its part of one cell's summary, a `cell_type` (None for a cell it adds nothing to): `first` is the
        run the cell's identity comes from, measured what the families' before_sweep measured (by record key)."""
        return None

    def exports(self, results, out_dir: str) -> dict:
        """Files of its own beside the report (replay.csv, validation.csv), name -> bytes or text (text is
        written as UTF-8): the report's one writer writes them."""
        return {}

    def section(self, results, out_dir: str) -> str:
        """Its HTML section of index.html, '' when the run has nothing of it."""
        return ""

    def headlines(self, results) -> list:
        """The run's answer in a sentence per workload (env stepping: the fastest strategy and its speedup
        over the one-process loop), printed after the medians table and boxed on top of the report; [] when
        it has none."""
        return []


class JaxEnvApi:
    """A functional API of JAX envs (gymnax's, Jumanji's, Pgx's...) that a user's factory may return, plugged in
    like an adapter: the kit's built-ins (adapters/_kit/jax_apis/, one module each, decorated with
    `rlbench.api.register_jax_env_api`), then the `rlbench.jax_env_apis` entry-point group (naming the class). The
    core knows none by name: planning asks the registered APIs in turn which one the built env offers (`detect`)
    and reads its spaces from it (`spaces`); the JAX adapters run it through `load`. Keep its module cheap to
    import (cell processes and planning discover every API): JAX and the package inside `load` only. `env` is what
    the factory returned, or its first item where it returned a pair this API makes (`pairs`); `params` the
    pair's second item, else None."""
    name: ClassVar[str] = ""          # `--opt env_api=<name>`, the env_api column of results
    title: ClassVar[str] = ""         # whose API, as a sentence names it: "Jumanji's"
    description: ClassVar[str] = ""   # one line: what an env of this API has, as the errors that list the APIs
                                      # give it after the title ("reset(key), step(state, action), action_spec")
    order: ClassVar[int] = 50         # where it is listed (messages, env_api's choices): lower first
    tried_before: ClassVar[tuple] = ()  # APIs whose detect() accepts this one's envs too: it is asked just
                                        # before the first of them (JaxMARL's envs have gymnax's methods)
    pairs: ClassVar[bool] = False     # a factory may return (env, params), as gymnax.make does

    def detect(self, env) -> bool:
        """Whether `env` offers this API, by its methods and attributes: no JAX imported, nothing called or traced
        (a property that computes, such as Brax's observation_size, is looked up with inspect.getattr_static)."""
        raise NotImplementedError

    def spaces(self, env, params) -> tuple:
        """(observation space, action space) for planning, without tracing JAX: gymnasium spaces where the API
        states only shapes or bounds, else the env's own space objects (the adapters read them by their
        attributes and name them by type). Raise rlbench.api.UsageError, its text naming what cannot be carried,
        for an env rlbench cannot carry: the core prefixes the env's id."""
        raise NotImplementedError

    def load(self, jax, env, params):
        """The env behind the kit's FunctionalEnv (adapters/_kit/jax_env.py), the interface the JAX adapters'
        compiled loops step: reset and step of one env, a finished env reset inside the step that finished it."""
        raise NotImplementedError
