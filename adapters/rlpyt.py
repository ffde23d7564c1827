"""rlpyt's samplers (`rlpyt-serial`, `rlpyt-cpu`, `rlpyt-gpu`, `rlpyt-alternating`), implemented natively from its
design (astooke/rlpyt, rlpyt/samplers; arXiv 1909.01500).

Each writes one [batch_T, num_envs] batch into shared memory per unit, and every sampler collects the same
transitions. How they are built: docs/strategies/stepping.md, "How the rlpyt adapters are built".
"""
import os
from time import perf_counter_ns

import numpy as np

from adapters._kit.batch import put, take, unstacker, vector_actions
from adapters._kit.nets import policy_params
from adapters._kit.procs import (
    ARRAY_SPACES,
    ENV_NS,
    INFER_NS,
    STAT_COLUMNS,
    SYNC_NS,
    WAIT_NS,
    WORKER_OPTIONS,
    EnvSlice,
    MasterWatch,
    ParamStore,
    SharedArrays,
    Window,
    acquire,
    obs_batch,
    obs_specs,
    pin,
    raise_if_exited,
    spaces,
    start_process,
    stop_processes,
    worker_cpus,
    worker_policy,
)
from rlbench.api import Adapter, Option, Workload, make_policy, register, unsupported_leaves, unsupported_spaces

# what rlpyt's buffers hold, observations and actions alike: an array, or a Dict's or Tuple's parts (rlpyt's
# namedarraytuples), an array each, nested at any depth (a multi-agent wrapper's tuple of each agent's)
SPACES = (*ARRAY_SPACES, "Dict", "Tuple")


def batch_specs(batch_T, num_envs, obs_space, act_space, workers) -> dict:
    B = num_envs
    return {
        **obs_specs("obs", obs_space, (batch_T, B)), **obs_specs("act", act_space, (batch_T, B)),
        "rew": ((batch_T, B), np.float32), "done": ((batch_T, B), np.bool_),
        **obs_specs("obs_now", obs_space, (B,)), **obs_specs("act_now", act_space, (B,)),
        "stats": ((workers + 1, STAT_COLUMNS), np.float64), "stop": ((1,), np.int64),
    }


def views(shared, obs_space, act_space) -> dict:
    """The buffers' views, observations and actions batched as gymnasium batches them (a Dict's parts in a
    dict, a Tuple's in a tuple: obs_batch), so the batch helpers write and index them as any other batch."""
    buf = shared.views()
    for name, space in (("obs", obs_space), ("obs_now", obs_space), ("act", act_space), ("act_now", act_space)):
        buf[name] = obs_batch(buf[name], space)
    return buf


def spaces_reason(workload, name: str):
    """Why rlpyt's buffers cannot hold the user's env's observations or actions (a part of no array space, at any
    depth of Dicts and Tuples), or None."""
    return (unsupported_spaces(workload, name, obs=SPACES, act=SPACES)
            or unsupported_leaves(workload, name, carries=ARRAY_SPACES)
            or unsupported_leaves(workload, name, carries=ARRAY_SPACES, actions=True))


def worker_main(rank, mode, workload_dict, lo, hi, shared, sems, params, cpus, master_pid, obs_space, act_space):
    """A sampler worker. mode 'cpu': act locally for a whole batch per go; 'gpu': one env step per action
    handed over by the master. A Dict or Tuple action space's actions are written to the buffers part by part
    and handed to each env as one dict or tuple (`unstacker`)."""
    pin(cpus)
    workload = Workload.from_dict(workload_dict)
    buf = views(shared, obs_space, act_space)
    to_batch = vector_actions(act_space)
    per_env = unstacker(act_space, hi - lo) if to_batch is not None else None
    stats, stop = buf["stats"][rank + 1], buf["stop"]
    master = MasterWatch(master_pid)
    envs = EnvSlice(workload, lo, hi, take(buf["obs_now"], slice(lo, hi)))
    try:
        if mode == "cpu":
            policy = worker_policy(workload, rank, obs_space, act_space)
            params.attach()
            go, done = sems
            while True:
                stats[WAIT_NS] += acquire(go, master.alive)
                if stop[0]:
                    return
                if policy.net is not None:
                    t0 = perf_counter_ns()
                    params.load(policy.net, master.alive)
                    stats[SYNC_NS] += perf_counter_ns() - t0
                for t in range(buf["rew"].shape[0]):
                    put(buf["obs"], (t, slice(lo, hi)), envs.obs_now)
                    t0 = perf_counter_ns()
                    # an episode starts where the step before was done (t - 1 = -1: the last batch's last)
                    actions = policy(envs.obs_now, buf["done"][t - 1, lo:hi]) if policy.recurrent \
                        else policy(envs.obs_now)
                    t1 = perf_counter_ns()
                    put(buf["act"], (t, slice(lo, hi)), actions if to_batch is None else to_batch(actions))
                    envs.step(actions, buf["rew"][t, lo:hi], buf["done"][t, lo:hi])
                    stats[INFER_NS] += t1 - t0
                    stats[ENV_NS] += perf_counter_ns() - t1
                done.release()
        else:
            act_ready, obs_ready = sems
            batch_T, t = buf["rew"].shape[0], 0
            obs_ready.release()
            while True:
                stats[WAIT_NS] += acquire(act_ready, master.alive)
                if stop[0]:
                    return
                t0 = perf_counter_ns()
                actions = take(buf["act_now"], slice(lo, hi))
                envs.step(actions if per_env is None else per_env(actions),
                          buf["rew"][t, lo:hi], buf["done"][t, lo:hi])
                stats[ENV_NS] += perf_counter_ns() - t0
                t = (t + 1) % batch_T
                obs_ready.release()
    finally:
        envs.close()


