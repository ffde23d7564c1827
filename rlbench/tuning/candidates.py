"""The configurations `rlbench tune` may race: every env-stepping adapter that can run the env here, at
any num_envs from 1 up to --max-envs, with the parallelism settings its `tune_space` names for this machine,
and which of them are one step from a given one. Each one left out is accounted for, with the reason."""
import os
from dataclasses import dataclass, replace

from rlbench import registry
from rlbench.envs import refusal
from rlbench.errors import UsageError
from rlbench.planning.suite import make_cell
from rlbench.results.ranking import raced_kinds
from rlbench.running.adapter_envs import environment_of
from rlbench.tuning import units
from rlbench.workload import kv_label, placed


@dataclass
class Left:
    """A configuration not raced, or an adapter not tried, and why (tune.json lists every one)."""
    adapter: str
    cell_id: str
    status: str    # unavailable | unsupported | own-environment | budget
    reason: str


def config(cell, shared=()) -> str:
    """How the answer names a configuration: the adapter, num_envs, the settings given (less `shared`, those every
    configuration is given alike, which the answer names once) and, off the CPU, where the policy runs."""
    given = {k: v for k, v in cell.given_options.items() if k not in shared}
    opts = f", {kv_label(given).replace(',', ', ')}" if given else ""
    device = cell.workload.policy.device_label
    where = "" if device == "cpu" else f", policy on {device}"
    return f"{cell.adapter} (num_envs={cell.workload.num_envs}{opts}{where})"


def cpus_here() -> int:
    return len(os.sched_getaffinity(0))


MAX_ENVS_CAP = 4096   # the largest num_envs tune climbs to, memory allowing
JAX_MAX_ENVS_CAP = 2**20  # a JAX env's: vmapped, an env is a few bytes of carry (gymnax's GPU sizes reach 2^20)
MEMORY_SHARE = 0.5    # of the machine's available memory, what one configuration may expect to hold


def available_mb() -> float:
    import psutil
    return psutil.virtual_memory().available / 2**20


def default_max_envs(profile, memory_mb: float = None) -> int:
    """As many envs as fit in MEMORY_SHARE of the available memory at the profiled memory per env, up to
    MAX_ENVS_CAP: the search climbs num_envs only while it pays, so the bound is what the machine can hold,
    not a guess of where the peak is."""
    jax_env = profile.jax
    per_env = max(profile.rss_per_env_mb, 1e-6 if jax_env else 1e-3)
    fits = int(MEMORY_SHARE * (memory_mb if memory_mb is not None else available_mb()) / per_env)
    return max(1, min(JAX_MAX_ENVS_CAP if jax_env else MAX_ENVS_CAP, fits))


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


def admitted(name: str, named, left: list) -> bool:
    """Whether an adapter may race: one with an environment of its own only when named (--adapters), one not
    available here never; what is refused is added to `left` with the reason."""
    cls = registry.get(name)
    own = environment_of(cls) is not None   # $RLBENCH_ENVS_HERE runs its environment here
    if own and not named:
        left.append(Left(name, "", "own-environment",
                         f"runs in its own environment '{cls.environment}': name it in --adapters to race it"))
        return False
    reason = None if own else cls().available()
    if reason:
        left.append(Left(name, "", "unavailable", reason))
        return False
    return True


def raceable(where: str, instance, workload, given: dict, seen: set, left: list):
    """The cell of the adapter `instance` with these settings, if it can race: not one already `seen` (its id is
    added), not one its options or supports() refuse (added to `left` with the reason); else None."""
    adapter = instance.name
    try:
        cell = make_cell(where, adapter, workload, given)
    except UsageError as exc:
        left.append(Left(adapter, "", "unsupported", str(exc)))
        return None
    if cell.cell_id in seen:
        return None
    seen.add(cell.cell_id)
    reason = refusal(instance, cell.workload, cell.options)
    if reason:
        left.append(Left(adapter, cell.cell_id, "unsupported", reason))
        return None
    return cell


