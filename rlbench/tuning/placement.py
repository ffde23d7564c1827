"""Where the winner's policy runs, said with the profiled figures that explain it: on which device, one copy
batched over the envs or a copy in each worker, what a call costs there at that batch, and what it would cost
on the other device the profile measured. The race decided the winner; this says why its placement wins."""
import numpy as np

from rlbench import registry
from rlbench.results.model import Run
from rlbench.workload import placed


def call_us(curve: dict, batch: int):
    """The profiled call time at `batch` (us), interpolated between the batches measured, past the largest
    scaled by the batch (the per-env cost there held); None with no curve."""
    if not curve:
        return None
    sizes = sorted(int(b) for b in curve)
    times = [float(curve[str(b)]) for b in sizes]
    if batch >= sizes[-1]:
        return times[-1] * batch / sizes[-1]
    return float(np.interp(batch, sizes, times))


def _ms(us: float) -> str:
    return f"{us / 1e3:.2f} ms" if us >= 1000 else f"{us:.0f} us"


def placement(cell, profile, rows=()) -> str:
    """One sentence: where the cell's policy runs, with the figures; "" for a policy that has no device (random,
    fixed_cost, a user's without one) and no curve. rows: the cell's ok Runs (rlbench.results.model), or rows as
    written."""
    policy = cell.workload.policy
    if not profile.curve() or placed(policy, "cpu") is None:   # nothing to place: no device, no network
        return ""
    device, n = policy.device_label, cell.workload.num_envs
    central = registry.get(cell.adapter)().policy_placement(cell.options) == "central"
    if central:
        batch = int(cell.options.get("batch_size") or n)
        us = call_us(profile.curve(device), batch)
        said = f"policy on {device}, one copy batched over {batch} envs: {_ms(us)} per batch ({us / batch:.1f} us " \
               "per env step, profiled)"
        elsewhere = [f"{_ms(call_us(profile.curve(d), batch))} on {d}" for d in profile.devices
                     if d != device and profile.curve(d)]
    else:
        workers = int(cell.options.get("workers") or cell.options.get("actors") or 1)
        batch = max(1, n // workers)
        us = call_us(profile.curve("cpu"), batch)
        said = (f"policy on the CPU, a copy in each of {workers} workers acting for {batch} envs: {_ms(us)} per "
                "batch (profiled)")
        elsewhere = [f"{_ms(call_us(profile.curve(d), n))} per batch of all {n} envs batched on {d}"
                     for d in profile.devices if d != "cpu" and profile.curve(d)]
    if elsewhere:
        said += ", against " + " and ".join(elsewhere)
    shares = [r.policy_s / r.seconds for r in map(Run.of, rows) if r.policy_s is not None and r.seconds]
    if shares:
        said += f"; {float(np.median(shares)):.0%} of the winner's time in the policy"
    if profile.no_gpu and len(profile.devices) < 2:
        said += f"; no GPU option: {profile.no_gpu}"
    return said
