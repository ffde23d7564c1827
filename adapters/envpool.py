"""`envpool-sync` and `envpool-async`: EnvPool's C++ thread pool, driven through its gymnasium API.

EnvPool resets a finished env on its next step; that reset (`elapsed_step` 0) is not a transition and is not
counted. It runs only envs it implements itself (adapters._kit.native).
"""
import os

import numpy as np

from adapters._kit.native import envpool_native
from rlbench.api import Adapter, Option, envpool_kwargs, make_policy, register


def _snippet(workload, options, batch_size):
    kwargs = {**envpool_kwargs(workload.env_id), **workload.env_kwargs}
    extra = "".join(f", {k}={v!r}" for k, v in sorted(kwargs.items()))
    threads = f", num_threads={options['num_threads']}" if options["num_threads"] else ""
    return (f"envpool.make_gymnasium({workload.env_id!r}, num_envs={workload.num_envs}, batch_size={batch_size}"
            f"{threads}{extra})")

_COMMON = (
    Option("num_threads", int, 0, "pool threads; 0 = EnvPool default, min(batch_size, hardware threads)"),
    Option("thread_affinity", bool, False, "pin pool threads to cores (thread_affinity_offset=0)"),
)


def _make(workload, options, batch_size):
    import envpool
    return envpool.make(
        workload.env_id, env_type="gymnasium", num_envs=workload.num_envs, batch_size=batch_size,
        num_threads=options["num_threads"], seed=workload.seed,
        thread_affinity_offset=0 if options["thread_affinity"] else -1, **envpool_kwargs(workload.env_id),
        **workload.env_kwargs)


def _workers(options, batch_size):
    """EnvPool's num_threads=0 means min(batch_size, hardware threads)."""
    return options["num_threads"] or min(batch_size, os.cpu_count() or 1)


def transitions(info) -> int:
    """Envs in the batch that made a real step (elapsed_step 0 marks an auto-reset)."""
    return int(np.count_nonzero(info["elapsed_step"]))


class _EnvPoolAdapter(Adapter):
    requires = ("envpool",)

    def supports(self, workload, options):
        return envpool_native(workload, self.name)


class EnvPoolSyncSession:
    def __init__(self, workload, options):
        self.env = _make(workload, options, workload.num_envs)
        self.obs, _ = self.env.reset()
        self.policy = make_policy(workload, self.env.observation_space, self.env.action_space)
        self.starts = None  # every env starts: the state is zero already
        if self.policy.recurrent:
            self.step = self._step_recurrent
        self.info = {"workers": _workers(options, workload.num_envs), "batch_size": workload.num_envs}

    def step(self) -> int:
        self.obs, _, _, _, info = self.env.step(self.policy(self.obs))
        return transitions(info)

    def _step_recurrent(self) -> int:
        """EnvPool marks an episode's first observation with elapsed_step 0: where the state is zeroed."""
        self.obs, _, _, _, info = self.env.step(self.policy(self.obs, self.starts))
        self.starts = info["elapsed_step"] == 0
        return transitions(info)

    def close(self):
        self.env.close()


@register
class EnvPoolSync(_EnvPoolAdapter):
    name = "envpool-sync"
    description = "envpool.make(batch_size=num_envs): step() waits for every env"
    options = _COMMON

    def open(self, workload, options):
        return EnvPoolSyncSession(workload, options)

    def snippet(self, workload, options):
        return _snippet(workload, options, workload.num_envs) + "  # step() waits for every env"


class EnvPoolAsyncSession:
    def __init__(self, workload, options, batch_size):
        self.env = _make(workload, options, batch_size)
        self.policy = make_policy(workload, self.env.observation_space, self.env.action_space)
        self.env.async_reset()
        self.recurrent = self.policy.recurrent
        self.info = {"workers": _workers(options, batch_size), "batch_size": batch_size}

    def step(self) -> int:
        obs, _, _, _, info = self.env.recv()
        env_id = info["env_id"]
        if self.recurrent:  # a batch of any envs: the state rows are theirs, by id
            self.env.send(self.policy(obs, info["elapsed_step"] == 0, env_id), env_id)
        else:
            self.env.send(self.policy(obs), env_id)
        return transitions(info)

    def close(self):
        self.env.close()


@register
class EnvPoolAsync(_EnvPoolAdapter):
    name = "envpool-async"
    description = "envpool.make(batch_size < num_envs): recv() the first batch_size envs done, send() their actions"
    options = (Option("batch_size", int, 0, "envs per recv; 0 = num_envs // 2"), *_COMMON)

    @staticmethod
    def batch_size(workload, options):
        return options["batch_size"] or workload.num_envs // 2

    def supports(self, workload, options):
        batch = self.batch_size(workload, options)
        if not 0 < batch < workload.num_envs:
            return f"envpool-async needs 0 < batch_size < num_envs (num_envs={workload.num_envs}, batch_size={batch})"
        return super().supports(workload, options)

    def open(self, workload, options):
        return EnvPoolAsyncSession(workload, options, self.batch_size(workload, options))

    def tune_space(self, num_envs, cpus):
        """EnvPool's rule of thumb: num_envs of 2-3x the batch; both halves and quarters are raced."""
        return [{"batch_size": b} for b in sorted({num_envs // 2, num_envs // 4}) if 0 < b < num_envs]

    def snippet(self, workload, options):
        return (_snippet(workload, options, self.batch_size(workload, options))
                + "  # async_reset(), then recv() a batch and send(actions, env_id)")
