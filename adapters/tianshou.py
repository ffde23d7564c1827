"""`tianshou-dummy`, `tianshou-subproc`, `tianshou-shmem`, `tianshou-ray`: tianshou's vector envs;
`tianshou-replay`: its ReplayBuffer / PrioritizedReplayBuffer on the replay workloads (kind replay).

Finished envs are reset inside the unit, as tianshou's Collector does, and only stepped transitions count.
Resets, seeds and the async mode: docs/strategies/stepping.md, "How the tianshou adapters are built".
"""
import os

import numpy as np

from adapters._kit import batch, ray_runtime
from adapters._kit.batch import ARRAY_SPACES
from adapters._kit.procs import CONTEXT_OPTION
from rlbench.api import (
    Adapter,
    Option,
    env_call,
    env_fns,
    make_env,
    make_policy,
    register,
    unsupported_leaves,
    unsupported_spaces,
)
from rlbench.families.replay.api import (
    PRIORITY_ALPHA,
    PRIORITY_BETA,
    ReplaySession,
    in_process_only,
    no_reuse_bound,
    replay_spec,
)

# tianshou's vector envs refuse Tuple observations (BaseVectorEnv.reset: "Tuple observation space is not
# supported"); a Dict observation comes back as the envs' dicts, which its Collector stacks
OBS_SPACES = ("Box", "Discrete", "MultiDiscrete", "MultiBinary", "Dict")


class TianshouSession:
    """Observations as tianshou's vector envs return them: a stacked array, or for a Dict space an object
    array of the envs' dicts (tianshou's Collector stacks those into a Batch), stacked here into a dict of
    arrays as gymnasium batches them, so the policy sees what `serial` hands it."""

    def __init__(self, venv, workload, workers, on_close=None):
        from gymnasium import spaces
        self.venv = venv
        self._on_close = on_close
        try:
            probe = make_env(workload.env_id, **workload.env_kwargs)  # single-env spaces, as wrapped
            try:
                self.space = probe.observation_space
                self.policy = make_policy(workload, probe.observation_space, probe.action_space)
            finally:
                probe.close()
            self.structured = isinstance(self.space, spaces.Dict)
            # one env at a time: reset(seed=s) would give every env the same seed
            first = [venv.reset(env_id=[i], seed=workload.seed + i)[0][0] for i in range(workload.num_envs)]
            self.obs = batch.stack(self.space, first) if self.structured else np.stack(first)
        except BaseException:
            self.close()
            raise
        self.ready = np.arange(workload.num_envs)     # envs waiting for an action (async mode)
        self.starts = np.ones(workload.num_envs, dtype=np.bool_)  # for a recurrent policy: episode starts
        self.recurrent = self.policy.recurrent
        self.step = self._step_async if venv.is_async else self._step_sync
        self.info = {"workers": workers}

    def _batch(self, obs):
        """tianshou's batch of observations as gymnasium batches them (only Dict spaces differ)."""
        return batch.stack(self.space, list(obs)) if self.structured else obs

    def _act(self, obs, ids=None):
        """A recurrent policy is told which observations start an episode (the done envs, reset here) and,
        for an async batch, which envs these are."""
        if not self.recurrent:
            return self.policy(obs)
        return self.policy(obs, self.starts if ids is None else self.starts[ids], ids)

    def _step_sync(self) -> int:
        obs, _, terminated, truncated, _ = self.venv.step(self._act(self.obs))
        done = np.flatnonzero(np.logical_or(terminated, truncated))
        if len(done):
            obs[done] = self.venv.reset(env_id=done)[0]
        if self.recurrent:
            self.starts[:] = False
            self.starts[done] = True
        self.obs = self._batch(obs)
        return len(obs)

    def _step_async(self) -> int:
        obs, _, terminated, truncated, info = self.venv.step(
            self._act(batch.take(self.obs, self.ready, self.space), self.ready), self.ready)
        ids = np.fromiter((i["env_id"] for i in info), dtype=np.int64, count=len(info))
        done = np.flatnonzero(np.logical_or(terminated, truncated))
        if len(done):
            obs[done] = self.venv.reset(env_id=ids[done])[0]
        if self.recurrent:
            self.starts[ids] = False
            self.starts[ids[done]] = True
        self.obs = batch.put(self.obs, ids, self._batch(obs), self.space)
        self.ready = ids
        return len(ids)

    def close(self):
        try:
            if not self.venv.is_closed:
                self.venv.close()
        finally:
            if self._on_close is not None:
                self._on_close()
                self._on_close = None



