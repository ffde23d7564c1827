"""The env profile `rlbench tune` starts from, measured in its own process (`python -m
rlbench.tuning.profile SPEC`, one JSON object out): what one env costs per step and per reset, how big an
observation is, how much memory an env holds, and what the policy costs per batch. These are the numbers
the recommendation explains the others' losses with (an IPC cost per step against the env's own step)."""
import json
import os
import sys
import time

import numpy as np

BATCHES = (1, 8, 64)  # policy batch sizes profiled
RSS_ENVS = 4          # extra envs built to measure the memory one holds


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
    """The policy's cost per call at a few batch sizes: median microseconds, as the cells time it."""
    from dataclasses import replace

    from gymnasium.vector.utils import concatenate, create_empty_array

    from rlbench.policy import make_policy
    out = {}
    for b in BATCHES:
        batch = concatenate(observation_space, [obs] * b, create_empty_array(observation_space, b))
        policy = make_policy(replace(workload, num_envs=b), observation_space, action_space)
        policy(batch)  # first call: lazy set-up (torch kernels, caches) is not the steady cost
        times = []
        end = time.perf_counter() + calls_s
        while time.perf_counter() < end or len(times) < 5:
            t = time.perf_counter_ns()
            policy(batch)
            times.append(time.perf_counter_ns() - t)
        out[str(b)] = float(np.median(times)) / 1e3
    return out


def profile(spec: dict) -> dict:
    from functools import partial

    import psutil

    from rlbench.envs import make_env
    from rlbench.policy import random_sampler
    from rlbench.workload import Workload
    workload = Workload.from_dict(spec["workload"])
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
    out["policy_us_per_batch"] = policy_profile(workload, env.observation_space, env.action_space, obs)
    env.close()
    return out


def main() -> int:
    spec = json.loads(sys.argv[1])
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    print(json.dumps(profile(spec)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
