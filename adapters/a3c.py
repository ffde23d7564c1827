"""`a3c`: asynchronous advantage actor-critic (Mnih et al. 2016, arXiv 1602.01783), as pytorch-a3c runs it.

`workers` processes apply A2C gradients to the shared parameters with a shared Adam, lock-free (Hogwild); the
cell process only observes and never imports torch. One unit waits for `updates_per_unit` more updates and
returns the transitions they consumed. How it is built: docs/strategies/learners.md.

A Dict or Tuple observation (a screen beside game variables) is shared as one array per part, each in its own
dtype (procs.obs_specs: a uint8 screen stays uint8); a worker copies each part into its columns of the network's
flat float input (nets.obs_columns), converting as it copies, as it copies a Box's one array.
"""
import math
import os
import time
from time import perf_counter_ns

import numpy as np

from adapters._kit.a2c import a2c_loss, learner_options, learner_supports, sample_actions
from adapters._kit.batch import take
from adapters._kit.learner_nets import learner_reason
from adapters._kit.learner_stats import RETURN_WINDOW, Episodes, lag_stats, return_mean, trimmed
from adapters._kit.nets import actor_critic, actor_critic_params, obs_columns, obs_size, space_scale, torso_of
from adapters._kit.procs import (
    ENV_NS,
    INFER_NS,
    LEARN_NS,
    POLL_S,
    STAT_COLUMNS,
    SYNC_NS,
    WAIT_NS,
    WORKER_OPTIONS,
    EnvSlice,
    HelperProcesses,
    MasterWatch,
    SharedArrays,
    Window,
    WorkerSession,
    obs_batch,
    obs_specs,
    pin,
    raise_if_exited,
    spaces,
    start_process,
    worker_cpus,
)
from rlbench.api import Adapter, Option, Unsupported, Workload, register

INIT, GO, STOP = range(3)  # ctrl words: worker 0 wrote the initial parameters; start; stop
LAG_BINS = 64              # the last bin counts lags >= LAG_BINS - 1
BETAS, EPS = (0.9, 0.999), 1e-8
READY_TIMEOUT_S = 120.0


def shared_adam(p, m, v, g, step: int, lr: float):
    """Adam on shared flat tensors, in place and lock-free (pytorch-a3c's SharedAdam); `step` is the
    shared version this update makes, for the bias correction."""
    b1, b2 = BETAS
    m.mul_(b1).add_(g, alpha=1 - b1)
    v.mul_(b2).addcmul_(g, g, value=1 - b2)
    denom = (v.sqrt() / math.sqrt(1 - b2 ** step)).add_(EPS)
    p.addcdiv_(m, denom, value=-lr / (1 - b1 ** step))


