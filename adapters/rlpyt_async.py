"""`rlpyt-async`: rlpyt's asynchronous sampling/optimisation (AsyncRl runner, async replay buffer).

Sampler processes write batch_T steps at a time into a shared-memory replay ring while this process trains on
it, both throttled to the target replay ratio and `max_lag`. One unit of work is one optimiser update; its env
steps are the transitions the samplers added meanwhile.

A Dict or Tuple observation (a screen beside game variables) is kept in the ring one array per part, each in its
own dtype (procs.obs_specs: a uint8 screen stays uint8), for `obs` and `next_obs` alike; the samplers' policy and
the optimiser read the parts as the network's one flat input (nets.net_input), a Box exactly as before.
"""
import os
import time
from time import perf_counter_ns

import numpy as np

from adapters._kit.a2c import ACT
from adapters._kit.batch import put
from adapters._kit.learner_nets import obs_reason
from adapters._kit.learner_stats import lag_stats
from adapters._kit.nets import map_obs, net_input, obs_leaves, policy_params
from adapters._kit.procs import (
    ENV_NS,
    INFER_NS,
    LEARN_NS,
    STAT_COLUMNS,
    SYNC_NS,
    WAIT_NS,
    WORKER_OPTIONS,
    EnvSlice,
    MasterWatch,
    ParamStore,
    SharedArrays,
    Window,
    held,
    obs_arrays,
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
from rlbench.api import Adapter, Option, Unsupported, Workload, make_policy, register

ADDED, CONSUMED, STOP = range(3)
IDLE_S = 50e-6  # sleep while throttled; short against any batch


OBS_KEYS = ("obs", "next_obs")   # the ring's observations: an array, or one per part of a Dict or Tuple


def ring_specs(capacity, workers, obs_space, act_space, max_lag) -> dict:
    return {
        **obs_specs("obs", obs_space, (capacity,)), **obs_specs("next_obs", obs_space, (capacity,)),
        "act": ((capacity, *act_space.shape), act_space.dtype), "rew": ((capacity,), np.float32),
        "done": ((capacity,), np.bool_), "ctrl": ((3,), np.int64), "acting": ((workers,), np.int64),
        "lag_hist": ((workers, max_lag + 2), np.int64), "stats": ((workers + 1, STAT_COLUMNS), np.float64),
    }


def ring_batches(views: dict, obs_space) -> dict:
    """The ring's fields from SharedArrays.views(): `obs` and `next_obs` in the space's structure (procs.obs_batch),
    the others as they are."""
    return {k: obs_batch(v, obs_space) if k in OBS_KEYS else v for k, v in views.items()}


def sampler_main(rank, workload_dict, lo, hi, opts, shared, lock, params, cpus, master_pid, obs_space):
    pin(cpus)
    master = MasterWatch(master_pid)
    workload = Workload.from_dict(workload_dict)
    ring = ring_batches(shared.views(), obs_space)
    ctrl, stats, hist = ring["ctrl"], ring["stats"][rank + 1], ring["lag_hist"][rank]
    T, n, capacity = opts["batch_T"], hi - lo, ring["rew"].shape[0]
    # how far samplers may run ahead: enough that the optimiser can always start
    M, N = opts["minibatch"], workload.num_envs
    slack = max(2 * T * N, M + T * N, M / opts["replay_ratio"] + T * N)
    obs_now = obs_arrays(obs_space, (n,), np.empty)
    envs = EnvSlice(workload, lo, hi, obs_now)
    policy = worker_policy(workload, rank, obs_space, envs.envs[0].action_space)
    params.attach()
    local = {k: map_obs(lambda a: np.empty((T, n, *a.shape[1:]), a.dtype), ring[k])
             for k in ("obs", "next_obs", "act", "rew", "done")}
    try:
        while True:
            t0 = perf_counter_ns()
            while True:  # keep the newest parameters while throttled, so the optimiser's lag bound holds
                if ctrl[STOP] or master.gone():
                    return
                version = params.load(policy.net, master.alive)
                ring["acting"][rank] = version
                if ctrl[ADDED] - ctrl[CONSUMED] / opts["replay_ratio"] < slack:
                    break
                time.sleep(IDLE_S)
            stats[WAIT_NS] += perf_counter_ns() - t0
            for t in range(T):
                put(local["obs"], t, obs_now)
                t1 = perf_counter_ns()
                actions = policy(obs_now)
                t2 = perf_counter_ns()
                local["act"][t] = actions
                envs.step(actions, local["rew"][t], local["done"][t])
                put(local["next_obs"], t, obs_now)  # after an auto-reset the new episode's: `done` masks it
                stats[INFER_NS] += t2 - t1
                stats[ENV_NS] += perf_counter_ns() - t2
            t3 = perf_counter_ns()
            with held(lock, master.alive):
                at = (ctrl[ADDED] + np.arange(T * n)) % capacity
                for k, v in local.items():
                    for dst, src in zip(obs_leaves(ring[k]), obs_leaves(v)):   # an array, or every part
                        dst[at] = src.reshape(T * n, *src.shape[2:])
                ctrl[ADDED] += T * n
                lag = params.version - version
            hist[min(lag, hist.size - 1)] += 1
            stats[SYNC_NS] += perf_counter_ns() - t3
    finally:
        envs.close()


class AsyncSession:
    def __init__(self, workload, options):
        import multiprocessing as mp
        self.workload, self.opts = workload, options
        self.procs = []
        workers = options["workers"]
        obs_space, act_space = spaces(workload)
        if not hasattr(act_space, "n"):
            raise Unsupported("rlpyt-async trains a DQN-style learner: discrete action spaces only")
        ctx = mp.get_context(options["context"])
        self.shared = SharedArrays(ctx, ring_specs(options["capacity"], workers, obs_space, act_space,
                                                   options["max_lag"]))
        self.ring = ring_batches(self.shared.views(), obs_space)
        self.ctrl = self.ring["ctrl"]
        self.lock = ctx.Lock()
        self.params = ParamStore(ctx, policy_params(workload.policy, obs_space, act_space))
        self.params.attach()
        self.window = Window(self.ring["stats"])
        self.metrics = self
        self.info = {"workers": workers, "batch_size": options["minibatch"]}
        self.rng = np.random.default_rng(workload.seed)
        self.updates = 0
        self.last_added = 0
        try:
            per = workload.num_envs // workers
            for rank, cpus in enumerate(worker_cpus(options["worker_affinity"], workers)):
                start_process(ctx, self.procs, sampler_main, f"rlpyt-sampler-{rank}",
                              (rank, workload.to_dict(), rank * per, (rank + 1) * per, dict(options), self.shared,
                               self.lock, self.params, cpus, os.getpid(), obs_space))
            self._build_learner(obs_space, act_space)  # torch only after the fork
        except BaseException:
            self.close()
            raise

    def _build_learner(self, obs_space, act_space):
        import torch
        self.torch = torch
        self.net = make_policy(self.workload, obs_space, act_space).net
        self.device = next(self.net.parameters()).device
        self.net.train()
        self.optim = torch.optim.Adam(self.net.parameters(), lr=self.opts["lr"])
        self.params.publish(self.net, self._workers_alive)

    def _workers_alive(self):
        raise_if_exited(self.procs, "sampler")

    def _wait_until(self, ready):
        t0 = perf_counter_ns()
        last_check = t0
        while not ready():
            time.sleep(IDLE_S)
            now = perf_counter_ns()
            if now - last_check > 1e9:
                self._workers_alive()
                last_check = now
        self.ring["stats"][0, WAIT_NS] += perf_counter_ns() - t0

    def step(self) -> int:
        o, M = self.opts, self.opts["minibatch"]
        ctrl, stats = self.ctrl, self.ring["stats"][0]
        self._wait_until(lambda: ctrl[ADDED] >= M and ctrl[CONSUMED] + M <= o["replay_ratio"] * ctrl[ADDED])
        self._wait_until(lambda: self.params.version - self.ring["acting"].min() < o["max_lag"])
        t0 = perf_counter_ns()
        with held(self.lock, self._workers_alive):
            idx = self.rng.integers(0, min(int(ctrl[ADDED]), o["capacity"]), size=M)
            batch = {k: map_obs(lambda a: self.torch.as_tensor(a[idx]).to(self.device), self.ring[k])
                     for k in ("obs", "next_obs", "act", "rew", "done")}
        t1 = perf_counter_ns()
        self._learn(batch)
        t2 = perf_counter_ns()
        self.params.publish(self.net, self._workers_alive)
        ctrl[CONSUMED] += M
        self.updates += 1
        stats[LEARN_NS] += t2 - t1
        stats[SYNC_NS] += perf_counter_ns() - t2 + (t1 - t0)
        added = int(ctrl[ADDED])
        made, self.last_added = added - self.last_added, added
        return made

    def _learn(self, b):
        torch, net, M = self.torch, self.net, self.opts["minibatch"]
        obs, next_obs = (net_input(b[k], lambda a: a.float().reshape(M, -1)) for k in OBS_KEYS)
        q = net(obs).gather(1, b["act"].long().reshape(M, 1)).squeeze(1)
        with torch.no_grad():
            target = b["rew"] + 0.99 * (~b["done"]).float() * net(next_obs).max(1).values
        loss = torch.nn.functional.smooth_l1_loss(q, target)
        self.optim.zero_grad()
        loss.backward()
        self.optim.step()

    # -- metrics over the timed window ------------------------------------------------------------------
    def reset(self):
        self.window.reset()
        self.mark = (self.updates, int(self.ctrl[ADDED]), int(self.ctrl[CONSUMED]), self.ring["lag_hist"].sum(0))

    def read(self, seconds):
        updates, added, consumed, hist0 = self.mark
        d = self.window.delta() / (seconds * 1e9)
        hist = self.ring["lag_hist"].sum(0) - hist0
        added = int(self.ctrl[ADDED]) - added
        return {"updates_per_s": (self.updates - updates) / seconds,
                "replay_ratio": (int(self.ctrl[CONSUMED]) - consumed) / added if added else float("nan"),
                **lag_stats(hist),
                "env_frac": float(d[1:, ENV_NS].mean()), "inference_frac": float(d[1:, INFER_NS].mean()),
                "learn_frac": float(d[0, LEARN_NS]), "wait_frac": float(d[0, WAIT_NS]),
                "sync_frac": float(d[0, SYNC_NS])}

    def lag_histogram(self) -> np.ndarray:
        """Batches written per policy lag (versions between acting and writing), all samplers, all time;
        the last bin counts anything beyond max_lag (never, by construction)."""
        return self.ring["lag_hist"].sum(0).copy()

    def close(self):
        self.ring["ctrl"][STOP] = 1
        stop_processes(self.procs)
        self.procs = []


@register
class RlpytAsync(Adapter):
    name = "rlpyt-async"
    kind = "runner"
    description = "rlpyt AsyncRl: samplers fill a shared replay ring while a DQN-style optimiser trains"
    requires = ("gymnasium", "torch")
    options = (
        Option("batch_T", int, 16, "time steps each sampler collects between parameter syncs", low=1),
        Option("replay_ratio", float, 4.0, "target transitions consumed by updates per transition added",
               low=0, open_low=True),
        Option("minibatch", int, 64, "transitions per optimiser update", low=1),
        Option("capacity", int, 65536, "replay ring size in transitions", low=1),
        Option("max_lag", int, 4, "most parameter versions a sampler may act behind the optimiser", low=1),
        Option("lr", float, 1e-3, "Adam learning rate", low=0, open_low=True),
    ) + WORKER_OPTIONS

    def supports(self, workload, options):
        if workload.policy.name != "mlp":
            return f"rlpyt-async trains the policy: needs policy mlp (got {workload.policy.name})"
        workers = options["workers"]
        if workers < 1 or workload.num_envs % workers:
            return f"num_envs={workload.num_envs} must be a positive multiple of workers={workers}"
        if options["capacity"] < options["minibatch"]:
            return f"capacity={options['capacity']} must hold one minibatch ({options['minibatch']})"
        return obs_reason(self.name, workload, ACT)

    def open(self, workload, options):
        return AsyncSession(workload, options)
