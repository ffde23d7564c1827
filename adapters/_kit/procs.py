"""Worker processes of the multi-process adapters (rlpyt's samplers, rlpyt-async, impala, seed, a3c,
rlpyt-sync): shared memory made before the workers start, their start, CPU pinning, liveness both
ways and stop, the envs a worker steps, and the per-process stage-time counters their metrics read.
"""
import os
from contextlib import contextmanager
from dataclasses import replace
from time import perf_counter_ns

import numpy as np

from rlbench.api import Option, make_env, make_policy

# Per-process time counters, one row per process of a `stats` array of STAT_COLUMNS columns, written
# only by their owner; an adapter may use the columns past LEARN_NS for its own figures.
ENV_NS, INFER_NS, WAIT_NS, SYNC_NS, LEARN_NS = range(5)
STAT_COLUMNS = 8
POLL_S = 1.0  # how often a blocked process checks whether its peer is still alive

# how an adapter's processes start; one declaration, so every adapter offers the same choices under one name
CONTEXT_OPTION = Option("context", str, "fork", "multiprocessing start method", ("fork", "forkserver", "spawn"))
WORKER_OPTIONS = (
    Option("workers", int, 2, "worker processes; each steps num_envs / workers envs", low=1),
    Option("worker_affinity", str, "none", "pin worker i to the i-th allowed CPU (spread) or not",
           ("none", "spread")),
    CONTEXT_OPTION,
)


# -- shared memory -----------------------------------------------------------------------------------------

class Transient:
    """A base for what the master hands a worker process when some attributes must not travel: views on
    shared memory (they would arrive as copies, no longer shared), clients, handles, locks. Those named in
    `transient` are left out of the pickle and arrive as None, for the worker to make again on first use;
    a spawn or forkserver start pickles the object, a fork does not, so both paths must reach the same state."""
    transient: tuple = ()   # attribute names rebuilt in the process that uses them

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k not in self.transient}

    def __setstate__(self, state):
        self.__dict__.update(state, **dict.fromkeys(self.transient))


class SharedArrays:
    """NumPy views on zero-initialised multiprocessing RawArrays: made once by the master and handed
    to workers as process arguments, so they work with fork, forkserver and spawn alike. A name with
    slashes ("obs/position") is a part of a structured buffer: `views()` nests it ({"obs": {"position":
    ...}}), as `obs_specs` lays out a Dict observation."""

    def __init__(self, ctx, specs: dict):
        self.specs = {k: (tuple(shape), np.dtype(dtype).str) for k, (shape, dtype) in specs.items()}
        self.raw = {k: ctx.RawArray("b", max(1, int(np.prod(shape)) * np.dtype(dtype).itemsize))
                    for k, (shape, dtype) in self.specs.items()}

    def views(self) -> dict:
        out = {}
        for k, (shape, dtype) in self.specs.items():
            *path, leaf = k.split("/")
            node = out
            for part in path:
                node = node.setdefault(part, {})
            node[leaf] = np.frombuffer(self.raw[k], dtype=dtype, count=int(np.prod(shape))).reshape(shape)
        return out


ARRAY_SPACES = ("Box", "Discrete", "MultiDiscrete", "MultiBinary")  # one array per observation


def obs_specs(name: str, space, lead: tuple) -> dict:
    """SharedArrays specs for observations of `space` under leading dimensions `lead`: one array `name`, or
    for a Dict space one per part, `name/key` (nested Dicts `name/key/sub`), as rlpyt lays out a Dict
    observation (a namedarraytuple of arrays); a Tuple's parts are `name/0`, `name/1`, ... Every part keeps its
    own dtype (a uint8 screen stays uint8). A part of another kind (Text, Sequence, ...) has no layout:
    ValueError. `obs_batch` gives the views back the space's structure."""
    kind = type(space).__name__
    if kind in ("Dict", "Tuple"):
        named = space.spaces.items() if kind == "Dict" else enumerate(space.spaces)
        out = {}
        for key, part in named:
            out.update(obs_specs(f"{name}/{key}", part, lead))
        return out
    if kind not in ARRAY_SPACES:
        raise ValueError(f"no shared-memory layout for {kind} observations")
    return {name: ((*lead, *space.shape), space.dtype)}


def obs_batch(view, space):
    """The observation batch `obs_specs` laid out, from its entry in SharedArrays.views() (which nests every part
    by name in dicts): the array itself for an array space, a dict of a Dict's parts, a tuple of a Tuple's, as
    gymnasium's vector envs batch them (adapters._kit.batch writes and indexes them, nets.obs_leaves reads them)."""
    kind = type(space).__name__
    if kind == "Dict":
        return {key: obs_batch(view[key], part) for key, part in space.spaces.items()}
    if kind == "Tuple":
        return tuple(obs_batch(view[str(i)], part) for i, part in enumerate(space.spaces))
    return view


