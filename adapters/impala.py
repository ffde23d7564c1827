"""`impala`: IMPALA's actor-learner architecture (Espeholt et al. 2018), with V-trace.

Actor processes hand fixed-length trajectories to the learner (the cell process) through shared-memory slots
and a bounded queue; `lag=one` is Cleanba's variant (a policy lag of exactly one). One unit is one learner
update; its env steps are the transitions it consumed. How it is built: docs/strategies/learners.md.

With `--policy lstm` the actor-critic is recurrent (the IMPALA paper's LSTM agent): each actor carries its envs'
LSTM state across trajectories (zeroed where an episode starts) and stores with each trajectory the state at its
start and the episode-start flags; the learner re-unrolls the trajectory from that state.

A Dict or Tuple observation (a screen beside game variables) travels as one shared array per part, each in its
own dtype (procs.obs_specs); actor and learner hand the network the parts as its one flat float input
(nets.net_input), a Box exactly as before.
"""
import math
import os
import queue
import time
from time import perf_counter, perf_counter_ns

import numpy as np

from adapters._kit.a2c import ACT
from adapters._kit.batch import put
from adapters._kit.learner_nets import learner_reason, obs_reason
from adapters._kit.learner_stats import Episodes, TargetRun, lag_stats, return_mean
from adapters._kit.nets import (
    actor_critic,
    actor_critic_params,
    map_obs,
    net_input,
    obs_leaves,
    obs_scale,
    recurrent_actor_critic,
    recurrent_actor_critic_params,
    torso_of,
)
from adapters._kit.ppo import default_target
from adapters._kit.procs import (
    CONTEXT_OPTION,
    ENV_NS,
    INFER_NS,
    LEARN_NS,
    STAT_COLUMNS,
    SYNC_NS,
    WAIT_NS,
    EnvSlice,
    MasterWatch,
    SharedArrays,
    Window,
    held,
    obs_batch,
    obs_specs,
    pin,
    raise_if_exited,
    spaces,
    start_process,
    stop_processes,
    worker_cpus,
)
from rlbench.api import Adapter, Option, Unsupported, Workload, register

GAMMA, VALUE_COEF, ENTROPY_COEF, GRAD_CLIP = 0.99, 0.5, 0.01, 40.0
XFER_NS = 7          # stats column: copying trajectories out of shared memory (and to the device)
RETURNS = 100        # finished-episode returns kept per actor
POLL_S = 0.2         # how often a blocked side checks that its peers are alive
PARAM_POLL_S = 2e-4  # how often an actor looks for the parameter version it waits for


def vtrace(behaviour_logp, target_logp, rewards, discounts, values, bootstrap, rho_bar=1.0, c_bar=1.0,
           pg_rho_bar=1.0):
    """V-trace targets and policy-gradient advantages (IMPALA eq. 1 and 4), all [T, N] torch tensors but
    `bootstrap` [N]; discounts are gamma x (1 - done). No gradient flows through the result."""
    import torch
    with torch.no_grad():
        rhos = torch.exp(target_logp - behaviour_logp)
        clipped = torch.clamp(rhos, max=rho_bar)
        cs = torch.clamp(rhos, max=c_bar)
        next_values = torch.cat([values[1:], bootstrap[None]])
        deltas = clipped * (rewards + discounts * next_values - values)
        acc = torch.zeros_like(bootstrap)
        vs_minus_v = torch.empty_like(values)
        for t in reversed(range(len(values))):
            acc = deltas[t] + discounts[t] * cs[t] * acc
            vs_minus_v[t] = acc
        vs = vs_minus_v + values
        next_vs = torch.cat([vs[1:], bootstrap[None]])
        advantages = torch.clamp(rhos, max=pg_rho_bar) * (rewards + discounts * next_vs - values)
    return vs, advantages