class SamplerSession:
    """The master side shared by every sampler: buffers, workers, the batch views a learner reads."""

    def __init__(self, workload, options, mode):
        import multiprocessing as mp
        self.workload, self.mode = workload, mode
        self.batch_T = options["batch_T"]
        self.procs = []
        workers = 0 if mode == "serial" else options["workers"]
        obs_space, act_space = spaces(workload)
        ctx = mp.get_context(options.get("context", "fork"))
        self.shared = SharedArrays(ctx, batch_specs(self.batch_T, workload.num_envs, obs_space, act_space, workers))
        self.buf = views(self.shared, obs_space, act_space)
        self.spaces, self.to_batch = (obs_space, act_space), vector_actions(act_space)
        self.samples = {k: self.buf[k] for k in ("obs", "act", "rew", "done")}
        self.params = ParamStore(ctx, policy_params(workload.policy, obs_space, act_space) if mode == "cpu" else 0)
        self.params.attach()
        self.window = Window(self.buf["stats"])
        self.metrics = self
        self.info = {"workers": max(workers, 1), "batch_size": self.batch_T * workload.num_envs}
        try:
            self._start(ctx, workers, options)
            self.policy = make_policy(workload, obs_space, act_space)  # after the fork: see policy_params
            self.recurrent = self.policy.recurrent
        except BaseException:
            self.close()
            raise

    def _start(self, ctx, workers, options):
        if self.mode == "serial":
            self.envs = EnvSlice(self.workload, 0, self.workload.num_envs, self.buf["obs_now"])
            return
        per = self.workload.num_envs // workers
        self.sems = [(ctx.Semaphore(0), ctx.Semaphore(0)) for _ in range(workers)]
        for rank, cpus in enumerate(worker_cpus(options["worker_affinity"], workers)):
            start_process(ctx, self.procs, worker_main, f"rlpyt-worker-{rank}",
                          (rank, "cpu" if self.mode == "cpu" else "gpu", self.workload.to_dict(), rank * per,
                           (rank + 1) * per, self.shared, self.sems[rank], self.params, cpus, os.getpid(),
                           *self.spaces))
        self.slices = [slice(r * per, (r + 1) * per) for r in range(workers)]
        if self.mode != "cpu":
            for rank in range(workers):  # initial observations written
                self._wait(rank)

    def workers_alive(self):
        raise_if_exited(self.procs, "sampler worker")

    def _wait(self, rank):
        self.buf["stats"][0, WAIT_NS] += acquire(self.sems[rank][1], self.workers_alive)

    def _select(self, t, where):
        """Record the observations of `where`, select their actions, hand them back."""
        obs = take(self.buf["obs_now"], where)
        put(self.buf["obs"], (t, where), obs)
        t0 = perf_counter_ns()
        if self.recurrent:  # a group's envs (alternating) are rows of the master's state by id
            ids = None if where == slice(None) else np.arange(where.start, where.stop)
            actions = self.policy(obs, self.buf["done"][t - 1, where], ids)
        else:
            actions = self.policy(obs)
        self.buf["stats"][0, INFER_NS] += perf_counter_ns() - t0
        batched = actions if self.to_batch is None else self.to_batch(actions)
        put(self.buf["act"], (t, where), batched)
        put(self.buf["act_now"], where, batched)
        return actions

    def step(self) -> int:
        getattr(self, f"_batch_{self.mode}")()
        return self.batch_T * self.workload.num_envs

    def _batch_serial(self):
        stats = self.buf["stats"][0]
        for t in range(self.batch_T):
            actions = self._select(t, slice(None))
            t0 = perf_counter_ns()
            self.envs.step(actions, self.buf["rew"][t], self.buf["done"][t])
            stats[ENV_NS] += perf_counter_ns() - t0

    def _batch_cpu(self):
        if self.policy.net is not None:  # as after an optimiser step: workers load these at batch start
            t0 = perf_counter_ns()
            self.params.publish(self.policy.net, self.workers_alive)
            self.buf["stats"][0, SYNC_NS] += perf_counter_ns() - t0
        for go, _ in self.sems:
            go.release()
        for rank in range(len(self.procs)):
            self._wait(rank)

    def _batch_gpu(self):
        for t in range(self.batch_T):
            self._select(t, slice(None))
            for act_ready, _ in self.sems:
                act_ready.release()
            for rank in range(len(self.procs)):
                self._wait(rank)

    def _batch_alternating(self):
        half = len(self.procs) // 2
        groups = [range(0, half), range(half, len(self.procs))]
        pending = [False, False]  # group stepping, its observations not yet collected
        for t in range(self.batch_T):
            for g, ranks in enumerate(groups):
                if pending[g]:
                    for rank in ranks:
                        self._wait(rank)
                self._select(t, slice(self.slices[ranks[0]].start, self.slices[ranks[-1]].stop))
                for rank in ranks:
                    self.sems[rank][0].release()
                pending[g] = True
        for ranks in groups:
            for rank in ranks:
                self._wait(rank)

    # -- metrics over the timed window ------------------------------------------------------------------
    def reset(self):
        self.window.reset()

    def read(self, seconds):
        d = self.window.delta() / (seconds * 1e9)
        master, workers = d[0], d[1:]
        acting = workers if self.mode == "cpu" else d[:1]
        stepping = workers if len(workers) else d[:1]
        return {"env_frac": float(stepping[:, ENV_NS].mean()),
                "inference_frac": float(acting[:, INFER_NS].mean()),
                "wait_frac": float(master[WAIT_NS]),
                "sync_frac": float(master[SYNC_NS] + (workers[:, SYNC_NS].mean() if len(workers) else 0.0))}

    def close(self):
        self.buf["stop"][0] = 1
        for sem_pair in getattr(self, "sems", []):
            sem_pair[0].release()
        stop_processes(self.procs)
        self.procs = []
        if hasattr(self, "envs"):
            self.envs.close()


