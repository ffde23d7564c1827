"""The adapter interface: everything an execution model implements, and all an adapter may import.

The harness owns timing, warm-up and latency recording; an adapter only opens a session whose
`step()` does one unit of work (one vector step, one rollout of T steps, one jitted scan) and
returns how many env steps it made.
"""
import importlib.util
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from rlbench.envs import env_fns, env_info, envpool_kwargs, make_env  # noqa: F401  (re-exported for adapters)
from rlbench.errors import Unsupported  # noqa: F401
from rlbench.results import SESSION_METRICS  # noqa: F401
from rlbench.proctree import become_subreaper  # noqa: F401  (for adapters whose framework orphans processes)
from rlbench.policy import make_policy, random_sampler, register_policy  # noqa: F401
from rlbench import pagecache  # noqa: F401  (disk-backed stores: cold or warm page cache)
from rlbench.replay import (ReplaySession, ReplaySpec, in_process_only, replay_spec,  # noqa: F401  (kind replay)
                            scratch_dir)
from rlbench.workload import PolicySpec, Workload  # noqa: F401

_TYPE_WORDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
_BOOL = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


@dataclass(frozen=True)
class Option:
    name: str
    type: type
    default: Any
    help: str = ""
    choices: tuple = ()

    def parse(self, raw):
        """Typed value from a CLI string or a TOML value; ValueError names the valid choices."""
        try:
            if self.type is bool:
                value = raw if isinstance(raw, bool) else _BOOL[str(raw).lower()]
            elif self.type is int and isinstance(raw, float) and not raw.is_integer():
                raise ValueError
            else:
                value = self.type(raw)
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"option {self.name}={raw!r} must be {_TYPE_WORDS[self.type]}") from None
        if self.choices and value not in self.choices:
            raise ValueError(f"option {self.name}={raw!r} (valid: {', '.join(map(str, self.choices))})")
        return value


# The option every disk-backed replay store takes (rlbench.pagecache sets and records the state)
PAGE_CACHE = Option("cache", str, "cold", "page cache as timing starts: cold (dropped) or warm (read once)",
                    ("cold", "warm"))


class Session(Protocol):
    info: dict          # optional: see rlbench.cell.INFO_KEYS (workers, batch_size, compile_s, ...)
    metrics: "Metrics"  # optional: figures beyond env steps, over the timed window

    def drain(self) -> None: ...    # optional: wait for work step() only dispatched (block_until_ready)

    def step(self) -> int: ...
    def close(self) -> None: ...


class Metrics(Protocol):
    """What a session reports beside env steps; `read` returns names from SESSION_METRICS only."""

    def reset(self) -> None: ...
    def read(self, seconds: float) -> dict: ...


class Adapter:
    """Subclass, set the class attributes, implement `open`, decorate with `@register`."""
    name: ClassVar[str] = ""
    kind: ClassVar[str] = "vector_env"
    description: ClassVar[str] = ""
    options: ClassVar[tuple] = ()
    requires: ClassVar[tuple] = ()      # importable module names
    environment: ClassVar[str] = ""     # own virtual env pinned by envs/<environment>.txt beside the module

    def available(self):
        """None when usable here, else the reason (checked without importing the framework)."""
        missing = [m for m in self.requires if importlib.util.find_spec(m) is None]
        return f"package not installed: {', '.join(missing)}" if missing else None

    def supports(self, workload: Workload, options: dict):
        """None when this adapter can host the workload, else the reason. Must stay cheap."""
        return None

    def open(self, workload: Workload, options: dict) -> Session:
        raise NotImplementedError

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


def register(cls):
    from rlbench.registry import ADAPTERS
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    ADAPTERS[cls.name] = cls
    return cls