class VersionedParams:
    """The learner's parameters in shared memory, in two slots: version v lives in slot v % 2, so an actor
    may load the newest or wait for one exact version (the one before the newest stays readable)."""

    def __init__(self, ctx, count: int):
        self.shared = SharedArrays(ctx, {"p": ((2, count), np.float32), "v": ((2,), np.int64),
                                         "latest": ((1,), np.int64)})
        self.lock = ctx.Lock()
        self.shared.views()["v"][:] = -1  # no version published yet

    def attach(self):
        self.views = self.shared.views()

    @property
    def latest(self) -> int:
        return int(self.views["latest"][0])

    def publish(self, net, version: int, alive) -> None:
        import torch
        flat = torch.nn.utils.parameters_to_vector(net.parameters()).detach().cpu().numpy()
        with held(self.lock, alive):
            self.views["p"][version % 2] = flat
            self.views["v"][version % 2] = version
            self.views["latest"][0] = version

    def load(self, net, version: int, alive) -> bool:
        """Copy `version` into net; False if that slot does not hold it (yet)."""
        import torch
        with held(self.lock, alive):
            if self.views["v"][version % 2] != version:
                return False
            flat = self.views["p"][version % 2].copy()
        torch.nn.utils.vector_to_parameters(torch.from_numpy(flat), net.parameters())
        return True


def trajectory_specs(slots, unroll, n, obs_space, workers, units: int = 0) -> dict:
    """The shared trajectory slots and counters (the observations an array, or one per part of a Dict or Tuple:
    procs.obs_specs); `units` > 0 (a recurrent policy) adds per slot the episode-start flags of every observation
    and the LSTM state (h, c) each env entered the trajectory with."""
    specs = {
        **obs_specs("obs", obs_space, (slots, unroll + 1, n)),
        "act": ((slots, unroll, n), np.int64), "rew": ((slots, unroll, n), np.float32),
        "done": ((slots, unroll, n), np.bool_), "logp": ((slots, unroll, n), np.float32),
        "version": ((slots,), np.int64), "rollout": ((slots,), np.int64),
        "stats": ((workers + 1, STAT_COLUMNS), np.float64), "steps": ((workers,), np.int64),
        "returns": ((workers, RETURNS), np.float32), "episodes": ((workers,), np.int64),
        "stop": ((1,), np.int64),
    }
    if units:
        specs.update({"first": ((slots, unroll + 1, n), np.bool_), "h": ((slots, n, units), np.float32),
                      "c": ((slots, n, units), np.float32)})
    return specs


def actor_main(rank, workload_dict, lo, hi, opts, shared, params, free_q, full_q, cpus, master_pid, obs_space):
    import torch
    pin(cpus)
    torch.set_num_threads(1)
    master = MasterWatch(master_pid)
    workload = Workload.from_dict(workload_dict)
    buf = shared.views()
    params.attach()
    stats, stop = buf["stats"][rank + 1], buf["stop"]
    obs = obs_batch(buf["obs"], obs_space)
    obs_now = map_obs(lambda a: np.empty(a.shape[2:], a.dtype), obs)
    envs = EnvSlice(workload, lo, hi, obs_now)
    space = envs.envs[0].action_space
    torso = torso_of(workload.policy, obs_space)
    net = (recurrent_actor_critic if torso.lstm else actor_critic)(torso, int(space.n))
    if torso.lstm:  # the state carried across trajectories; every env starts an episode
        state, first = net.initial_state(hi - lo), np.ones(hi - lo, dtype=np.bool_)
    gen = torch.Generator().manual_seed(workload.seed + 1000 * (rank + 1))
    scale = obs_scale(obs_space.dtype)   # a Dict's or Tuple's images are scaled in the torso

    def rows(a):   # the network's float rows of one array of obs_now
        return torch.as_tensor(a).reshape(len(a), -1).float()

    episodes = Episodes(hi - lo, buf["returns"][rank], buf["episodes"][rank:rank + 1])
    T, rollout = opts["unroll"], 0
    try:
        while not stop[0]:
            t0 = perf_counter_ns()
            slot = _get(free_q, lambda: stop[0] or master.gone())
            if slot is None:
                return
            want = max(rollout - 1, 0) if opts["lag"] == "one" else None
            while True:  # the newest parameters, or (lag=one) exactly those of update rollout-1
                version = params.latest if want is None else want
                if params.load(net, version, master.alive):
                    break
                if stop[0] or master.gone():
                    return
                time.sleep(PARAM_POLL_S)
            stats[WAIT_NS] += perf_counter_ns() - t0
            if torso.lstm:  # the state this trajectory starts from (before any reset at its first step)
                buf["h"][slot], buf["c"][slot] = state[0].numpy(), state[1].numpy()
            for t in range(T):
                put(obs, (slot, t), obs_now)
                t1 = perf_counter_ns()
                with torch.no_grad():
                    x = net_input(obs_now, rows, scale)
                    if torso.lstm:
                        buf["first"][slot, t] = first
                        logits, _, state = net.step(x, torch.from_numpy(first), state)
                    else:
                        logits, _ = net(x)
                    logp_all = torch.log_softmax(logits, -1)
                    actions = torch.multinomial(logp_all.exp(), 1, generator=gen).squeeze(1)
                    buf["logp"][slot, t] = logp_all.gather(1, actions[:, None]).squeeze(1).numpy()
                actions = actions.numpy()
                t2 = perf_counter_ns()
                buf["act"][slot, t] = actions
                envs.step(actions, buf["rew"][slot, t], buf["done"][slot, t])
                episodes.add(buf["rew"][slot, t], buf["done"][slot, t])
                if torso.lstm:
                    first = buf["done"][slot, t].copy()  # an env that finished is reset: its next step starts one
                stats[INFER_NS] += t2 - t1
                stats[ENV_NS] += perf_counter_ns() - t2
            put(obs, (slot, T), obs_now)
            if torso.lstm:
                buf["first"][slot, T] = first
            buf["version"][slot], buf["rollout"][slot] = version, rollout
            buf["steps"][rank] += T * (hi - lo)
            full_q.put((slot, rank))
            rollout += 1
    finally:
        envs.close()


