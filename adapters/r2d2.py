"""`r2d2`: Recurrent Replay Distributed DQN (Kapturowski et al. 2019, ICLR), written natively on Ape-X's layout
(adapters._kit.prioritized: actors write a shared-memory replay, the learner owns the priorities). Actors store
overlapping fixed-length sequences with their LSTM state; the learner burns in, then trains on n-step double-Q
targets. One unit is one learner update; its env steps are those the actors made meanwhile.
How it is built: docs/strategies/learners.md.

A Dict or Tuple observation (a screen beside game variables) is stored as one replay field per part, each in its
own dtype (`obs/screen`, ...: procs.obs_specs; a uint8 screen stays a byte per pixel), and read by actor and
learner as the network's one flat float input (nets.net_input); a Box is one field, as before.
"""
from time import perf_counter_ns

import numpy as np

from adapters._kit.batch import put
from adapters._kit.dqn import (
    Envs,
    actor_epsilons,
    burn_in_unroll,
    dqn_options,
    dqn_supports,
    q_net_params,
    recurrent_q_net,
    recurrent_q_torso,
    sequence_targets,
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
    obs_arrays,
    obs_from_parts,
    obs_parts,
    obs_specs,
    pin,
)
from adapters._kit.replay_learner import XFER_NS, ReplayLearner
from rlbench.api import Adapter, Option, Workload, register


def sequence_fields(obs_space, seq_len: int, units: int) -> dict:
    """The replay's item: seq_len + 1 observations (a field, or one per part of a Dict or Tuple: `obs/screen`,
    ...), their episode-start flags, the actions, rewards and ends, the state the sequence starts from."""
    L = seq_len
    return {**obs_specs("obs", obs_space, (L + 1,)), "first": ((L + 1,), np.bool_),
            "act": ((L,), np.int64), "rew": ((L,), np.float32), "done": ((L,), np.bool_),
            "h": ((units,), np.float32), "c": ((units,), np.float32), "version": ((), np.int64)}


class SequenceRing:
    """An actor's last seq_len + 1 steps of every env, and the sequences they make. Step t records what the
    actor saw before acting (observation, episode-start flag, the recurrent state it entered with, its
    parameter version, the Q-values it acted on), then what acting gave (action, reward, episode end).
    Sequence k covers steps k*stride .. k*stride + seq_len (stride = seq_len - overlap; the last step's
    observation only bootstraps) and is due at step k*stride + seq_len, once that step is recorded. The
    observations are arrays of `obs_shape` and `obs_dtype`, or batches of `obs_space` (a Dict's or Tuple's: an
    array per part, as its sequences give them; `sequence_items` names them as the replay's fields)."""

    def __init__(self, envs: int, seq_len: int, overlap: int, obs_shape: tuple, obs_dtype, units: int,
                 n_actions: int, obs_space=None):
        self.L, self.stride, self.size = seq_len, seq_len - overlap, seq_len + 1
        R, n = self.size, envs
        self.obs = (obs_arrays(obs_space, (R, n)) if obs_space is not None
                    else np.zeros((R, n, *obs_shape), dtype=obs_dtype))
        self.first = np.zeros((R, n), dtype=np.bool_)
        self.h = np.zeros((R, n, units), dtype=np.float32)
        self.c = np.zeros((R, n, units), dtype=np.float32)
        self.version = np.zeros(R, dtype=np.int64)
        self.q = np.zeros((R, n, n_actions), dtype=np.float32)
        self.act = np.zeros((R, n), dtype=np.int64)
        self.rew = np.zeros((R, n), dtype=np.float32)
        self.done = np.zeros((R, n), dtype=np.bool_)

    def observe(self, t: int, obs, first, h, c, version: int, q) -> None:
        r = t % self.size
        put(self.obs, r, obs)
        self.first[r], self.h[r], self.c[r], self.version[r], self.q[r] = first, h, c, version, q

    def acted(self, t: int, act, rew, done) -> None:
        r = t % self.size
        self.act[r], self.rew[r], self.done[r] = act, rew, done

    def due(self, t: int) -> bool:
        return t >= self.L and (t - self.L) % self.stride == 0

    def sequence(self, t: int) -> tuple:
        """The sequence due at step t, one per env (fields as sequence_fields lays them out), and the Q-values
        the actor acted on along it [seq_len + 1, envs, actions]."""
        start = t - self.L
        pos = (start + np.arange(self.L + 1)) % self.size
        steps = pos[:-1]
        n = self.first.shape[1]
        items = {"obs": map_obs(lambda a: np.swapaxes(a[pos], 0, 1), self.obs), "first": self.first[pos].T,
                 "act": self.act[steps].T, "rew": self.rew[steps].T, "done": self.done[steps].T,
                 "h": self.h[pos[0]].copy(), "c": self.c[pos[0]].copy(), "version": np.full(n, self.version[pos[0]])}
        return items, self.q[pos]


