"""PufferLib's own autotune, run as its users run it, for check_tune.py: `pufferlib.vector.autotune(env_creator,
batch_size, max_envs, time_per_test=...)` in the pufferlib environment (adapters/envs/pufferlib.txt).

autotune returns nothing: it prints each configuration it timed ("SPS: x" and the configuration's keyword
arguments to pufferlib.vector.make, indented) and leaves the choice to the reader. So the parent (check_tune.py,
in rlbench's main environment) runs this file on the pufferlib environment's interpreter, keeps its stdout as it
is, and `parse` reads the fastest configuration from it; `cell_args` names that configuration as an rlbench cell
(pufferlib-serial or pufferlib-mp, num_envs, options) so that the exhaustive sweep re-measures it.

Everything above `_child` imports nothing of PufferLib, so the main environment (and the tests) can use it.
"""
import json
import math
import os
import re
import subprocess
import sys
import time

KEYS = {"num_envs": int, "num_workers": int, "batch_size": int, "zero_copy": None, "backend": str}
BACKENDS = {"Serial": "pufferlib-serial", "Multiprocessing": "pufferlib-mp"}
_BLOCK = re.compile(r"^SPS: (\S+)$")              # a configuration's result: flush left
_FIELD = re.compile(r"^    (\w+): (.+)$")          # its make() keyword arguments, indented 4
_NOTE = re.compile(r"^Reducing max envs to \d+ based on .+$")


class AutotuneOutputError(ValueError):
    """autotune's printed output is not what PufferLib 3.0.23 prints: a pick read from it could be wrong."""


def parse(text: str) -> dict:
    """{"configs": [{"sps", "config"}...] in autotune's order, "pick": the fastest, "notes": its caps}.

    Strict on purpose: a changed print format must stop check-tune rather than report a wrong pick. The profile's
    own indented "SPS:" (one env in-process) comes before "Profile complete" and is not a configuration."""
    lines = text.splitlines()
    try:
        start = lines.index("Profile complete") + 1
    except ValueError:
        raise AutotuneOutputError(f"no 'Profile complete' line in autotune's output:\n{_tail(text)}") from None
    configs, notes, block = [], [], None
    for n, line in enumerate(lines[start:], start + 1):
        head = _BLOCK.match(line)
        if head:
            block = {"sps": _number(head.group(1), n, line), "config": {}}
            configs.append(block)
            continue
        field = _FIELD.match(line)
        if block is not None and field:
            key, raw = field.groups()
            if key not in KEYS or key in block["config"]:
                raise AutotuneOutputError(f"line {n}: unexpected key in a configuration: {line!r}")
            block["config"][key] = _value(key, raw, n, line)
            continue
        if not line.strip():
            block = None
            continue
        if block is None and (_NOTE.match(line) or line.startswith("    ")):
            if _NOTE.match(line):
                notes.append(line)
            continue
        raise AutotuneOutputError(f"line {n}: not autotune's format: {line!r}")
    if not configs:
        raise AutotuneOutputError(f"autotune printed no configuration:\n{_tail(text)}")
    for c in configs:
        cfg = c["config"]
        if cfg.get("backend") not in BACKENDS or "num_envs" not in cfg:
            raise AutotuneOutputError(f"a configuration without a known backend or num_envs: {cfg}")
        if cfg["backend"] == "Serial" and set(cfg) != {"backend", "num_envs"}:
            raise AutotuneOutputError(f"a Serial configuration with Multiprocessing's arguments: {cfg}")
    pick = max(configs, key=lambda c: c["sps"])
    return {"configs": configs, "pick": pick, "notes": notes}


def _number(raw, n, line) -> float:
    try:
        v = float(raw)
    except ValueError:
        raise AutotuneOutputError(f"line {n}: SPS is not a number: {line!r}") from None
    if not math.isfinite(v) or v < 0:
        raise AutotuneOutputError(f"line {n}: SPS is not a finite rate: {line!r}")
    return v


def _value(key, raw, n, line):
    if key == "zero_copy":
        if raw not in ("True", "False"):
            raise AutotuneOutputError(f"line {n}: zero_copy is not a bool: {line!r}")
        return raw == "True"
    try:
        v = KEYS[key](raw)
    except ValueError:
        raise AutotuneOutputError(f"line {n}: {key} is not an integer: {line!r}") from None
    if KEYS[key] is int and v < 1:
        raise AutotuneOutputError(f"line {n}: {key} < 1: {line!r}")
    return v


def _tail(text, n=1500) -> str:
    return text[-n:] if text.strip() else "(nothing)"


