"""What this machine and installation offer: `list` (the adapters and whether they run here), `env` (the
machine's fingerprint), `envs` (adapters' own environments, built on demand) and `limits` (memory-copy and
cold disk-read ceilings)."""
import json
import os
from dataclasses import dataclass

from rlbench import registry
from rlbench.commands.command import Command
from rlbench.errors import UsageError
from rlbench.machine.limits import DEFAULTS as LIMIT_DEFAULTS
from rlbench.machine.limits import positive_int
from rlbench.planning.request import Request, flag
from rlbench.running.rundir import REPORTS


@dataclass(frozen=True)
class NoRequest(Request):
    """A command without flags."""


def list_adapters(request: NoRequest) -> int:
    from rlbench.running.adapter_envs import environment_of
    adapters = registry.discover()
    for name in sorted(adapters):
        cls = adapters[name]
        own = environment_of(cls)
        if own:
            state = f"own environment '{own.name}': {own.state()}"
        else:
            reason = cls().available()
            state = "available" if reason is None else "unavailable: " + reason
        print(f"{name:<18} {cls.kind:<11} {state}")
        print(f"    {cls.description}")
        for o in cls.options:
            choices = f" [{'|'.join(map(str, o.choices))}]" if o.choices else ""
            valid = f"; {o.valid}" if o.type in (int, float) else ""
            print(f"    --opt {o.name}=<{o.type.__name__}> (default {o.default}{valid}){choices}  {o.help}")
    for label, err in registry.LOAD_ERRORS.items():
        print(f"{label}: failed to load: {err}")
    return 0


def fingerprint(request: NoRequest) -> int:
    from rlbench.machine.fingerprint import fingerprint
    print(json.dumps(fingerprint(), indent=2))
    return 0


@dataclass(frozen=True)
class EnvsRequest(Request):
    names: tuple = flag("environment names (default: all)", (), positional=True, metavar="NAME", nargs="*")
    build: bool = flag("build the ones not built yet (make install-extras)", False)
    jobs: int = flag("builds at once (default: one per environment, at most the CPUs + 1: pip waits on the network "
                     "and the disk as much as on a core)", 0, metavar="N")


def envs(request: EnvsRequest) -> int:
    from rlbench.running import adapter_envs
    known = adapter_envs.needed(registry.discover().values())
    unknown = [n for n in request.names if n not in known]
    if unknown:
        raise UsageError(f"unknown environment '{unknown[0]}' (valid: {', '.join(sorted(known))})")
    chosen = {n: e for n, e in known.items() if not request.names or n in request.names}
    if request.jobs < 0:
        raise UsageError(f"--jobs {request.jobs}: a count of builds at once, >= 1 (0: one per environment)")
    failed = []
    if request.build:
        todo = [e for _, e in sorted(chosen.items()) if os.path.exists(e.requirements)]
        failed = adapter_envs.build_all(todo, request.jobs or min(len(todo), (os.cpu_count() or 1) + 1) or 1)
    for name, env in sorted(chosen.items()):
        print(f"{name:<15} {', '.join(env.adapters):<28} {env.state()}  ({env.dir})")
    return 1 if failed else 0


@dataclass(frozen=True)
class LimitsRequest(Request):
    out_dir: str = flag("measure reads on this directory's filesystem (default reports/)", REPORTS)
    memcpy_mb: int = flag("MiB per copy buffer", LIMIT_DEFAULTS["memcpy_mb"], type=positive_int)
    disk_mb: int = flag("MiB of the scratch file", LIMIT_DEFAULTS["disk_mb"], type=positive_int)
    repeats: int = flag("runs per figure (median)", LIMIT_DEFAULTS["repeats"], type=positive_int)


def limits(request: LimitsRequest) -> int:
    from rlbench.machine.limits import measure_in_subprocess
    os.makedirs(request.out_dir, exist_ok=True)
    found = measure_in_subprocess(request.out_dir, request.memcpy_mb, request.disk_mb, request.repeats)
    print(json.dumps(found, indent=2))
    return 1 if "error" in found else 0


COMMANDS = (
    Command("list", "adapters, their options, and whether they can run here", NoRequest, list_adapters),
    Command("env", "print this machine's fingerprint (env.json)", NoRequest, fingerprint),
    Command("envs", "adapters' own environments (Sample Factory, Reverb, Brax, RLlib): state, or build", EnvsRequest,
            envs),
    Command("limits", "measure memory-copy and cold disk-read limits (what replay figures are fractions of)",
            LimitsRequest, limits),
)