def sequence_items(items: dict, obs_space) -> dict:
    """A ring's sequences as the replay's fields: the observations' parts flat (`obs/screen`, ...)."""
    out = {k: v for k, v in items.items() if k != "obs"}
    out.update(obs_parts("obs", items["obs"], obs_space))
    return out


def sequence_priorities(torch, eta: float, td):
    """R2D2's priority of each sequence from its |TD| [T, B]: eta max_t + (1 - eta) mean_t."""
    td = td.abs()
    return eta * td.max(0).values + (1 - eta) * td.mean(0)


def initial_priorities(torch, items: dict, q, opts) -> np.ndarray:
    """The priority an actor gives its sequences, from the Q-values it acted on ([L + 1, B, A]; without a
    target network the bootstrap is the same values' max) over the steps after the burn-in."""
    bi = opts["burn_in"]
    q = torch.from_numpy(q)
    act = torch.from_numpy(items["act"]).T[bi:]
    rew = torch.from_numpy(items["rew"]).T[bi:]
    done = torch.from_numpy(items["done"]).T[bi:]
    boot = q[bi:].max(-1).values
    target = sequence_targets(torch, rew, done, boot, opts["gamma"], opts["n_step"], opts["value_rescale"])
    q_sa = q[bi:-1].gather(-1, act[..., None]).squeeze(-1)
    return sequence_priorities(torch, opts["eta"], target - q_sa).numpy()


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
        torso = recurrent_q_torso(workload.policy, obs_space)
        net = recurrent_q_net(torso, n_actions)
        eps = actor_epsilons(opts["eps_per"], rank, opts["workers"], n, opts["eps"], opts["eps_alpha"])
        rng = np.random.default_rng(workload.seed + 1000 * (rank + 1))
        ring = SequenceRing(n, opts["seq_len"], opts["overlap"], None, None, torso.lstm, n_actions, obs_space)
        episodes = Episodes(n, buf["returns"][rank], buf["episodes"][rank:rank + 1])

        def rows(a):   # one array of a batch of the n envs as one time step of the network's float input
            return torch.from_numpy(a).reshape(1, n, -1).float()

        def give_up():
            return bool(stop[0]) or master.gone()

        t0 = perf_counter_ns()
        held = params.load_first(net, give_up)
        if held is None:
            return
        seq, version = held
        stats[WAIT_NS] += perf_counter_ns() - t0
        h, c = net.initial_state(n)
        first = np.ones(n, dtype=np.bool_)
        t = 0
        while not give_up():
            t0 = perf_counter_ns()
            held = params.load(net, seq)
            if held is not None:
                seq, version = held
            t1 = perf_counter_ns()
            with torch.no_grad():
                x = net_input(obs, rows, scale)
                q, (h2, c2) = net.unroll(x, torch.from_numpy(first)[None], (h, c))
                q = q[0].numpy()
            ring.observe(t, obs, first, h.numpy(), c.numpy(), version, q)
            actions = np.where(rng.random(n) < eps, rng.integers(0, n_actions, n), q.argmax(1))
            t2 = perf_counter_ns()
            stats[SYNC_NS] += t1 - t0
            stats[INFER_NS] += t2 - t1
            if ring.due(t):  # a sequence is complete: to the replay with its priority
                items, qs = ring.sequence(t)
                priorities = initial_priorities(torch, items, qs, opts)
                t3 = perf_counter_ns()
                if not wait_for_room(replay, n, opts, give_up):
                    return
                t4 = perf_counter_ns()
                replay.write(rank, sequence_items(items, obs_space), priorities)
                t5 = perf_counter_ns()
                stats[INFER_NS] += t3 - t2
                stats[WAIT_NS] += t4 - t3
                stats[XFER_NS] += t5 - t4
                t2 = t5
            _, rew, term, trunc = envs.step(actions)
            t6 = perf_counter_ns()
            first = term | trunc
            ring.acted(t, actions, rew, first)
            steps[rank] += n
            episodes.add(rew, first)
            h, c = h2, c2
            t += 1
            stats[ENV_NS] += t6 - t2
    finally:
        envs.close()