SAMPLER_OPTIONS = (
    Option("batch_T", int, 32, "time steps per batch (one unit = batch_T x num_envs transitions)", low=1),
)


class RlpytSampler(Adapter):
    requires = ("gymnasium",)
    options = SAMPLER_OPTIONS + WORKER_OPTIONS
    unit_option = "batch_T"
    mode = ""
    min_workers = 1

    def supports(self, workload, options):
        workers = options["workers"]
        if workers < self.min_workers:
            return f"{self.name} needs workers >= {self.min_workers} (got {workers})"
        if workload.num_envs % workers:
            return f"num_envs={workload.num_envs} must be a multiple of workers={workers}"
        return spaces_reason(workload, self.name)

    def open(self, workload, options):
        return SamplerSession(workload, options, self.mode)

    def tune_space(self, num_envs, cpus):
        """A worker per core, and half as many (the master process needs a core too)."""
        counts = {min(cpus, num_envs), max(self.min_workers, min(cpus, num_envs) // 2)}
        return [{"workers": w} for w in sorted(counts) if w >= self.min_workers and num_envs % w == 0]


@register
class RlpytSerial(RlpytSampler):
    name = "rlpyt-serial"
    description = "rlpyt SerialSampler: one process steps all envs and selects all actions"
    options = SAMPLER_OPTIONS
    mode = "serial"

    def supports(self, workload, options):
        return spaces_reason(workload, self.name)

    def tune_space(self, num_envs, cpus):
        return [{}]


@register
class RlpytCpu(RlpytSampler):
    name = "rlpyt-cpu"
    description = "rlpyt CpuSampler: workers act with their own agent copy; parameters via shared memory"
    mode = "cpu"

    def policy_placement(self, options):
        return "workers"


@register
class RlpytGpu(RlpytSampler):
    name = "rlpyt-gpu"
    description = "rlpyt GpuSampler: workers step envs; the master batches inference for all, per step"
    mode = "gpu"


@register
class RlpytAlternating(RlpytSampler):
    name = "rlpyt-alternating"
    description = "rlpyt AlternatingSampler: two worker groups; one steps while the master acts for the other"
    mode = "alternating"
    min_workers = 2