def obs_arrays(space, lead: tuple, alloc=np.zeros):
    """A batch of `space`'s observations under leading dimensions `lead`, held in-process as `obs_batch` gives
    shared ones back: one array (*lead, *shape) in the space's dtype for an array space, a dict of a Dict's
    parts, a tuple of a Tuple's (each part in its own dtype: a uint8 screen stays uint8); `alloc` makes each
    array (np.zeros, np.empty). A part of another kind has no layout: ValueError, as in `obs_specs`."""
    kind = type(space).__name__
    if kind == "Dict":
        return {key: obs_arrays(part, lead, alloc) for key, part in space.spaces.items()}
    if kind == "Tuple":
        return tuple(obs_arrays(part, lead, alloc) for part in space.spaces)
    if kind not in ARRAY_SPACES:
        raise ValueError(f"no buffer layout for {kind} observations")
    return alloc((*lead, *space.shape), dtype=space.dtype)


def obs_parts(name: str, obs, space) -> dict:
    """A batch of `space` as flat named arrays, named as `obs_specs` names them (`name` for an array space,
    `name/key` for a Dict's parts, `name/0`, ... for a Tuple's): what goes into a store of flat fields (the
    prioritized replay's items). `obs_from_parts` is the way back."""
    kind = type(space).__name__
    if kind in ("Dict", "Tuple"):
        named = space.spaces.items() if kind == "Dict" else enumerate(space.spaces)
        out = {}
        for key, part in named:
            out.update(obs_parts(f"{name}/{key}", obs[key], part))
        return out
    return {name: obs}


def obs_from_parts(parts: dict, name: str, space):
    """The batch `obs_parts` flattened, in the space's structure again (the arrays themselves, or whatever
    `parts` holds under those names: tensors on a learner's device)."""
    kind = type(space).__name__
    if kind == "Dict":
        return {key: obs_from_parts(parts, f"{name}/{key}", part) for key, part in space.spaces.items()}
    if kind == "Tuple":
        return tuple(obs_from_parts(parts, f"{name}/{i}", part) for i, part in enumerate(space.spaces))
    return parts[name]


class ParamStore:
    """A policy's parameters in shared memory with a version number: the master publishes, workers load
    when the version moved (rlpyt's shared model for a CUDA agent's CPU workers). Both sides take the lock
    through `held`, with their check on the peer: a process killed while holding it blocks nobody for good."""

    def __init__(self, ctx, count: int):
        self.flat = SharedArrays(ctx, {"p": ((max(count, 1),), np.float32), "v": ((1,), np.int64)})
        self.lock = ctx.Lock()
        self.count = count

    def attach(self):
        self._views = self.flat.views()
        self.loaded = -1

    @property
    def version(self) -> int:
        return int(self._views["v"][0])

    def publish(self, net, alive) -> int:
        import torch
        flat = torch.nn.utils.parameters_to_vector(net.parameters()).detach().cpu().numpy()
        with held(self.lock, alive):
            self._views["p"][:] = flat
            self._views["v"][0] += 1
            return int(self._views["v"][0])

    def load(self, net, alive) -> int:
        """Copy the newest parameters into `net` if they changed; returns the version now held."""
        import torch
        if self.version == self.loaded:
            return self.loaded
        with held(self.lock, alive):
            flat, self.loaded = self._views["p"].copy(), self.version
        torch.nn.utils.vector_to_parameters(torch.from_numpy(flat).to(next(net.parameters()).device),
                                            net.parameters())
        return self.loaded


class Window:
    """The per-process time counters over the harness's timed window."""

    def __init__(self, stats):
        self.stats = stats
        self.reset()

    def reset(self):
        self.start = self.stats.copy()

    def delta(self):
        return self.stats - self.start


# -- starting, pinning, watching and stopping workers ------------------------------------------------------

def worker_cpus(affinity: str, workers: int) -> list:
    """Per rank, the CPUs to pin the worker to: `spread` gives rank i the i-th allowed CPU (round robin),
    `none` leaves every worker where the parent may run (None)."""
    cpus = sorted(os.sched_getaffinity(0))
    return [[cpus[rank % len(cpus)]] if affinity == "spread" else None for rank in range(workers)]


def pin(cpus) -> None:
    """In a worker: run only on `cpus` (one entry of worker_cpus)."""
    if cpus:
        os.sched_setaffinity(0, cpus)


def start_process(ctx, procs: list, target, name: str, args: tuple):
    """Start a daemon process (never outliving the cell) and add it to `procs`."""
    proc = ctx.Process(target=target, name=name, args=args, daemon=True)
    proc.start()
    procs.append(proc)
    return proc


def raise_if_exited(procs, what: str) -> None:
    """RuntimeError naming the first of `procs` that has exited ("<what> <rank> (pid P) exited with code C")."""
    for rank, proc in enumerate(procs):
        if not proc.is_alive():
            raise RuntimeError(f"{what} {rank} (pid {proc.pid}) exited with code {proc.exitcode}")


