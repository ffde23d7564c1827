"""The env profile `rlbench tune` starts from, measured in its own process (`python -m
rlbench.tuning.profile SPEC`, one JSON object out): what one env costs per step and per reset, how big an
observation is, how much memory an env holds, and what the policy costs per batch. These are the numbers
the recommendation explains the others' losses with (an IPC cost per step against the env's own step)."""
import json
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from rlbench.errors import UsageError

BATCHES = (1, 8, 64, 256, 1024)  # policy batch sizes profiled: a latency curve up to the largest num_envs
CALL_CAP_S = 0.25                 # a call this slow ends the curve: the larger batches would only take longer
RSS_ENVS = 4          # extra envs built to measure the memory one holds


@dataclass(frozen=True)
class EnvProfile:
    """The profile as the tuner reads it (what `profile` measured, by attribute); `doc` is the JSON itself,
    which tune.json keeps whole (a resumed tune reads it back rather than profiling again)."""
    step_us: float                      # one env's step(), median
    step_p99_us: float = 0.0
    step_cv: float = 0.0
    reset_share: float = 0.0            # of the time, in reset()
    obs_bytes: int = 0
    rss_per_env_mb: float = 0.0
    process_rss_mb: float = 0.0         # a process holding one env: what each extra worker costs
    policy_us_per_batch: Mapping = field(default_factory=dict)   # batch size (str) -> us per call; {} for JAX
    api: str = "gymnasium"              # or the JAX env API (then `adapter` hosted it: its compiled loop)
    adapter: str = ""
    # device -> its latency curve, where tune may place the policy (the user's device, and cuda where there is
    # one and the policy can move); why it cannot go to a GPU here, when it cannot
    policy_curves: Mapping = field(default_factory=dict)
    no_gpu: str = ""
    doc: Mapping = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_json(cls, doc: Mapping) -> "EnvProfile":
        step = doc.get("step") or {}
        return cls(step["median_us"], step.get("p99_us", 0.0), step.get("cv", 0.0), doc.get("reset_share") or 0.0,
                   doc.get("obs_bytes") or 0, doc.get("rss_per_env_mb") or 0.0, doc.get("process_rss_mb") or 0.0,
                   dict(doc.get("policy_us_per_batch") or {}), doc.get("api", "gymnasium"), doc.get("adapter") or "",
                   {d: dict(c) for d, c in (doc.get("policy_curves") or {}).items()}, doc.get("no_gpu") or "",
                   dict(doc))

    def to_json(self) -> dict:
        return dict(self.doc)

    @property
    def devices(self) -> tuple:
        """The devices tune may place the policy on: those with a curve, else the policy's own."""
        return tuple(self.policy_curves) or (str(self.doc.get("device") or "cpu"),)

    def curve(self, device: str = None) -> Mapping:
        """The latency curve (batch size (str) -> us per call) on `device`; the user's device's by default (and
        from a profile that measured only that one)."""
        return self.policy_curves.get(device, {}) if device and self.policy_curves else self.policy_us_per_batch

    @property
    def jax(self) -> bool:
        """A JAX env: vmapped in one compiled loop, raced by the JAX adapters only."""
        return self.api != "gymnasium"


def nbytes(obs) -> int:
    """Bytes of one observation, whatever its space (a dict or tuple of arrays and scalars)."""
    if isinstance(obs, dict):
        return sum(nbytes(v) for v in obs.values())
    if isinstance(obs, tuple):
        return sum(nbytes(v) for v in obs)
    return int(np.asarray(obs).nbytes)


def _quantiles(ns: np.ndarray) -> dict:
    us = ns / 1e3
    return {"median_us": float(np.median(us)), "p99_us": float(np.percentile(us, 99)),
            "cv": float(us.std() / us.mean()) if len(us) > 1 and us.mean() > 0 else 0.0, "calls": int(len(us))}


