"""`apex`: Ape-X DQN's distributed prioritized experience replay (Horgan et al. 2018, arXiv 1803.00933),
written natively.

`workers` actor processes each step `num_envs / workers` envs epsilon-greedily with their own copy of the
dueling Q-network, actor i of N with Ape-X's eps_i = eps^(1 + alpha i / (N - 1)) (eps 0.4, alpha 7;
`eps_per=env` spreads the schedule over every env instead). Each keeps a local buffer: its n-step
transitions (s, a, sum_k gamma^k r_k, s_n, gamma^n or 0 at termination) are flushed `flush` at a time,
with initial priorities |n-step TD error| the actor computes with its copy of the network, into the
central replay: shared memory in which each actor owns a ring of slots (rlbench.adapters._kit.prioritized).
The learner (the cell process) owns the sum tree: each update it takes in what the actors flushed,
samples `batch` transitions proportionally to priority^0.6 with importance weights (beta 0.4), takes
one Adam step on the Huber loss of the n-step double-Q target (a target network copied every
`target_every` updates), writes the new priorities |TD| back, and every `publish_every` updates publishes
its parameters, which actors load as they act.

One unit of work is one learner update. Its env steps are the steps the actors made meanwhile, so
`steps_per_s` (= `actor_steps_per_s`) is the actors' rate; `samples_per_s` is the learner's consumption
(updates x batch) and `replay_ratio` the two's quotient. `policy_lag_*`: learner updates between the
parameters that chose a sampled transition's first action and the learner's; `priority_lag_mean`: updates
between the parameters that computed a sampled transition's priority (its actor's, or the learner's at its
last replay) and the learner's. Acting, replay and learning overlap, so lags span hundreds of updates and
no per-update histogram is kept. Truncation (CartPole's 500 steps) bootstraps from the final observation.
"""
import math
import os
import time
from time import perf_counter_ns

import numpy as np
from rlbench.adapters._kit.dqn import (
    Envs,
    NStep,
    SharedParams,
    actor_epsilons,
    double_q_target,
    dqn_options,
    dqn_supports,
    memory_check,
    q_net,
    q_net_params,
    wait_for_room,
)
from rlbench.adapters._kit.learner_stats import RETURN_WINDOW, Episodes, return_mean
from rlbench.adapters._kit.nets import obs_scale
from rlbench.adapters._kit.prioritized import ReplayIndex, SharedReplay
from rlbench.adapters._kit.procs import (
    ENV_NS,
    INFER_NS,
    LEARN_NS,
    STAT_COLUMNS,
    SYNC_NS,
    WAIT_NS,
    WORKER_OPTIONS,
    HelperProcesses,
    MasterWatch,
    SharedArrays,
    Window,
    pin,
    raise_if_exited,
    spaces,
    start_process,
    stop_processes,
    worker_cpus,
)

from rlbench.api import Adapter, Option, Unsupported, Workload, register

XFER_NS, H2D_BYTES, STATS = STAT_COLUMNS, STAT_COLUMNS + 1, STAT_COLUMNS + 2  # columns past the shared ones
WAIT_POLL_S = 1e-3   # the learner's poll while the replay fills to learn_start


def transition_fields(obs_space) -> dict:
    return {"obs": (obs_space.shape, obs_space.dtype), "next_obs": (obs_space.shape, obs_space.dtype),
            "act": ((), np.int64), "ret": ((), np.float32), "disc": ((), np.float32), "version": ((), np.int64)}


def initial_priorities(torch, net, items: dict, scale: float) -> np.ndarray:
    """|n-step TD error| of a local buffer's transitions under the actor's network (one forward for s and s_n;
    without a target network the bootstrap is the same network's max)."""
    k = len(items["act"])
    with torch.no_grad():
        x = torch.from_numpy(np.concatenate([items["obs"], items["next_obs"]])).reshape(2 * k, -1).float() * scale
        q = net(x)
        q_sa = q[:k].gather(1, torch.from_numpy(items["act"])[:, None]).squeeze(1)
        target = (torch.from_numpy(items["ret"]).float()
                  + torch.from_numpy(items["disc"]).float() * q[k:].max(1).values)
    return (target - q_sa).abs().numpy()