class MasterWatch:
    """Tells a worker that its master exited. Reparenting covers fork and spawn. With forkserver the
    parent is the server, which outlives the master while workers live, and a dead master may stay a
    zombie until whoever started it has read our inherited pipes to the end; so also look at the
    master's state, at most once per POLL_S."""

    def __init__(self, master_pid: int):
        self.master_pid, self.parent, self.next_look_ns = master_pid, os.getppid(), 0

    def gone(self) -> bool:
        if os.getppid() != self.parent:
            return True
        now = perf_counter_ns()
        if now < self.next_look_ns:
            return False
        self.next_look_ns = now + int(POLL_S * 1e9)
        import psutil
        try:
            return psutil.Process(self.master_pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    def alive(self) -> None:
        """For a worker's waits on what it shares with its master (`acquire`, `held`): end the worker once the
        master is gone."""
        if self.gone():
            raise SystemExit(0)


def acquire(sem, alive) -> float:
    """Block on `sem`; every POLL_S ask `alive()` (which raises if the peer died). Returns ns waited."""
    t0 = perf_counter_ns()
    while not sem.acquire(timeout=POLL_S):
        alive()
    return perf_counter_ns() - t0


@contextmanager
def held(lock, alive):
    """Hold a lock shared with other processes, asking `alive()` every POLL_S while waiting for it: a peer
    SIGKILLed while holding the lock never releases it, and a plain `with lock` would wait forever."""
    acquire(lock, alive)
    try:
        yield
    finally:
        lock.release()


def stop_processes(procs, grace_s: float = 5.0) -> None:
    """Give every process until the deadline to exit on its own, then kill what is left."""
    deadline = perf_counter_ns() + int(grace_s * 1e9)
    for proc in procs:
        proc.join(max(deadline - perf_counter_ns(), 0) / 1e9)
    for proc in procs:
        if proc.is_alive():
            proc.kill()
            proc.join()


class HelperProcesses:
    """spawn and forkserver start multiprocessing's resource tracker (and the fork server) on our
    behalf, and they outlive every worker. Those not running before open() are stopped again on
    close(), so a session leaves no process behind; the workers register nothing with them."""

    def __init__(self):
        from multiprocessing import forkserver, resource_tracker
        self._was_running = {
            resource_tracker._resource_tracker: resource_tracker._resource_tracker._fd is not None,
            forkserver._forkserver: forkserver._forkserver._forkserver_pid is not None,
        }

    def stop(self):
        for helper, was_running in self._was_running.items():
            if not was_running:
                try:
                    helper._stop()
                except Exception:  # private API: leaving one behind beats failing close()
                    pass


class WorkerSession:
    """A base for a session with worker processes: the end of its close(), once it has told them to stop. The
    order is the point: the workers go first, then what the session shares with them (`drop_shared`), then the
    helper processes it started. A named semaphore or queue (spawn, forkserver) unlinks itself through the
    resource tracker when its last reference goes, so it must go while the tracker still runs, and only when
    no worker can still be using it. `procs` (a list) and `helpers` (a HelperProcesses or None) are set first
    thing in __init__, so that a session that failed halfway through opening closes as well."""
    procs: list
    helpers: HelperProcesses | None

    def drop_shared(self) -> None:
        """Let go of what is shared with the workers and must not outlive the helpers (nothing by default)."""

    def end_workers(self, grace_s: float = 5.0) -> None:
        stop_processes(self.procs, grace_s)
        self.procs = []
        self.drop_shared()
        if self.helpers is not None:
            self.helpers.stop()
            self.helpers = None


# -- what a worker steps and acts with ---------------------------------------------------------------------

def spaces(workload):
    """The workload's observation and action spaces, from one env built and closed."""
    env = make_env(workload.env_id, **workload.env_kwargs)
    try:
        return env.observation_space, env.action_space
    finally:
        env.close()


class EnvSlice:
    """Envs lo..hi-1 of the batch, stepped in a loop with auto-reset (as in `serial`). `obs_now` is their
    rows of the observation batch: an array, or a dict of arrays for a Dict space (each env's observation
    written part by part)."""

    def __init__(self, workload, lo, hi, obs_now):
        from adapters._kit.batch import put
        self.envs = [make_env(workload.env_id, **workload.env_kwargs) for _ in range(lo, hi)]
        self.obs_now = obs_now
        self.write = put if isinstance(obs_now, (dict, tuple)) else None
        for j, env in enumerate(self.envs):
            obs = env.reset(seed=workload.seed + lo + j)[0]
            if self.write is None:
                obs_now[j] = obs
            else:
                self.write(obs_now, j, obs)

    def step(self, actions, rew_row, done_row):
        for j, env in enumerate(self.envs):
            obs, reward, terminated, truncated, _ = env.step(actions[j])
            done = terminated or truncated
            if done:
                obs, _ = env.reset()
            if self.write is None:
                self.obs_now[j] = obs
            else:
                self.write(self.obs_now, j, obs)
            rew_row[j], done_row[j] = reward, done

    def close(self):
        for env in self.envs:
            env.close()


def worker_policy(workload, rank, obs_space, act_space):
    """A worker's own copy of the agent: always on the CPU (rlpyt's CPU copy of a CUDA agent); a network
    has the master's weights (the same seed), a random policy its own stream per worker."""
    from adapters._kit.nets import policy_params
    policy = replace(workload.policy, device="cpu")
    seed = workload.seed if policy_params(policy, obs_space, act_space) else workload.seed + 1000 * (rank + 1)
    return make_policy(replace(workload, policy=policy, seed=seed), obs_space, act_space)