def step_profile(env, sample, seconds: float, seed: int) -> dict:
    """Per-call step() and reset() times of one env under random actions, for `seconds` of stepping."""
    steps, resets = [], []
    t = time.perf_counter_ns()
    env.reset(seed=seed)
    resets.append(time.perf_counter_ns() - t)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(steps) < 100:
        action = sample(1)[0]
        t = time.perf_counter_ns()
        _, _, terminated, truncated, _ = env.step(action)
        steps.append(time.perf_counter_ns() - t)
        if terminated or truncated:
            t = time.perf_counter_ns()
            env.reset()
            resets.append(time.perf_counter_ns() - t)
    step_ns, reset_ns = np.asarray(steps, float), np.asarray(resets, float)
    return {"step": _quantiles(step_ns), "reset": _quantiles(reset_ns),
            "reset_share": float(reset_ns.sum() / (reset_ns.sum() + step_ns.sum())),
            "episodes": len(resets) - 1, "steps_per_episode": len(steps) / max(len(resets) - 1, 1)}


def rss_per_env_mb(make, n: int = RSS_ENVS) -> float:
    import psutil
    me = psutil.Process()
    before = me.memory_info().rss
    envs = [make() for _ in range(n)]
    for i, env in enumerate(envs):
        env.reset(seed=i)
    grown = me.memory_info().rss - before
    for env in envs:
        env.close()
    return max(grown, 0) / n / 2**20


def policy_profile(workload, observation_space, action_space, obs, calls_s: float = 0.2) -> dict:
    """The policy's cost per call as the batch grows (BATCHES, up to the first call over CALL_CAP_S): median
    microseconds, as the cells time it, the copies to its device and back included."""
    from dataclasses import replace

    from gymnasium.vector.utils import concatenate, create_empty_array

    from rlbench.policy import make_policy
    out = {}
    for b in BATCHES:
        batch = concatenate(observation_space, [obs] * b, create_empty_array(observation_space, b))
        policy = make_policy(replace(workload, num_envs=b), observation_space, action_space)
        t = time.perf_counter_ns()
        policy(batch)  # first call: lazy set-up (torch kernels, caches) is not the steady cost
        first_s = (time.perf_counter_ns() - t) / 1e9
        times = []
        end = time.perf_counter() + calls_s
        while time.perf_counter() < end or len(times) < (5 if first_s < CALL_CAP_S / 5 else 2):
            t = time.perf_counter_ns()
            policy(batch)
            times.append(time.perf_counter_ns() - t)
        out[str(b)] = float(np.median(times)) / 1e3
        if out[str(b)] / 1e6 > CALL_CAP_S:
            break
    return out


def placements(workload, observation_space, action_space, obs) -> dict:
    """The policy's latency curve on each device tune may place it on: its own, and the other of CPU and
    CUDA where this machine has a CUDA device and the policy can move (rlbench.workload.placed); with why
    there is no GPU option when there is none."""
    from dataclasses import replace

    from rlbench.errors import Unsupported
    from rlbench.workload import placed
    own = workload.policy.device_label
    other = "cpu" if own.startswith("cuda") else "cuda"
    moved = placed(workload.policy, other)
    curves = {own: policy_profile(workload, observation_space, action_space, obs)}
    no_gpu = "" if moved is not None else f"policy {workload.policy.label} has no device to place"
    if moved is not None:
        try:   # the policy built there says whether it can be (no CUDA device, no torch): the core imports no torch
            curves[other] = policy_profile(replace(workload, policy=moved), observation_space, action_space, obs)
        except Unsupported as exc:
            no_gpu = "no CUDA device here" if str(exc) == "no CUDA device" else str(exc)
        except Exception as exc:  # a user's factory on the other device: whatever it raises, in one line
            no_gpu = f"the policy on {other} failed: {type(exc).__name__}: {str(exc)[:200]}"
    return {"policy_curves": curves, "no_gpu": no_gpu, "device": own}


