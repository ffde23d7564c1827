"""`apex`: Ape-X DQN's distributed prioritized experience replay (Horgan et al. 2018, arXiv 1803.00933), written
natively: actor processes write n-step transitions with initial priorities into a shared-memory replay, and the
learner (the cell process) owns the sum tree. One unit is one learner update; its env steps are those the actors
made meanwhile, so `steps_per_s` is the actors' rate. How it is built: docs/strategies/learners.md.

A Dict or Tuple observation (a screen beside game variables) is stored as one replay field per part, each in its
own dtype (`obs/screen`, `next_obs/screen`, ...: procs.obs_specs; a uint8 screen stays a byte per pixel), and read
by actor and learner as the network's one flat float input (nets.net_input); a Box is one field, as before.
"""
from time import perf_counter_ns

import numpy as np

from adapters._kit.batch import join
from adapters._kit.dqn import (
    OBS_KEYS,
    Envs,
    NStep,
    actor_epsilons,
    double_q_target,
    dqn_options,
    dqn_supports,
    q_net,
    q_net_params,
    q_torso,
    wait_for_room,
)
from adapters._kit.learner_stats import Episodes
from adapters._kit.nets import map_obs, net_input, space_scale
from adapters._kit.procs import (
    ENV_NS,
    INFER_NS,
    SYNC_NS,
    WAIT_NS,
    WORKER_OPTIONS,
    MasterWatch,
    obs_from_parts,
    obs_parts,
    obs_specs,
    pin,
)
from adapters._kit.replay_learner import XFER_NS, ReplayLearner
from rlbench.api import Adapter, Option, Workload, register


def transition_fields(obs_space) -> dict:
    """The replay's item: the observation and the one n steps later (a field each, or one per part of a Dict or
    Tuple: `obs/screen`, ...), the action, the n-step return and discount, the version that acted."""
    return {**obs_specs("obs", obs_space, ()), **obs_specs("next_obs", obs_space, ()),
            "act": ((), np.int64), "ret": ((), np.float32), "disc": ((), np.float32), "version": ((), np.int64)}


def transition_items(items: dict, obs_space) -> dict:
    """An actor's transitions as the replay's fields: the observations' parts flat (`obs/screen`, ...)."""
    out = {k: v for k, v in items.items() if k not in OBS_KEYS}
    for k in OBS_KEYS:
        out.update(obs_parts(k, items[k], obs_space))
    return out


def initial_priorities(torch, net, items: dict, scale: float) -> np.ndarray:
    """|n-step TD error| of a local buffer's transitions under the actor's network (one forward for s and s_n;
    without a target network the bootstrap is the same network's max)."""
    k = len(items["act"])
    with torch.no_grad():
        x = net_input(join([items["obs"], items["next_obs"]]),
                      lambda a: torch.from_numpy(a).reshape(2 * k, -1).float(), scale)
        q = net(x)
        q_sa = q[:k].gather(1, torch.from_numpy(items["act"])[:, None]).squeeze(1)
        target = (torch.from_numpy(items["ret"]).float()
                  + torch.from_numpy(items["disc"]).float() * q[k:].max(1).values)
    return (target - q_sa).abs().numpy()


def actor_main(rank, workload_dict, lo, hi, opts, replay, params, shared, cpus, master_pid, obs_space):
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
        n_actions, scale = int(envs.action_space.n), space_scale(obs_space)
        net = q_net(q_torso(workload.policy, obs_space), n_actions)
        eps = actor_epsilons(opts["eps_per"], rank, opts["workers"], n, opts["eps"], opts["eps_alpha"])
        rng = np.random.default_rng(workload.seed + 1000 * (rank + 1))
        nstep = NStep(n, opts["n_step"], opts["gamma"], obs_space=obs_space)
        episodes = Episodes(n, buf["returns"][rank], buf["episodes"][rank:rank + 1])

        def rows(a):   # one array of a batch of the n envs as the network's float rows
            return torch.from_numpy(a).reshape(n, -1).float()

        def give_up():
            return bool(stop[0]) or master.gone()

        t0 = perf_counter_ns()
        held = params.load_first(net, give_up)
        if held is None:
            return
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
                greedy = net(net_input(obs, rows, scale)).argmax(1).numpy()
            actions = np.where(rng.random(n) < eps, rng.integers(0, n_actions, n), greedy)
            t2 = perf_counter_ns()
            before = map_obs(np.copy, obs)
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
                items = {k: (join if k in OBS_KEYS else np.concatenate)([m[k] for m in local]) for k in local[0]}
                items["version"] = items.pop("tag")
                priorities = initial_priorities(torch, net, items, scale)
                t5 = perf_counter_ns()
                if not wait_for_room(replay, len(priorities), opts, give_up):
                    return
                t6 = perf_counter_ns()
                replay.write(rank, transition_items(items, obs_space), priorities)
                local, pending = [], 0
                stats[INFER_NS] += t5 - t4
                stats[WAIT_NS] += t6 - t5
                stats[XFER_NS] += perf_counter_ns() - t6
    finally:
        envs.close()


class ApexSession(ReplayLearner):
    name = "apex"
    actor_main = staticmethod(actor_main)
    make_torso = staticmethod(q_torso)
    net_params = staticmethod(q_net_params)
    make_net = staticmethod(q_net)

    def fields(self, obs_space) -> dict:
        return transition_fields(obs_space)

    def flush_items(self, per: int) -> int:
        return self.opts["flush"] + self.opts["n_step"] * per

    def flush_what(self, per: int) -> str:
        return "one flush of its local buffer"

    def upload(self, host: dict):
        dev = self.device
        fields = [k for k in host if k.split("/", 1)[0] in OBS_KEYS] + ["act", "ret", "disc"]
        flat = {k: self.torch.from_numpy(host[k]).to(dev, non_blocking=True) for k in fields}
        b = {k: flat[k] for k in ("act", "ret", "disc")}
        for k in OBS_KEYS:   # an array, or a Dict's or Tuple's parts in its structure
            b[k] = obs_from_parts(flat, k, self.obs_space)
        return (b,), sum(host[k].nbytes for k in flat)

    def _learn(self, b, w) -> np.ndarray:
        """One Adam step on the importance-weighted Huber loss of the n-step double-Q target; |TD| back."""
        torch, B = self.torch, self.opts["batch"]
        obs = torch.cat([net_input(b[k], lambda a: a.reshape(B, -1).float(), self.scale) for k in OBS_KEYS])
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