def _get(q, give_up):
    """q.get(), checking give_up() every POLL_S; None once it says so."""
    while True:
        try:
            return q.get(timeout=POLL_S)
        except queue.Empty:
            if give_up():
                return None


class ImpalaSession(TargetRun):
    def __init__(self, workload, options):
        import multiprocessing as mp
        self.workload, self.opts = workload, options
        self.procs, self.queues = [], []
        workers, T = options["workers"], options["unroll"]
        obs_space, act_space = spaces(workload)
        if not hasattr(act_space, "n"):
            raise Unsupported("impala trains a softmax policy: discrete action spaces only")
        n = workload.num_envs // workers
        self.batch = workers if options["lag"] == "one" else options["batch"]
        slots = max(options["queue"], self.batch) + workers
        ctx = mp.get_context(options["context"])
        torso = torso_of(workload.policy, obs_space)
        self.recurrent = bool(torso.lstm)
        self.shared = SharedArrays(ctx, trajectory_specs(slots, T, n, obs_space, workers, torso.lstm))
        self.buf = self.shared.views()
        self.obs = obs_batch(self.buf["obs"], obs_space)
        self.scale = obs_scale(obs_space.dtype)   # a Dict's or Tuple's images are scaled in the torso
        count = (recurrent_actor_critic_params if self.recurrent else actor_critic_params)(torso, int(act_space.n))
        self.params = VersionedParams(ctx, count)
        self.params.attach()
        self.free_q, self.full_q = ctx.Queue(), ctx.Queue()
        self.queues = [self.free_q, self.full_q]
        for s in range(slots):  # every actor fills one while `queue` (or a batch) wait; then actors block
            self.free_q.put(s)
        self.window = Window(self.buf["stats"])
        self.metrics = self
        self.info = {"workers": workers, "batch_size": self.batch * T * n}
        self.updates = self.version = self.consumed = 0
        self.target = options["target_return"] or default_target(workload.env_id)
        self.t_start = None
        self.pending = {}
        self.lag_hist = np.zeros(2, dtype=np.int64)
        try:
            for rank, cpus in enumerate(worker_cpus(options["worker_affinity"], workers)):
                start_process(ctx, self.procs, actor_main, f"impala-actor-{rank}",
                              (rank, workload.to_dict(), rank * n, (rank + 1) * n, dict(options), self.shared,
                               self.params, self.free_q, self.full_q, cpus, os.getpid(), obs_space))
            self._build_learner(torso, int(act_space.n))  # torch only after the fork
        except BaseException:
            self.close()
            raise

    def _build_learner(self, torso, n_actions):
        import torch
        self.torch = torch
        spec = self.workload.policy
        torch.manual_seed(self.workload.seed)
        self.device = torch.device(spec.device)
        if spec.device.startswith("cuda") and not torch.cuda.is_available():
            raise Unsupported("no CUDA device: policy device=cuda, and torch sees none")
        self.net = (recurrent_actor_critic if self.recurrent else actor_critic)(torso, n_actions).to(self.device)
        self.optim = torch.optim.Adam(self.net.parameters(), lr=self.opts["lr"])
        self.h2d_bytes = 0
        self.params.publish(self.net, 0, self._actors_alive)

    def _actors_alive(self):
        raise_if_exited(self.procs, "impala actor")
        return False

    def _next_batch(self) -> list:
        """`batch` full slots (lag=one: rollout `updates` of every actor), oldest first."""
        want = self.updates if self.opts["lag"] == "one" else None
        chosen = []
        while len(chosen) < self.batch:
            ready = [k for k in self.pending if want is None or k[1] == want]
            if ready:
                chosen.append(self.pending.pop(ready[0]))
                continue
            slot, rank = _get(self.full_q, self._actors_alive)
            self.pending[(rank, int(self.buf["rollout"][slot]))] = slot
        return chosen

    def step(self) -> int:
        if self.t_start is None:
            self.t_start = perf_counter()
        made = self._update()
        self.consumed += made
        self.progress(return_mean(self.buf["returns"], self.buf["episodes"]), self.consumed)
        return made

    def _update(self) -> int:
        """One learner update on the next batch; the env steps it consumed."""
        torch, buf, stats = self.torch, self.buf, self.buf["stats"][0]
        self._actors_alive()  # the others may keep the queue full: a dead actor must not go unnoticed
        t0 = perf_counter_ns()
        slots = self._next_batch()
        t1 = perf_counter_ns()
        idx = np.array(slots)
        B, T1, n = len(slots), buf["act"].shape[1] + 1, buf["act"].shape[2]
        dev = self.device
        obs = net_input(self.obs, lambda a: torch.from_numpy(a[idx]).to(dev).transpose(0, 1).reshape(T1, B * n, -1)
                        .float(), self.scale)
        batch = {k: torch.from_numpy(buf[k][idx]).to(dev).transpose(0, 1).reshape(T1 - 1, B * n)
                 for k in ("act", "rew", "done", "logp")}
        versions = buf["version"][idx].copy()
        keys = ("act", "rew", "done", "logp")
        if self.recurrent:  # episode starts of every observation, the state each env's trajectory starts from
            batch["first"] = torch.from_numpy(buf["first"][idx]).to(dev).transpose(0, 1).reshape(T1, B * n)
            batch["state"] = tuple(torch.from_numpy(buf[k][idx]).to(dev).reshape(B * n, -1) for k in ("h", "c"))
            keys += ("first", "h", "c")
        if dev.type == "cuda":
            self.h2d_bytes += sum(a[idx].nbytes for a in (*obs_leaves(self.obs), *(buf[k] for k in keys)))
        for s in slots:
            self.free_q.put(s)  # copied out: the slots go back to the actors
        t2 = perf_counter_ns()
        self._learn(obs, batch)
        t3 = perf_counter_ns()
        lags = self.version - versions
        if lags.max() >= len(self.lag_hist):
            self.lag_hist = np.concatenate([self.lag_hist, np.zeros(lags.max() + 1 - len(self.lag_hist), np.int64)])
        np.add.at(self.lag_hist, lags, 1)
        self.version += 1
        self.params.publish(self.net, self.version, self._actors_alive)
        self.updates += 1
        stats[WAIT_NS] += t1 - t0
        stats[XFER_NS] += t2 - t1
        stats[LEARN_NS] += t3 - t2
        stats[SYNC_NS] += perf_counter_ns() - t3
        return B * (T1 - 1) * n

    def _learn(self, obs, b):
        torch = self.torch
        T, N = b["act"].shape
        if self.recurrent:  # re-unrolled from the state the actor started the trajectory with
            logits, values, _ = self.net.unroll(obs, b["first"], b["state"])
        else:
            logits, values = self.net(obs.reshape(-1, obs.shape[-1]))
            logits, values = logits.reshape(T + 1, N, -1), values.reshape(T + 1, N)
        logp_all = torch.log_softmax(logits[:T], -1)
        target_logp = logp_all.gather(2, b["act"][..., None]).squeeze(2)
        discounts = GAMMA * (~b["done"]).float()
        vs, advantages = vtrace(b["logp"], target_logp.detach(), b["rew"], discounts, values[:T].detach(),
                                values[T].detach())
        policy_loss = -(target_logp * advantages).mean()
        value_loss = 0.5 * (vs - values[:T]).pow(2).mean()
        entropy = -(logp_all.exp() * logp_all).sum(-1).mean()
        loss = policy_loss + VALUE_COEF * value_loss - ENTROPY_COEF * entropy
        self.optim.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.net.parameters(), GRAD_CLIP)
        self.optim.step()

    # -- metrics over the timed window ------------------------------------------------------------------
    def reset(self):
        self.window.reset()
        self.mark = (self.updates, int(self.buf["steps"].sum()), self.lag_hist.copy(), self.h2d_bytes)

    def read(self, seconds):
        updates0, steps0, hist0, h2d0 = self.mark
        d = self.window.delta() / (seconds * 1e9)
        hist = self.lag_hist - np.pad(hist0, (0, len(self.lag_hist) - len(hist0)))
        updates = self.updates - updates0
        self.info["policy_lag_hist"] = hist.tolist()
        return {
            "updates_per_s": updates / seconds,
            "samples_per_s": updates * self.info["batch_size"] / seconds,
            "actor_steps_per_s": (int(self.buf["steps"].sum()) - steps0) / seconds,
            **lag_stats(hist),
            "queue_wait_ms": float(d[0, WAIT_NS] * seconds * 1e3 / updates) if updates else float("nan"),
            "env_frac": float(d[1:, ENV_NS].mean()), "inference_frac": float(d[1:, INFER_NS].mean()),
            "learn_frac": float(d[0, LEARN_NS]), "wait_frac": float(d[0, WAIT_NS]),
            "transfer_frac": float(d[0, XFER_NS]), "sync_frac": float(d[0, SYNC_NS]),
            "h2d_mb_per_s": (self.h2d_bytes - h2d0) / 1e6 / seconds,
            "return_mean": return_mean(self.buf["returns"], self.buf["episodes"]), "return_first": self.return_first,
            "time_to_target_s": self.time_to_target, "steps_to_target": self.steps_to_target,
        }

    def close(self):
        if hasattr(self, "buf"):
            self.buf["stop"][0] = 1
        stop_processes(self.procs)
        self.procs = []
        for q in self.queues:
            q.cancel_join_thread()  # nothing left to deliver: never block exit on a feeder thread
            q.close()
        self.queues = []


