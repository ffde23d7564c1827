"""What bounds the winner, said with the figure that shows it and what would change the answer: the policy, the
env's own compute on the cores there are, moving observations between processes, or one process stepping every
env. Read from the env's profile (its own step in one process, its observation's size) and the winner's split of
time in its rows (time in the policy, time outside it, busy cores), as Isaac Lab's and EnvPool's benchmarks read
a throughput figure: the regime decides which of the user's changes would move it."""
from dataclasses import dataclass

import numpy as np

from rlbench.results.model import Run
from rlbench.tuning import calibrate

POLICY_BOUND = 0.5      # of the winner's time in the policy: the network, not the env, sets the rate
CORES_BUSY = 0.8        # of the cores the winner may use, busy: the env's compute has the machine
OVERHEAD = 1.5          # time per env step outside the policy, over the env's own step spread over the cores used
BIG_OBS_BYTES = 4096    # an observation this large costs its copies between processes more than their calls


@dataclass(frozen=True)
class Regime:
    kind: str       # policy-bound | env-bound | transfer-bound | overhead-bound | one-process
    figure: str     # the figure that shows it
    lever: str      # what would move it

    @property
    def text(self) -> str:
        return f"{self.kind}: {self.figure}; {self.lever}"


def _median(rows, value) -> float:
    got = [v for v in (value(r) for r in rows) if v is not None]
    return float(np.median(got)) if got else float("nan")


def regime(rows, profile, gpu_option: bool) -> Regime | None:
    """The winner's regime from its ok rows (None without them). gpu_option: whether the profile measured the
    policy on a GPU here (where it did not, a faster device is not offered as the lever). rows: Runs
    (rlbench.results.model), or rows as written."""
    rows = [r for r in map(Run.of, rows) if r.seconds and r.env_steps]
    if not rows or profile.jax:   # a JAX env's step and policy are one compiled program: no split to read
        return None
    policy_share = _median(rows, lambda r: (r.policy_s or 0.0) / r.seconds)
    outside_us = _median(rows, lambda r: (r.seconds - (r.policy_s or 0.0)) / r.env_steps * 1e6)
    util = _median(rows, lambda r: r.cpu_util)
    cpus = int(rows[0].cpus or 1)
    workers = int(rows[0].workers or 1)
    own_us = calibrate.env_us(profile)
    used = max(1, min(workers, cpus))
    if policy_share >= POLICY_BOUND:
        lever = ("the policy on the GPU would move it" if gpu_option else
                 "a faster device for the policy (none here) or a smaller network would move it, not more envs or "
                 "workers")
        return Regime("policy-bound", f"{policy_share:.0%} of the winner's time in the policy", lever)
    if workers <= 1 and cpus > 1:
        return Regime("one-process", f"one process steps every env at {outside_us:.2f} us per env step outside the "
                      f"policy (the env's own step: {own_us:.2f} us), {cpus - 1} of {cpus} cores idle",
                      "handing steps to other processes costs more than this env's step saves: a dearer step "
                      "(or a pool in C++, EnvPool's) would move it")
    spread_us = own_us / used
    if outside_us <= OVERHEAD * spread_us and util == util and util >= CORES_BUSY * used:
        return Regime("env-bound", f"{util:.1f} of {cpus} cores busy at {outside_us:.2f} us per env step outside "
                      f"the policy, the env's own {own_us:.2f} us over {used} workers being {spread_us:.2f} us",
                      "more cores (or a cheaper env step) would move it")
    if profile.obs_bytes >= BIG_OBS_BYTES:
        return Regime("transfer-bound", f"{outside_us:.2f} us per env step outside the policy against "
                      f"{spread_us:.2f} us of the env's own step over {used} workers, with {profile.obs_bytes} B "
                      f"observations to move", "fewer copies of each observation (shared memory, a C++ pool) "
                      "would move it")
    return Regime("overhead-bound", f"{outside_us:.2f} us per env step outside the policy against {spread_us:.2f} "
                  f"us of the env's own step over {used} workers, {util:.1f} of {cpus} cores busy",
                  "its calls and waiting between processes cost more than parallel stepping saves: more envs per "
                  "worker (larger batches) would move it")