class R2D2Session(ReplayLearner):
    name = "r2d2"
    actor_main = staticmethod(actor_main)
    make_torso = staticmethod(recurrent_q_torso)
    net_params = staticmethod(q_net_params)
    make_net = staticmethod(recurrent_q_net)

    def fields(self, obs_space) -> dict:
        return sequence_fields(obs_space, self.opts["seq_len"], self.torso.lstm)

    def flush_items(self, per: int) -> int:
        return per  # a sequence per env

    def flush_what(self, per: int) -> str:
        return f"its {per} envs' sequences"

    def learned_per_item(self) -> int:
        return self.opts["seq_len"] - self.opts["burn_in"]  # time steps trained on per sequence

    def upload(self, host: dict):
        torch, dev = self.torch, self.device
        fields = [k for k in host if k.split("/", 1)[0] == "obs"] + ["first", "act", "rew", "done"]
        flat = {k: torch.from_numpy(host[k]).to(dev, non_blocking=True).transpose(0, 1)
                for k in fields}  # time first
        b = {k: flat[k] for k in ("first", "act", "rew", "done")}
        b["obs"] = obs_from_parts(flat, "obs", self.obs_space)   # an array, or a Dict's or Tuple's parts
        state = tuple(torch.from_numpy(host[k]).to(dev, non_blocking=True) for k in ("h", "c"))
        return (b, state), sum(host[k].nbytes for k in (*fields, "h", "c"))

    def extra_metrics(self, items: int, seconds: float) -> dict:
        return {"sequence_mb_per_s": items * self.replay.item_bytes / 1e6 / seconds}

    def _learn(self, b, state, w) -> np.ndarray:
        """Burn-in, then one Adam step on the importance-weighted Huber loss of the n-step double-Q targets of
        the remaining steps; the sequences' new priorities back."""
        torch, o, bi = self.torch, self.opts, self.opts["burn_in"]
        T1, B = b["first"].shape
        obs = net_input(b["obs"], lambda a: a.reshape(T1, B, -1).float(), self.scale)
        q = burn_in_unroll(torch, self.net, obs, b["first"], state, bi)        # [T1 - bi, B, A]
        with torch.no_grad():
            q_tg, _ = self.target.unroll(obs, b["first"], state)
            best = q.detach().argmax(-1, keepdim=True)
            boot = q_tg[bi:].gather(-1, best).squeeze(-1)
            target = sequence_targets(torch, b["rew"][bi:], b["done"][bi:], boot, o["gamma"], o["n_step"],
                                      o["value_rescale"])
        q_sa = q[:-1].gather(-1, b["act"][bi:][..., None]).squeeze(-1)
        loss = (w * torch.nn.functional.smooth_l1_loss(q_sa, target, reduction="none")).mean()
        self.optim.zero_grad(set_to_none=True)
        loss.backward()
        if o["max_grad_norm"] > 0:
            torch.nn.utils.clip_grad_norm_(self.net.parameters(), o["max_grad_norm"])
        self.optim.step()
        return sequence_priorities(torch, o["eta"], (target - q_sa).detach()).cpu().numpy()


@register
class R2D2(Adapter):
    name = "r2d2"
    kind = "learner"
    description = ("R2D2: recurrent (LSTM) DQN; actors store overlapping fixed-length sequences with their recurrent "
                   "state in a shared prioritized replay; the learner burns in, then trains n-step double-Q")
    requires = ("gymnasium", "torch")
    options = dqn_options(batch=32, lr=1e-3, capacity=5_000, learn_start=100, target_every=200, publish_every=10,
                          n_step=5) + (
        Option("seq_len", int, 20, "time steps per stored sequence (one more observation bootstraps; the paper's "
               "Atari agent: 80)", low=2),
        Option("burn_in", int, 5, "leading steps of a sequence unrolled without gradient, for the state only "
               "(paper: 40)"),
        Option("overlap", int, 5, "steps consecutive sequences share (paper: 40; overlap = burn_in: the trained "
               "steps tile the stream)"),
        Option("eta", float, 0.9, "priority = eta max|TD| + (1 - eta) mean|TD| over a sequence", high=1),
        Option("value_rescale", bool, True, "train on h(x) = sign(x)(sqrt(|x|+1)-1) + 1e-3 x of the returns"),
    ) + WORKER_OPTIONS

    def supports(self, workload, options):
        if options["burn_in"] >= options["seq_len"]:
            return f"burn_in={options['burn_in']} leaves no step of seq_len={options['seq_len']} to train on"
        if options["overlap"] >= options["seq_len"]:
            return f"overlap={options['overlap']} must be smaller than seq_len={options['seq_len']}"
        return dqn_supports(self.name, workload, options, recurrent=True)

    def open(self, workload, options):
        return R2D2Session(workload, options)