@register
class Impala(Adapter):
    name = "impala"
    kind = "learner"
    algo = "impala"
    description = "IMPALA: actor processes send trajectories through a bounded queue; the learner corrects with V-trace"
    requires = ("gymnasium", "torch")
    options = (
        Option("workers", int, 2, "actor processes; each steps num_envs / workers envs", low=1),
        Option("unroll", int, 20, "time steps per trajectory", low=1),
        Option("batch", int, 2, "trajectories per learner update (lag=one: one per actor)", low=1),
        Option("queue", int, 4, "trajectories that may wait for the learner; actors block beyond", low=1),
        Option("lag", str, "any", "any: actors load the newest parameters; one: Cleanba's exactly-one-update lag",
               ("any", "one")),
        Option("lr", float, 1e-3, "Adam learning rate", low=0, open_low=True),
        Option("target_return", float, 0.0, "mean return of the actors' last episodes counted as solved "
                                            "(time_to_target_s); 0 = the env's own (CartPole-v1: 475, else none)",
               low=-math.inf),
        Option("worker_affinity", str, "none", "pin actor i to the i-th allowed CPU (spread) or not",
               ("none", "spread")),
        CONTEXT_OPTION,
    )

    def supports(self, workload, options):
        return learner_reason(self.name, workload, lambda w: self._checks(w, options))

    def _checks(self, workload, options):
        workers = options["workers"]
        if workers < 1 or workload.num_envs % workers:
            return f"num_envs={workload.num_envs} must be a positive multiple of workers={workers}"
        return obs_reason(self.name, workload, ACT)

    def open(self, workload, options):
        return ImpalaSession(workload, options)

    def tune_space(self, num_envs, cpus):
        """Actor processes: one, two, one per core (each must step a whole share of the envs)."""
        return [{"workers": w} for w in sorted({1, 2, cpus}) if num_envs % w == 0]