def actor_main(rank, workload_dict, lo, hi, opts, replay, params, shared, cpus, master_pid):
    import torch
    pin(cpus)
    torch.set_num_threads(1)
    master = MasterWatch(master_pid)
    workload = Workload.from_dict(workload_dict)
    buf = shared.views()
    stats, stop, steps = buf["stats"][rank + 1], buf["stop"], buf["steps"]
    envs = Envs(workload, lo, hi, opts["mask_velocity"])
    try:
        n, obs = hi - lo, envs.obs
        n_actions, scale = int(envs.action_space.n), obs_scale(obs.dtype)
        net = q_net(math.prod(obs.shape[1:]), workload.policy.hidden, n_actions)
        eps = actor_epsilons(opts["eps_per"], rank, opts["workers"], n, opts["eps"], opts["eps_alpha"])
        rng = np.random.default_rng(workload.seed + 1000 * (rank + 1))
        nstep = NStep(n, opts["n_step"], opts["gamma"], obs.shape[1:], obs.dtype)
        episodes = Episodes(n, buf["returns"][rank], buf["episodes"][rank:rank + 1])

        def give_up():
            return bool(stop[0]) or master.gone()

        t0 = perf_counter_ns()
        held = None
        while held is None:  # the learner's first parameters
            held = params.load(net, 0, give_up)
            if held is None:
                if give_up():
                    return
                time.sleep(1e-3)
        seq, version = held
        stats[WAIT_NS] += perf_counter_ns() - t0
        local, pending = [], 0
        while not give_up():
            t0 = perf_counter_ns()
            held = params.load(net, seq)  # the newest parameters, when the learner published since
            if held is not None:
                seq, version = held
            t1 = perf_counter_ns()
            with torch.no_grad():
                greedy = net(torch.from_numpy(obs).reshape(n, -1).float() * scale).argmax(1).numpy()
            actions = np.where(rng.random(n) < eps, rng.integers(0, n_actions, n), greedy)
            t2 = perf_counter_ns()
            before = obs.copy()
            final, rew, term, trunc = envs.step(actions)
            t3 = perf_counter_ns()
            steps[rank] += n
            episodes.add(rew, term | trunc)
            made = nstep.add(before, actions, rew, final, term, trunc, version)
            if made:
                local.append(made)
                pending += len(made["act"])
            stats[SYNC_NS] += t1 - t0
            stats[INFER_NS] += t2 - t1
            stats[ENV_NS] += t3 - t2
            if pending >= opts["flush"]:  # the local buffer goes to the replay with its priorities
                t4 = perf_counter_ns()
                items = {k: np.concatenate([m[k] for m in local]) for k in local[0]}
                items["version"] = items.pop("tag")
                priorities = initial_priorities(torch, net, items, scale)
                t5 = perf_counter_ns()
                if not wait_for_room(replay, len(priorities), opts, give_up):
                    return
                t6 = perf_counter_ns()
                replay.write(rank, items, priorities)
                local, pending = [], 0
                stats[INFER_NS] += t5 - t4
                stats[WAIT_NS] += t6 - t5
                stats[XFER_NS] += perf_counter_ns() - t6
    finally:
        envs.close()