class Space:
    """The configurations tune may race, built on demand: adapter x num_envs (1 to max_envs) x the settings
    its `tune_space` names at that num_envs x the devices the policy may run on (`devices`: the profile's; a
    policy kept in workers, as rlpyt's CpuSampler keeps it, runs on the CPU only). Every adapter or
    configuration that cannot race is kept in `left` with the reason, once."""

    def __init__(self, workload, named, max_envs: int, cpus: int, profile=None):
        """profile: the env's (rlbench.tuning.profile.EnvProfile): the devices the policy may run on, and the cost of
        a step each adapter's unit is sized by (rlbench.tuning.units); None: the policy's device, units as given."""
        self.workload, self.max_envs, self.cpus, self.profile = workload, max_envs, cpus, profile
        self.devices = tuple(profile.devices if profile is not None else (workload.policy.device_label,))
        self.adapters, self.left, self._cells, self._instances = [], [], {}, {}
        self.index = 0
        for name in stepping_adapters(named):
            if admitted(name, named, self.left):
                self.adapters.append(name)
                self._instances[name] = registry.get(name)()

    def settings(self, adapter: str, num_envs: int) -> list:
        """[(variant, cell)] of the adapter at num_envs that can race (variant: the place in its tune_space,
        0 for the first); what cannot is added to `left`."""
        key = (adapter, num_envs)
        if key not in self._cells:
            out, seen = [], set()
            if 1 <= num_envs <= self.max_envs:
                instance = self._instances[adapter]
                placings = [(g, d) for g in instance.tune_space(num_envs, self.cpus) for d in self.devices]
                for variant, (given, device) in enumerate(placings):
                    given = self.unit_sized(adapter, given, num_envs, device)
                    workload = replace(self.workload, num_envs=num_envs)
                    if device != workload.policy.device_label:
                        if self.central(adapter, given) is False:
                            continue   # the workers' own copies: on the CPU whatever the policy's device
                        workload = replace(workload, policy=placed(workload.policy, device))
                    cell = raceable(f"tune: {adapter}", instance, workload, given, seen, self.left)
                    if cell is not None:
                        out.append((variant, cell))
            self._cells[key] = out
        return self._cells[key]

    def unit_sized(self, adapter: str, given: dict, num_envs: int, device: str) -> dict:
        """A tune_space setting with the adapter's unit no longer than the env's cost allows (rlbench.tuning.units)."""
        if self.profile is None:
            return given
        return units.sized(registry.get(adapter), given, num_envs, units.cost_s_per_step(self.profile, device))

    def central(self, adapter: str, given: dict) -> bool:
        """Whether the adapter with these settings acts for its envs with one central copy of the policy."""
        cls = registry.get(adapter)
        return self._instances[adapter].policy_placement(cls.resolve_options(given)) == "central"

    @staticmethod
    def library(adapter: str) -> str:
        """The module that implements the adapter: strategies of one library (rlpyt's four samplers) share it."""
        return registry.get(adapter).__module__

    def numbered(self, cell):
        """The cell with the next index: the report lists cells in the order the search found them."""
        self.index += 1
        return replace(cell, index=self.index - 1)

    def probe_setting(self, adapter: str, num_envs: int) -> list:
        """[(variant, cell)]: the setting a probe starts from, the adapter's defaults where its tune_space
        has them (what the calibration measured; its unit's length aside, which the env's cost sets), else its
        first."""
        there = self.settings(adapter, num_envs)
        cls = registry.get(adapter)
        defaults = cls.resolve_options({})
        unit = {cls.unit_option} if cls.unit_option else set()
        same = [vc for vc in there if all(vc[1].options.get(k) == v for k, v in defaults.items() if k not in unit)]
        return [same[0] if same else there[0]] if there else []

    def neighbours(self, adapter: str, num_envs: int, variant: int, given: dict, device: str = None) -> list:
        """[(axis, variant, cell)] one step away along every axis: num_envs doubled (at most to --max-envs)
        and halved (the same settings where that num_envs offers them, else the same place in tune_space,
        else its first), and each other setting at this num_envs, the axis named by the options that differ
        (and "policy device" where the policy's device does)."""
        device = device or self.workload.policy.device_label
        here = (given, device)
        out = []
        up = num_envs * 2 if num_envs * 2 <= self.max_envs else self.max_envs  # the last step up: --max-envs itself
        for axis, n in (("num_envs x2", up if up > num_envs else 0),
                        ("num_envs /2", num_envs // 2 if num_envs % 2 == 0 else 0)):
            there = self.settings(adapter, n)
            if not there:
                continue
            same = next((vc for vc in there if _setting(vc[1]) == here), None)
            same = same or next((vc for vc in there if vc[0] == variant), None) or there[0]
            out.append((axis, *same))
        for v, cell in self.settings(adapter, num_envs):
            if _setting(cell) != here:
                keys = sorted(k for k in set(cell.given_options) | set(given)
                              if cell.given_options.get(k) != given.get(k))
                keys += ["policy device"] if _setting(cell)[1] != device else []
                out.append((", ".join(keys), v, cell))
        return out


def _setting(cell) -> tuple:
    """A configuration's place at its num_envs: the settings given and the policy's device."""
    return cell.given_options, cell.workload.policy.device_label