def cell_args(config: dict) -> tuple:
    """(adapter, num_envs, options) of the rlbench cell that makes the same pufferlib.vector.make call.

    autotune calls make(env_creator, **config) with no overwork (its workers never exceed the physical cores)
    and zero_copy only where it is False, Multiprocessing's default being True, as pufferlib-mp's."""
    adapter = BACKENDS[config["backend"]]
    if adapter == "pufferlib-serial":
        return adapter, config["num_envs"], {}
    options = {"num_workers": config["num_workers"], "batch_size": config.get("batch_size", config["num_envs"])}
    if config.get("zero_copy") is False:
        options["zero_copy"] = False
    return adapter, config["num_envs"], options


def label(config: dict) -> str:
    """The pick as check-tune's table shows tune's: strategy, options, x num_envs."""
    adapter, n, options = cell_args(config)
    return " ".join([adapter, *(f"{k}={v}" for k, v in options.items())]) + f" x{n}"


def planned_tests(batch_size: int, max_envs: int, cores: int) -> int:
    """How many timed tests autotune will run (its profile and each configuration), at most: so that
    time_per_test * tests is the budget. Mirrors pufferlib/vector.py 3.0.23's strategies, counting its
    contiguous-block strategy (taken only above 0.5 GB/s of observations) as if taken, and not its RAM cap."""
    hardware = max_envs - max_envs % cores
    if batch_size < hardware != max_envs:
        max_envs = hardware
    n = 1                                                   # strategy 1: one batch per core
    for per_worker in range(math.ceil((batch_size + 1) / cores), batch_size):
        if per_worker * cores > max_envs:
            break
        if batch_size % per_worker:
            continue
        n += 1                                              # strategy 2: full async
        n += (per_worker * cores) % batch_size == 0         # strategy 3: contiguous blocks
    n += sum(batch_size % c == 0 for c in range(cores, 1, -1))   # strategy 4: full sync
    return 1 + n + 1                                        # the profile, ..., strategy 5: Serial


def model_forward_s(policy: str) -> float:
    """autotune's stand-in for the policy: a sleep per batch. Only rlbench's fixed_cost policy has a known cost."""
    name, _, rest = policy.partition(":")
    fields = dict(kv.split("=", 1) for kv in rest.split(",") if "=" in kv)
    return float(fields.get("cost_us", 0)) / 1e6 if name == "fixed_cost" else 0.0


def run(python: str, env_id: str, env_kwargs: dict, batch_size: int, max_envs: int, time_per_test: float,
        forward_s: float = 0.0, timeout: float = None) -> dict:
    """autotune in a process of the pufferlib environment's interpreter: parse()'s answer, with its printed
    output ("output") and the wall time of the whole process ("wall_s"), as tune's wall time counts its own."""
    spec = {"env_id": env_id, "env_kwargs": env_kwargs, "batch_size": batch_size, "max_envs": max_envs,
            "time_per_test": time_per_test, "model_forward_s": forward_s}
    t = time.monotonic()
    proc = subprocess.run([python, os.path.abspath(__file__), json.dumps(spec)], capture_output=True, text=True,
                          timeout=timeout)
    wall = time.monotonic() - t
    if proc.returncode != 0:
        raise RuntimeError(f"pufferlib.vector.autotune failed ({proc.returncode}): "
                           f"{_tail(proc.stderr or proc.stdout)}")
    return {**parse(proc.stdout), "output": proc.stdout, "wall_s": wall, "spec": spec}


def _child(spec: dict) -> None:
    """The user's call, on the env rlbench's adapters give PufferLib (GymnasiumPufferEnv around make_env).

    One shim: pufferlib-core 3.0.23's autotune calls `pufferlib.Suppress`, which that wheel's __init__ no longer
    exports (AttributeError before its first configuration); the class is its own pufferlib.pufferlib.Suppress."""
    from functools import partial

    import pufferlib
    import pufferlib.emulation
    import pufferlib.vector

    from rlbench.api import make_env
    if not hasattr(pufferlib, "Suppress"):
        pufferlib.Suppress = pufferlib.pufferlib.Suppress
    creator = partial(pufferlib.emulation.GymnasiumPufferEnv,
                      env_creator=partial(make_env, spec["env_id"], **spec["env_kwargs"]))
    pufferlib.vector.autotune(creator, batch_size=spec["batch_size"], max_envs=spec["max_envs"],
                              model_forward_s=spec["model_forward_s"], time_per_test=spec["time_per_test"])


if __name__ == "__main__":
    _child(json.loads(sys.argv[1]))