def jax_host(api: str):
    """The adapter a JAX env of this API is profiled on: the first env-stepping one that runs the API."""
    from rlbench import registry
    from rlbench.results.ranking import raced_kinds
    kinds = raced_kinds()
    hosts = [cls for _, cls in sorted(registry.discover().items()) if api in cls.jax_env_apis and cls.kind in kinds]
    if not hosts:
        raise UsageError(f"no adapter here runs JAX envs of the {api} API")
    return hosts[0]


def jax_profile(workload, api: str, seconds: float) -> dict:
    """A JAX env has no step to call on its own: it is profiled as one env in the loop its adapter compiles
    (adapter defaults), a step's cost being a unit's time over the env steps it made. Resets happen inside
    steps (reset_share 0); the policy runs inside the program (no per-batch cost); the memory an env holds
    is its share of the loop's carry."""
    from dataclasses import replace

    import psutil

    from rlbench.envs import spaces
    process_rss_mb = psutil.Process().memory_info().rss / 2**20
    cls = jax_host(api)
    t = time.perf_counter()
    session = cls().open(replace(workload, num_envs=1), cls.resolve_options({}))
    build_s = time.perf_counter() - t
    try:
        steps_per_unit = session.step()   # the first call's own costs (buffers, dispatch caches): not the steady cost
        per_step = []
        end = time.perf_counter() + seconds
        while time.perf_counter() < end or len(per_step) < 10:
            t = time.perf_counter_ns()
            made = session.step()
            per_step.append((time.perf_counter_ns() - t) / made)
        obs_bytes, carry_bytes = session.obs_bytes, session.carry_bytes
        compile_s = session.info.get("compile_s")
    finally:
        session.close()
    obs_space, act_space = spaces(workload.env_id, workload.env_kwargs)
    return {"env": workload.env_id, "env_kwargs": workload.env_kwargs, "policy": workload.policy.label, "api": api,
            "adapter": cls.name, "observation_space": str(obs_space)[:300], "action_space": str(act_space)[:300],
            "obs_bytes": obs_bytes, "build_s": build_s, "compile_s": compile_s, "process_rss_mb": process_rss_mb,
            "steps_per_unit": steps_per_unit, "step": _quantiles(np.asarray(per_step, float)),
            "reset": _quantiles(np.zeros(1)), "reset_share": 0.0,
            "episodes": 0, "steps_per_episode": 0.0, "rss_per_env_mb": carry_bytes / 2**20,
            "policy_us_per_batch": {}}


def profile(spec: dict) -> dict:
    from functools import partial

    import psutil

    from rlbench.envs import env_api, make_env
    from rlbench.policy import random_sampler
    from rlbench.workload import Workload
    workload = Workload.from_dict(spec["workload"])
    api = env_api(workload.env_id, workload.env_kwargs)
    if api != "gymnasium":
        return jax_profile(workload, api, spec.get("seconds", 1.0))
    process_rss_mb = psutil.Process().memory_info().rss / 2**20  # a worker process's own, before any env
    make = partial(make_env, workload.env_id, **workload.env_kwargs)
    t = time.perf_counter()
    env = make()
    build_s = time.perf_counter() - t
    obs, _ = env.reset(seed=workload.seed)
    sample = random_sampler(env.action_space, np.random.default_rng(workload.seed))
    out = {"env": workload.env_id, "env_kwargs": workload.env_kwargs, "policy": workload.policy.label,
           "observation_space": str(env.observation_space)[:300], "action_space": str(env.action_space)[:300],
           "obs_bytes": nbytes(obs), "build_s": build_s, "process_rss_mb": process_rss_mb}
    out.update(step_profile(env, sample, spec.get("seconds", 1.0), workload.seed))
    out["rss_per_env_mb"] = rss_per_env_mb(make)
    out.update(placements(workload, env.observation_space, env.action_space, obs))
    out["policy_us_per_batch"] = out["policy_curves"][out["device"]]
    env.close()
    return out


def main() -> int:
    from rlbench.envs import in_cell
    in_cell()   # like a cell's: the env is imported as the user runs it (a JAX env on the accelerator)
    spec = json.loads(sys.argv[1])
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    print(json.dumps(profile(spec)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