class ApexSession:
    def __init__(self, workload, options):
        import multiprocessing as mp
        self.workload, self.opts = workload, options
        self.procs, self.helpers = [], None
        workers, B = options["workers"], options["batch"]
        obs_space, act_space = spaces(workload)
        if not hasattr(act_space, "n"):
            raise Unsupported("apex acts epsilon-greedily: needs a Discrete action space")
        fields = transition_fields(obs_space)
        ctx = mp.get_context(options["context"])
        if options["context"] != "fork":
            self.helpers = HelperProcesses()
        self.replay = SharedReplay(ctx, fields, options["capacity"], workers)
        reason = memory_check("apex", self.replay.item_bytes, self.replay.capacity)
        if reason:
            raise Unsupported(reason)
        if options["flush"] + options["n_step"] * (workload.num_envs // workers) > self.replay.per:
            raise Unsupported(f"apex: capacity {options['capacity']} leaves each of {workers} actors fewer slots "
                              f"({self.replay.per}) than one flush of its local buffer")
        self.obs_size, self.n_actions = math.prod(obs_space.shape), int(act_space.n)
        self.params = SharedParams(ctx, q_net_params(self.obs_size, workload.policy.hidden, self.n_actions))
        self.shared = SharedArrays(ctx, {
            "stats": ((workers + 1, STATS), np.float64), "steps": ((workers,), np.int64),
            "returns": ((workers, -(-RETURN_WINDOW // workers)), np.float64), "episodes": ((workers,), np.int64),
            "stop": ((1,), np.int64)})
        self.buf = self.shared.views()
        self.stats = self.buf["stats"][0]
        self.window = Window(self.buf["stats"])
        self.index = ReplayIndex(self.replay, workload.seed + 7)
        self.learn_start = max(options["learn_start"], B)
        self.updates = self.steps_seen = 0
        self.lag = {"policy": [0, 0, 0], "priority": [0, 0, 0]}  # sum, count, max over the window
        self.metrics = self
        self.info = {"workers": workers, "batch_size": B, "item_bytes": self.replay.item_bytes,
                     "capacity_items": self.replay.capacity}
        try:
            per = workload.num_envs // workers
            flush = options["flush"] + options["n_step"] * per  # the most one flush writes
            actor_opts = dict(options, slack=self.learn_start + workers * flush)
            for rank, cpus in enumerate(worker_cpus(options["worker_affinity"], workers)):
                start_process(ctx, self.procs, actor_main, f"apex-actor-{rank}",
                              (rank, workload.to_dict(), rank * per, (rank + 1) * per, actor_opts, self.replay,
                               self.params, self.shared, cpus, os.getpid()))
            self._build_learner(fields)  # torch only after the fork
        except BaseException:
            self.close()
            raise

    def _build_learner(self, fields):
        import torch
        policy = self.workload.policy
        if policy.device.startswith("cuda") and not torch.cuda.is_available():
            raise Unsupported("no CUDA device")
        self.torch = torch
        torch.set_num_threads(policy.threads)
        torch.manual_seed(self.workload.seed)
        self.device = torch.device(policy.device)
        self.cuda = self.device.type == "cuda"
        self.net = q_net(self.obs_size, policy.hidden, self.n_actions).to(self.device)
        self.target = q_net(self.obs_size, policy.hidden, self.n_actions).to(self.device)
        self.target.load_state_dict(self.net.state_dict())
        self.optim = torch.optim.Adam(self.net.parameters(), lr=self.opts["lr"])
        self.scale = obs_scale(fields["obs"][1])
        B = self.opts["batch"]
        self.host = {}
        for k, (shape, dtype) in fields.items():
            a = np.empty((B, *shape), dtype=dtype)
            self.host[k] = torch.from_numpy(a).pin_memory().numpy() if self.cuda else a
        self.params.publish(self.net, 0)

    def _actors_alive(self):
        raise_if_exited(self.procs, "apex actor")

    def _fill(self) -> int:
        """Take in what the actors wrote; the first updates wait until the replay holds learn_start items.
        Returns the ns spent waiting."""
        waited = 0
        while True:
            self.index.ingest()
            if self.index.added >= self.learn_start:
                return waited
            self._actors_alive()
            t0 = perf_counter_ns()
            time.sleep(WAIT_POLL_S)
            waited += perf_counter_ns() - t0

    def _lags(self, kind, lags):
        acc = self.lag[kind]
        acc[0] += int(lags.sum())
        acc[1] += len(lags)
        acc[2] = max(acc[2], int(lags.max()))

    def step(self) -> int:
        torch, stats, host, dev = self.torch, self.stats, self.host, self.device
        self._actors_alive()
        t0 = perf_counter_ns()
        waited = self._fill()
        t1 = perf_counter_ns()
        idx, weights, seqs = self.index.sample(self.opts["batch"])
        self.index.gather(idx, seqs, host)
        self._lags("policy", self.updates - host["version"])
        self._lags("priority", self.updates - self.index.priority_version[idx])
        b = {k: torch.from_numpy(host[k]).to(dev, non_blocking=True) for k in ("obs", "next_obs", "act", "ret", "disc")}
        w = torch.from_numpy(weights).to(dev, torch.float32)
        if self.cuda:
            stats[H2D_BYTES] += sum(host[k].nbytes for k in b) + weights.nbytes
        t2 = perf_counter_ns()
        td = self._learn(b, w)
        t3 = perf_counter_ns()
        self.index.update(idx, seqs, td, self.updates)
        self.updates += 1
        t4 = perf_counter_ns()
        if self.updates % self.opts["target_every"] == 0:
            self.target.load_state_dict(self.net.state_dict())
        if self.updates % self.opts["publish_every"] == 0:
            self.params.publish(self.net, self.updates)
        t5 = perf_counter_ns()
        stats[WAIT_NS] += waited
        stats[XFER_NS] += (t1 - t0 - waited) + (t2 - t1) + (t4 - t3)
        stats[LEARN_NS] += t3 - t2
        stats[SYNC_NS] += t5 - t4
        made = int(self.buf["steps"].sum())
        made, self.steps_seen = made - self.steps_seen, made
        return made

    def _learn(self, b, w) -> np.ndarray:
        """One Adam step on the importance-weighted Huber loss of the n-step double-Q target; |TD| back."""
        torch, B = self.torch, self.opts["batch"]
        obs = torch.cat([b["obs"], b["next_obs"]]).reshape(2 * B, -1).float() * self.scale
        q = self.net(obs)
        with torch.no_grad():
            target = double_q_target(torch, b["ret"], b["disc"], q[B:].detach(), self.target(obs[B:]))
        q_sa = q[:B].gather(1, b["act"][:, None]).squeeze(1)
        td = target - q_sa
        loss = (w * torch.nn.functional.smooth_l1_loss(q_sa, target, reduction="none")).mean()
        self.optim.zero_grad(set_to_none=True)
        loss.backward()
        if self.opts["max_grad_norm"] > 0:
            torch.nn.utils.clip_grad_norm_(self.net.parameters(), self.opts["max_grad_norm"])
        self.optim.step()
        return td.detach().abs().cpu().numpy()  # .cpu() waits for the device

    # -- metrics over the timed window ------------------------------------------------------------------
    def reset(self):
        self.window.reset()
        self.mark = (self.updates, int(self.buf["steps"].sum()))
        self.lag = {"policy": [0, 0, 0], "priority": [0, 0, 0]}

    def read(self, seconds):
        updates, steps = self.updates - self.mark[0], int(self.buf["steps"].sum()) - self.mark[1]
        delta = self.window.delta()
        d = delta / (seconds * 1e9)
        learner, actors = d[0], d[1:]
        sampled = updates * self.opts["batch"]
        pol, pri = self.lag["policy"], self.lag["priority"]
        nan = float("nan")
        return {"updates_per_s": updates / seconds, "samples_per_s": sampled / seconds,
                "actor_steps_per_s": steps / seconds, "replay_ratio": sampled / steps if steps else nan,
                "policy_lag_mean": pol[0] / pol[1] if pol[1] else nan, "policy_lag_max": pol[2] if pol[1] else nan,
                "priority_lag_mean": pri[0] / pri[1] if pri[1] else nan,
                "env_frac": float(actors[:, ENV_NS].mean()), "inference_frac": float(actors[:, INFER_NS].mean()),
                "learn_frac": float(learner[LEARN_NS]), "wait_frac": float(learner[WAIT_NS]),
                "transfer_frac": float(learner[XFER_NS]), "sync_frac": float(learner[SYNC_NS]),
                "queue_wait_ms": float(delta[0, WAIT_NS]) / 1e6 / updates if updates else nan,
                "h2d_mb_per_s": float(delta[0, H2D_BYTES]) / 1e6 / seconds,
                "return_mean": self.return_mean()}

    def return_mean(self) -> float:
        """Mean return of about the last RETURN_WINDOW episodes (the last RETURN_WINDOW / workers of each actor,
        whatever its exploration rate); nan before the first."""
        return return_mean(self.buf["returns"], self.buf["episodes"])

    def close(self):
        if hasattr(self, "buf"):
            self.buf["stop"][0] = 1
        stop_processes(self.procs)
        self.procs = []
        if self.helpers is not None:
            self.helpers.stop()
            self.helpers = None


@register
class Apex(Adapter):
    name = "apex"
    kind = "learner"
    description = ("Ape-X DQN: actor processes with per-actor exploration flush n-step transitions with initial "
                   "priorities into a shared prioritized replay; a double-Q learner samples it and publishes "
                   "parameters every K updates")
    requires = ("gymnasium", "torch")
    options = dqn_options(batch=64, lr=1e-3, capacity=50_000, learn_start=1000, target_every=250, publish_every=10,
                          n_step=3) + (
        Option("flush", int, 50, "transitions an actor's local buffer holds before it goes to the replay", low=1),
    ) + WORKER_OPTIONS

    def supports(self, workload, options):
        return dqn_supports(self.name, workload, options)

    def open(self, workload, options):
        return ApexSession(workload, options)