def worker_main(rank, workload_dict, lo, hi, opts, shared, tick, lock, cpus, master_pid, obs_space):
    pin(cpus)
    master = MasterWatch(master_pid)
    workload = Workload.from_dict(workload_dict)
    buf = shared.views()
    ctrl, stats, hist = buf["ctrl"], buf["stats"][rank], buf["lag_hist"][rank]
    updates, acted = buf["updates"], buf["acted"]
    envs = EnvSlice(workload, lo, hi, take(obs_batch(buf["obs_now"], obs_space), slice(lo, hi)))
    try:
        import torch
        torch.set_num_threads(workload.policy.threads)
        act_space = envs.envs[0].action_space
        n, T, size, scale = hi - lo, opts["batch_T"], obs_size(obs_space), space_scale(obs_space)
        start, lr, clip = int(getattr(act_space, "start", 0)), opts["lr"], opts["max_grad_norm"]
        torch.manual_seed(workload.seed)  # every worker builds the same network; worker 0's values are shared
        net = actor_critic(torso_of(workload.policy, obs_space), int(act_space.n))
        params = list(net.parameters())
        local = torch.cat([p.detach().reshape(-1) for p in params])  # the local copy, one flat tensor
        shared_p, shared_m, shared_v = (torch.from_numpy(buf[k]) for k in ("params", "m", "v"))
        assert local.numel() == shared_p.numel(), (local.numel(), shared_p.numel())
        offset = 0
        for p in params:  # the module's parameters become views of the flat copy
            p.data = local[offset:offset + p.numel()].view_as(p)
            offset += p.numel()
        if rank == 0:
            shared_p.copy_(local)
            ctrl[INIT] = 1
        buf["ready"][rank] = 1
        while not ctrl[GO]:
            if ctrl[STOP] or master.gone():
                return
            time.sleep(0.001)
        gen = torch.Generator()
        gen.manual_seed(workload.seed * 1000 + rank + 1)
        episodes = Episodes(n, buf["returns"][rank], buf["episodes"][rank:rank + 1])
        # (columns of the flat input, the shared memory itself) per part: a Box has one, all the columns
        obs_host = [(cols, torch.from_numpy(a).reshape(n, -1)) for cols, a in obs_columns(envs.obs_now, obs_space)]
        obs = torch.zeros((T + 1, n, size), dtype=torch.float32)
        act = torch.zeros((T, n), dtype=torch.int64)
        rew, done = np.zeros((T, n), np.float32), np.zeros((T, n), np.bool_)

        def observe(t):
            x = obs[t]
            for cols, host in obs_host:
                x[:, cols].copy_(host)   # converts to float32 as it copies
            return x.mul_(scale) if scale != 1.0 else x

        while not (ctrl[STOP] or master.gone()):
            t0 = perf_counter_ns()
            v0 = int(updates.sum())
            local.copy_(shared_p)  # pull (Hogwild: may see an apply half done)
            stats[SYNC_NS] += perf_counter_ns() - t0
            for t in range(T):
                t1 = perf_counter_ns()
                with torch.no_grad():
                    logits, _ = net(observe(t))
                    act[t] = sample_actions(torch, logits, gen)
                actions = act[t].numpy() + start
                t2 = perf_counter_ns()
                envs.step(actions, rew[t], done[t])
                stats[INFER_NS] += t2 - t1
                stats[ENV_NS] += perf_counter_ns() - t2
            observe(T)
            acted[rank] += T * n
            t3 = perf_counter_ns()
            logits, values = net(obs.reshape((T + 1) * n, size))
            values = values.reshape(T + 1, n)
            loss = a2c_loss(torch, logits[:T * n].reshape(T, n, -1), values[:T], values[T].detach(), act,
                            torch.from_numpy(rew), torch.from_numpy(done).float())
            for p in params:
                p.grad = None
            loss.backward()
            grad = torch.cat([p.grad.reshape(-1) for p in params])
            if clip > 0:
                norm = float(grad.norm())
                if norm > clip:
                    grad.mul_(clip / norm)
            waited = 0
            if lock is not None:
                t4 = perf_counter_ns()
                while not lock.acquire(timeout=POLL_S):
                    if ctrl[STOP] or master.gone():
                        return
                waited = perf_counter_ns() - t4
            try:
                v1 = int(updates.sum())
                shared_adam(shared_p, shared_m, shared_v, grad, v1 + 1, lr)
                updates[rank] += 1
            finally:
                if lock is not None:
                    lock.release()
            hist[min(v1 - v0, LAG_BINS - 1)] += 1
            stats[WAIT_NS] += waited
            stats[LEARN_NS] += perf_counter_ns() - t3 - waited
            episodes.add(rew, done)
            tick.release()
    finally:
        envs.close()