def _async_kwargs(options):
    return {"wait_num": options["wait_num"] or None, "timeout": options["timeout"] or None}


_ASYNC = (
    Option("wait_num", int, 0, "async mode: a step returns once this many envs finished; 0 = all (synchronous)"),
    Option("timeout", float, 0.0, "async mode: a step returns what finished within this many seconds; 0 = none"),
)


class _TianshouAdapter(Adapter):
    requires = ("tianshou",)
    options = _ASYNC

    def supports(self, workload, options):
        wait_num = options.get("wait_num", 0)
        if not 0 <= wait_num <= workload.num_envs:
            return (f"{self.name} needs 0 <= wait_num <= num_envs "
                    f"(num_envs={workload.num_envs}, wait_num={wait_num})")
        return unsupported_spaces(workload, self.name, obs=OBS_SPACES)

    def tune_space(self, num_envs, cpus):
        """Synchronous, and (where the adapter has it) async: a step returns once half the envs are done."""
        if "wait_num" in {o.name for o in self.options} and num_envs >= 4:
            return [{}, {"wait_num": num_envs // 2}]
        return [{}]

    def snippet(self, workload, options):
        cls = {"tianshou-dummy": "DummyVectorEnv", "tianshou-ray": "RayVectorEnv"}.get(self.name, "SubprocVectorEnv")
        extra = "".join(f", {k}={options[k]!r}" for k in ("wait_num", "context") if options.get(k))
        if self.name == "tianshou-shmem":
            extra += ", share_memory=True"
        return f"tianshou.env.{cls}([lambda: {env_call(workload)}] * {workload.num_envs}{extra})"


@register
class TianshouDummy(_TianshouAdapter):
    name = "tianshou-dummy"
    description = "tianshou DummyVectorEnv: envs stepped in a loop, one process; finished envs reset by the caller"
    options = ()  # synchronous only (see the module docstring)

    def open(self, workload, options):
        from tianshou.env import DummyVectorEnv
        return TianshouSession(DummyVectorEnv(env_fns(workload)), workload, workers=1)


@register
class TianshouSubproc(_TianshouAdapter):
    name = "tianshou-subproc"
    description = "tianshou SubprocVectorEnv: one subprocess per env, pipes; wait_num < num_envs = async"
    options = (*_ASYNC, CONTEXT_OPTION)

    def open(self, workload, options):
        from tianshou.env import SubprocVectorEnv
        venv = SubprocVectorEnv(env_fns(workload), **_async_kwargs(options), context=options["context"])
        return TianshouSession(venv, workload, workers=workload.num_envs)


@register
class TianshouShmem(_TianshouAdapter):
    name = "tianshou-shmem"
    description = "tianshou ShmemVectorEnv: one subprocess per env, observations through shared memory"
    options = (*_ASYNC, CONTEXT_OPTION)

    def supports(self, workload, options):
        """Its shared buffers are numpy arrays of each part's shape and dtype: array spaces only."""
        return super().supports(workload, options) or unsupported_leaves(workload, self.name, carries=ARRAY_SPACES)

    def open(self, workload, options):
        from tianshou.env import SubprocVectorEnv
        # ShmemVectorEnv is exactly SubprocVectorEnv(share_memory=True) with the default start method
        # (fork on Linux); built this way the start method can be chosen too.
        venv = SubprocVectorEnv(env_fns(workload), **_async_kwargs(options), share_memory=True,
                                context=options["context"])
        return TianshouSession(venv, workload, workers=workload.num_envs)


@register
class TianshouRay(_TianshouAdapter):
    name = "tianshou-ray"
    description = "tianshou RayVectorEnv: one Ray actor per env on a local Ray instance started for the cell"
    requires = ("tianshou", "ray")

    def open(self, workload, options):
        import ray
        from tianshou.env import RayVectorEnv
        shutdown = None
        if not ray.is_initialized():  # RayVectorEnv would call a bare ray.init(); a small local instance instead
            _, shutdown = ray_runtime.start(num_cpus=len(os.sched_getaffinity(0)))
        try:
            venv = RayVectorEnv(env_fns(workload), **_async_kwargs(options))
        except BaseException:
            if shutdown is not None:
                shutdown()
            raise
        return TianshouSession(venv, workload, workers=workload.num_envs, on_close=shutdown)


class TianshouReplayStore:
    """tianshou's ReplayBuffer (uniform and reuse workloads) or PrioritizedReplayBuffer(alpha, beta)
    (prioritized ones), driven as its Collector drives them: each add is a Batch of one env's step,
    stacked along a leading env axis (obs, act, rew, terminated, truncated, obs_next when the buffer
    stores it, info) added with buffer_ids=[0]. tianshou stores one transition per add (a Batch
    assignment in Python per key). The fill before timing moves whole chunks in with the buffer's own
    update(other buffer) (one copy per key; priorities initialised as add does), the other buffer made
    by ReplayBuffer.from_data over the chunk: the same stored arrays as one add per item (SAC's setup 18 s -> 4 s).

    `sample(n)` returns a Batch with obs and obs_next; the learner gets both and both are consumed.
    With ignore_obs_next (the default here, as for tianshou's Atari setups), obs_next is not stored but
    gathered again from obs at each index's successor (`buffer.next`, which looks at the done flags):
    a second gather of item_bytes per item, tianshou's real cost. Without it obs_next is stored:
    twice the memory, and the second gather reads that array instead. The driver hands over one item
    per add, so a stored obs_next is the item itself. Priorities go through `update_weight`.
    Uniform indices come from the buffer's own RandomState (seeded with the workload seed);
    prioritized ones from numpy's global generator, as tianshou draws them."""
    bound = "memcpy_1core"

    def __init__(self, spec, ignore_obs_next: bool):
        from tianshou.data import Batch, PrioritizedReplayBuffer, ReplayBuffer
        self.Batch = Batch
        kwargs = {"ignore_obs_next": ignore_obs_next, "random_seed": spec.seed}
        if spec.prioritized:
            self.buffer = PrioritizedReplayBuffer(spec.capacity, alpha=PRIORITY_ALPHA, beta=PRIORITY_BETA, **kwargs)
        else:
            self.buffer = ReplayBuffer(spec.capacity, **kwargs)
        self.store_obs_next = not ignore_obs_next
        # one env's step, stacked along the env axis as the Collector hands it over
        self.act = np.zeros(1, dtype=np.int64)
        self.rew = np.zeros(1, dtype=np.float64)
        self.flag = np.zeros(1, dtype=bool)        # terminated, truncated: the episode goes on
        self.buffer_ids = [0]

    def add(self, item) -> None:
        obs = item[None]
        step = {"obs": obs, "act": self.act, "rew": self.rew, "terminated": self.flag, "truncated": self.flag,
                "info": self.Batch()}
        if self.store_obs_next:
            step["obs_next"] = obs
        self.buffer.add(self.Batch(step), buffer_ids=self.buffer_ids)

    def add_many(self, items) -> None:
        from tianshou.data import ReplayBuffer
        k = len(items)
        flags = np.zeros(k, dtype=bool)
        chunk = ReplayBuffer.from_data(items, np.zeros(k, dtype=np.int64), np.zeros(k), flags, flags, flags, items)
        if not self.store_obs_next:
            chunk._meta.pop("obs_next")   # from_data always carries obs_next; this buffer must not store it
        self.buffer.update(chunk)

    def sample(self, n: int):
        batch, indices = self.buffer.sample(n)
        return [batch.obs, batch.obs_next], indices

    def update_priorities(self, indices, priorities) -> None:
        self.buffer.update_weight(indices, priorities)

    def close(self) -> None:
        self.buffer = None


@register
class TianshouReplay(Adapter):
    name = "tianshou-replay"
    kind = "replay"
    description = "tianshou ReplayBuffer / PrioritizedReplayBuffer: one Batch per add, as its Collector adds"
    requires = ("tianshou",)
    options = (
        Option("ignore_obs_next", bool, True,
               "obs_next not stored but gathered from the next slot (False: stored, twice the memory)"),
    )

    def supports(self, workload, options):
        return in_process_only(workload) or no_reuse_bound(workload, "tianshou's ReplayBuffer")

    def open(self, workload, options):
        spec = replay_spec(workload)
        return ReplaySession(TianshouReplayStore(spec, options["ignore_obs_next"]), spec)
