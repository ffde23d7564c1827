"""The configurations `rlbench tune` races: every env-stepping adapter that can run the env here, at
num_envs from 1 up to --max-envs in powers of two, with the parallelism settings its `tune_space` names
for this machine. Each one left out is accounted for, with the reason."""
import os
from dataclasses import dataclass, replace

from rlbench import registry
from rlbench.errors import UsageError
from rlbench.planning.suite import make_cell
from rlbench.workload import kv_label

BASELINES = ("serial",)  # the one-process loop every speedup is over


@dataclass
class Left:
    """A configuration not raced, or an adapter not tried, and why (tune.json lists every one)."""
    adapter: str
    cell_id: str
    status: str    # unavailable | unsupported | own-environment | budget
    reason: str


def config(cell) -> str:
    """How the answer names a configuration: the adapter, num_envs and the settings given."""
    opts = f", {kv_label(cell.given_options).replace(',', ', ')}" if cell.given_options else ""
    return f"{cell.adapter} (num_envs={cell.workload.num_envs}{opts})"


def cpus_here() -> int:
    return len(os.sched_getaffinity(0))


def default_max_envs(cpus: int) -> int:
    """Far enough past the cores for batched C++ pools and async waits to show their peak (EnvPool's
    rule of thumb: num_envs of 2.5-3x the batch), within what one-process-per-env strategies can start."""
    return min(max(16, 4 * cpus), 256)


def sizes(max_envs: int) -> list:
    out, n = [], 1
    while n <= max_envs:
        out.append(n)
        n *= 2
    if out[-1] != max_envs:
        out.append(max_envs)
    return out


def raced_kinds() -> set:
    """The adapter kinds whose env steps/s the families put in the race (rlbench.contract.Family.races)."""
    return {kind for family in registry.families() for kind in family.races}


def stepping_adapters(named=None) -> list:
    """The adapters to race: those named (--adapters), else every env-stepping adapter."""
    every, kinds = registry.discover(), raced_kinds()
    if named:
        for name in named:
            if name not in every:
                raise UsageError(f"--adapters: unknown adapter '{name}' (valid: {', '.join(sorted(every))})")
            if every[name].kind not in kinds:
                stepping = sorted(n for n, c in every.items() if c.kind in kinds)
                raise UsageError(f"--adapters: '{name}' is a {every[name].kind} adapter; tune races env-stepping "
                                 f"adapters (valid: {', '.join(stepping)})")
        return list(dict.fromkeys(named))
    return sorted(n for n, c in every.items() if c.kind in kinds)


def candidates(workload, named, max_envs: int, cpus: int) -> tuple:
    """(cells to race, in a stable order; [Left]; cell_id -> its place in its adapter's tune_space, 0 for
    the first setting). An adapter that lives in its own environment is raced only when named, as
    building that environment takes minutes."""
    cells, left, variants = [], [], {}
    for name in stepping_adapters(named):
        cls = registry.get(name)
        adapter = cls()
        if cls.environment and not named:
            left.append(Left(name, "", "own-environment",
                             f"runs in its own environment '{cls.environment}': name it in --adapters to race it"))
            continue
        reason = None if cls.environment else adapter.available()
        if reason:
            left.append(Left(name, "", "unavailable", reason))
            continue
        seen = set()
        for n in sizes(max_envs):
            for variant, given in enumerate(adapter.tune_space(n, cpus)):
                try:
                    cell = make_cell(f"tune: {name}", name, replace(workload, num_envs=n), given)
                except UsageError as exc:
                    left.append(Left(name, "", "unsupported", str(exc)))
                    continue
                if cell.cell_id in seen:
                    continue
                seen.add(cell.cell_id)
                reason = adapter.supports(cell.workload, cell.options)
                if reason:
                    left.append(Left(name, cell.cell_id, "unsupported", reason))
                    continue
                variants[cell.cell_id] = variant
                cells.append(replace(cell, index=len(cells)))
    return cells, left, variants