class A3CSession(WorkerSession):
    def __init__(self, workload, options):
        import multiprocessing as mp
        self.workload, self.opts = workload, options
        self.procs, self.helpers, self.tick = [], None, None
        workers, T = options["workers"], options["batch_T"]
        if workload.policy.device != "cpu":
            raise Unsupported("a3c's workers compute gradients on the CPU: needs policy device cpu")
        obs_space, act_space = spaces(workload)
        if not hasattr(act_space, "n"):
            raise Unsupported("a3c samples a categorical policy: needs a Discrete action space")
        ctx = mp.get_context(options["context"])
        if options["context"] != "fork":
            self.helpers = HelperProcesses()
        count = actor_critic_params(torso_of(workload.policy, obs_space), int(act_space.n))
        B, ring = workload.num_envs, -(-RETURN_WINDOW // workers)
        self.shared = SharedArrays(ctx, {
            "params": ((count,), np.float32), "m": ((count,), np.float32), "v": ((count,), np.float32),
            **obs_specs("obs_now", obs_space, (B,)),
            "updates": ((workers,), np.int64), "acted": ((workers,), np.int64),
            "ready": ((workers,), np.int64), "ctrl": ((3,), np.int64), "stats": ((workers, STAT_COLUMNS), np.float64),
            "lag_hist": ((workers, LAG_BINS), np.int64),
            "returns": ((workers, ring), np.float64), "episodes": ((workers,), np.int64)})
        self.buf = self.shared.views()
        self.window = Window(self.buf["stats"])
        self.per_update = T * (B // workers)
        self.seen = 0
        self.metrics = self
        self.info = {"workers": workers, "batch_size": self.per_update}
        self.tick = ctx.Semaphore(0)
        lock = ctx.Lock() if options["lock"] else None
        try:
            per = B // workers
            for rank, cpus in enumerate(worker_cpus(options["worker_affinity"], workers)):
                start_process(ctx, self.procs, worker_main, f"a3c-worker-{rank}",
                              (rank, workload.to_dict(), rank * per, (rank + 1) * per, dict(options), self.shared,
                               self.tick, lock, cpus, os.getpid(), obs_space))
            deadline = time.monotonic() + READY_TIMEOUT_S
            while not (self.buf["ready"].all() and self.buf["ctrl"][INIT]):
                self._workers_alive()
                if time.monotonic() > deadline:
                    raise RuntimeError(f"a3c workers not ready within {READY_TIMEOUT_S:g} s")
                time.sleep(0.005)
            self.buf["ctrl"][GO] = 1
        except BaseException:
            self.close()
            raise

    def _workers_alive(self):
        raise_if_exited(self.procs, "a3c worker")

    @property
    def version(self) -> int:
        """Updates applied to the shared parameters so far (all workers)."""
        return int(self.buf["updates"].sum())

    def step(self) -> int:
        target = self.seen + self.opts["updates_per_unit"]
        while True:
            self._workers_alive()
            total = self.version
            if total >= target:
                break
            self.tick.acquire(timeout=POLL_S)  # released once per update; may hold a backlog
        made, self.seen = (total - self.seen) * self.per_update, total
        return made

    def shared_params(self) -> np.ndarray:
        return self.buf["params"].copy()

    # -- metrics over the timed window ------------------------------------------------------------------
    def _snapshot(self):
        """(updates so far, lag histogram) read together: re-read until no update landed between the two reads,
        so the histogram counts the same updates as the total (give or take the one in flight per worker)."""
        for _ in range(100):
            version = self.version
            hist = self.buf["lag_hist"].sum(0)
            if self.version == version:
                break
        return version, hist

    def reset(self):
        self.window.reset()
        version, hist = self._snapshot()
        self.mark = (version, int(self.buf["acted"].sum()), hist)

    def read(self, seconds):
        b = self.buf
        updates, acted, hist0 = self.mark
        d = self.window.delta() / (seconds * 1e9)
        version, hist = self._snapshot()
        hist = hist - hist0
        self.info["policy_lag_hist"] = trimmed(hist)
        made = version - updates  # one read: every update consumes per_update transitions
        return {"updates_per_s": made / seconds, "samples_per_s": made * self.per_update / seconds,
                "actor_steps_per_s": (int(b["acted"].sum()) - acted) / seconds,
                **lag_stats(hist),
                "env_frac": float(d[:, ENV_NS].mean()), "inference_frac": float(d[:, INFER_NS].mean()),
                "learn_frac": float(d[:, LEARN_NS].mean()), "sync_frac": float(d[:, SYNC_NS].mean()),
                "wait_frac": float(d[:, WAIT_NS].mean()), "return_mean": self.return_mean()}

    def return_mean(self) -> float:
        """Mean return of about the last RETURN_WINDOW finished episodes (the last RETURN_WINDOW / workers
        of each worker); nan before the first."""
        return return_mean(self.buf["returns"], self.buf["episodes"])

    def drop_shared(self):
        self.tick = None

    def close(self):
        self.buf["ctrl"][STOP] = 1
        self.end_workers()


@register
class A3C(Adapter):
    name = "a3c"
    kind = "learner"
    description = ("A3C: worker processes compute A2C gradients on local copies and apply them lock-free "
                   "(Hogwild) to shared parameters with a shared Adam")
    requires = ("gymnasium", "torch")
    options = learner_options(batch_T=16, lr=2e-3) + (
        Option("updates_per_unit", int, 4, "shared updates (all workers) one unit waits for", low=1),
        Option("lock", bool, False, "serialise applying gradients with a lock (default: lock-free, Hogwild)"),
    ) + WORKER_OPTIONS

    def supports(self, workload, options):
        return learner_reason(self.name, workload, lambda w: self._checks(w, options))

    def _checks(self, workload, options):
        if workload.policy.device != "cpu":
            return "a3c's workers compute gradients on the CPU: needs policy device cpu"
        return learner_supports(self.name, workload, options)

    def open(self, workload, options):
        return A3CSession(workload, options)
