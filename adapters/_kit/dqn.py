"""The DQN pieces apex and r2d2 share: Ape-X's per-actor exploration rates, the Q-networks (a dueling head on a ReLU
MLP or on the policy's CNN; r2d2's with an LSTM before the head), n-step returns as an actor's local buffer makes
them, the double-Q target, R2D2's targets inside a stored sequence with its value rescaling, the envs an actor
steps, the learner's parameters in shared memory, and the options and checks both adapters take. torch comes in as
an argument or is imported inside a function, so importing this module imports no framework.

A Dict or Tuple observation (a screen beside game variables) is held one array per part, each in its own dtype
(procs.obs_arrays: a uint8 screen stays uint8), by the envs an actor steps and its n-step buffer alike, and is
indexed and joined part by part (adapters._kit.batch); a Box is one array, as before.
"""
import glob
import math
import os
import time

import numpy as np

from adapters._kit.batch import join, put, take
from adapters._kit.learner_nets import obs_reason, policy_reason, torso_reason
from adapters._kit.nets import Torso, dense_params, map_obs, obs_size, torso_of
from adapters._kit.procs import Transient, obs_arrays
from rlbench.api import Option, Unsupported, env_info, make_env

EPS_BASE, EPS_ALPHA = 0.4, 7.0   # Ape-X: actor i of N explores with eps^(1 + alpha * i / (N - 1))
RESCALE_EPS = 1e-3               # R2D2's h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x
MASKED = {"CartPole-v1": (1, 3)}  # mask_velocity zeroes these observation entries (cart and pole velocity)
ACT = ("Discrete",)


# -- exploration ------------------------------------------------------------------------------------------

def epsilons(count: int, base: float = EPS_BASE, alpha: float = EPS_ALPHA) -> np.ndarray:
    """Ape-X's exploration rates eps_i = base^(1 + alpha i / (count - 1)), i = 0..count-1 (one actor: base)."""
    if count == 1:
        return np.array([base])
    return base ** (1 + alpha * np.arange(count) / (count - 1))


def actor_epsilons(per: str, rank: int, workers: int, envs: int, base: float, alpha: float) -> np.ndarray:
    """The rates of actor process `rank`'s `envs` envs: per=actor gives every env of the process the process's
    rate (Ape-X's actor i of `workers`), per=env spreads the schedule over all workers x envs envs."""
    if per == "actor":
        return np.full(envs, epsilons(workers, base, alpha)[rank])
    return epsilons(workers * envs, base, alpha)[rank * envs:(rank + 1) * envs]


# -- networks ---------------------------------------------------------------------------------------------

def q_torso(policy, observation_space) -> Torso:
    """What apex's Q-network puts its dueling head on: `mlp` -> a ReLU MLP of the policy's hidden sizes, `cnn` /
    `cnn:impala` -> that CNN on the frames (adapters._kit.nets.torso_of); Unsupported for `lstm`."""
    torso = torso_of(policy, observation_space)
    if torso.lstm:
        raise Unsupported("policy lstm: apex trains a feed-forward network (impala, seed and r2d2 train "
                          "recurrent networks)")
    return torso


def recurrent_q_torso(policy, observation_space) -> Torso:
    """R2D2's torso, the LSTM included: `mlp` -> a ReLU MLP of hidden[:-1], then an LSTM of hidden[-1] units;
    `lstm` -> torso_of's (the Nature CNN on frames, else an MLP of hidden[:-1], then the LSTM of hidden[-1])."""
    if policy.name == "mlp":
        return Torso("mlp", obs_size(observation_space), tuple(policy.hidden[:-1]), lstm=policy.hidden[-1])
    torso = torso_of(policy, observation_space)
    if not torso.lstm:
        raise Unsupported(f"policy {policy.name}: r2d2 trains a recurrent network (valid: mlp, lstm)")
    return torso


def q_net_params(torso: Torso, n_actions: int) -> int:
    """Parameters of `q_net(torso, n_actions)` or `recurrent_q_net(torso, n_actions)`: the torso (its LSTM
    included) and the dueling head."""
    return torso.params + dense_params([torso.width, n_actions]) + dense_params([torso.width, 1])


def _dueling(torch):
    class Dueling(torch.nn.Module):
        """Q = V + A - mean(A) (Wang et al. 2016), as Ape-X and R2D2 use."""

        def __init__(self, size, n_actions):
            super().__init__()
            self.a = torch.nn.Linear(size, n_actions)
            self.v = torch.nn.Linear(size, 1)

        def forward(self, z):
            a = self.a(z)
            return self.v(z) + a - a.mean(-1, keepdim=True)
    return Dueling


def _feed(torch, torso: Torso):
    """The feed-forward part of a torso: DQN's ReLU MLP for `mlp` (as Ape-X and R2D2 use), else the CNN."""
    if torso.kind != "mlp":
        return torso.build()
    layers, sizes = [], [torso.inputs, *torso.hidden]
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers)


def q_net(torso: Torso, n_actions: int):
    """The torso with a dueling head: [B, inputs] -> Q [B, n_actions]."""
    import torch
    if torso.lstm:
        raise Unsupported("policy lstm: apex trains a feed-forward network (impala, seed and r2d2 train "
                          "recurrent networks)")
    Dueling = _dueling(torch)

    class QNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.torso = _feed(torch, torso)
            self.head = Dueling(torso.width, n_actions)

        def forward(self, x):
            return self.head(self.torso(x))

    return QNet()


def recurrent_q_net(torso: Torso, n_actions: int):
    """R2D2's network: the torso's feed-forward part (a ReLU MLP or the Nature CNN), an LSTM cell of torso.lstm
    units, a dueling head. `unroll(x [T, B, inputs], first [T, B], (h, c) [B, units] each)` resets the state
    before every step whose `first` is set (an episode starts there) and returns Q [T, B, n_actions] and the
    state after the last step."""
    import torch
    if not torso.lstm:
        raise ValueError("recurrent_q_net needs a torso with an LSTM (recurrent_q_torso)")
    Dueling = _dueling(torch)

    class RecurrentQ(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.units = torso.lstm
            self.torso = _feed(torch, torso)
            self.cell = torso.recurrent_cell()
            self.head = Dueling(self.units, n_actions)

        def initial_state(self, batch: int, device=None):
            z = torch.zeros((batch, self.units), device=device)
            return z, z.clone()

        def unroll(self, x, first, state):
            T, B = x.shape[:2]
            z = self.torso(x.reshape(T * B, -1)).reshape(T, B, -1)  # a CNN takes one batch of frames
            resets = first.any(1).tolist()
            h, c = state
            outs = []
            for t in range(len(z)):
                if resets[t]:
                    keep = (~first[t]).to(z.dtype)[:, None]
                    h, c = h * keep, c * keep
                h, c = self.cell(z[t], (h, c))
                outs.append(h)
            return self.head(torch.stack(outs)), (h, c)

    return RecurrentQ()


def burn_in_unroll(torch, net, obs, first, state, burn_in: int):
    """R2D2's burn-in: unroll the first `burn_in` steps from the stored state without gradient, then the rest
    with it, from the burnt-in state. Returns Q of steps burn_in.. [T - burn_in, B, A]."""
    if burn_in:
        with torch.no_grad():
            _, state = net.unroll(obs[:burn_in], first[:burn_in], state)
        state = (state[0].detach(), state[1].detach())
    q, _ = net.unroll(obs[burn_in:], first[burn_in:], state)
    return q


# -- targets ----------------------------------------------------------------------------------------------

def value_rescale(torch, x, eps: float = RESCALE_EPS):
    """h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x (Pohlen et al. 2018; R2D2)."""
    return torch.sign(x) * (torch.sqrt(torch.abs(x) + 1) - 1) + eps * x


def value_rescale_inv(torch, x, eps: float = RESCALE_EPS):
    """h^-1(x), closed form."""
    return torch.sign(x) * (((torch.sqrt(1 + 4 * eps * (torch.abs(x) + 1 + eps)) - 1) / (2 * eps)) ** 2 - 1)


def double_q_target(torch, returns, discounts, q_next_online, q_next_target):
    """returns + discounts * Q_target(s', argmax_a Q_online(s', a)): the n-step double-Q target of transitions
    (s, a, returns = sum_k gamma^k r_k, s', discounts = gamma^n, or 0 where the episode terminated)."""
    best = q_next_online.argmax(-1, keepdim=True)
    return returns + discounts * q_next_target.gather(-1, best).squeeze(-1)


def sequence_targets(torch, rew, done, boot, gamma: float, n: int, rescale: bool = False):
    """R2D2's n-step targets at every step t of a stored stretch: rew, done [T, B] (done: the episode ended
    with step t), boot [T + 1, B] the bootstrap value of the observation before each step and after the last
    (double-Q: the target net's value of the online net's best action). The horizon is min(n, T - t) (at the
    sequence's end the stored observations run out), the return stops at an episode end without
    bootstrapping; with `rescale`, boot is in h-space and the target is h(G + gamma^k h^-1(boot))."""
    T = rew.shape[0]
    if rescale:
        boot = value_rescale_inv(torch, boot)
    pad = torch.zeros((n,) + tuple(rew.shape[1:]), dtype=rew.dtype, device=rew.device)
    rew_p, done_p = torch.cat([rew, pad]), torch.cat([done.to(rew.dtype), pad])
    steps = torch.arange(T, device=rew.device)
    horizon = torch.clamp(T - steps, max=n)                   # [T]
    shape = (T,) + (1,) * (rew.dim() - 1)
    ret = torch.zeros_like(rew)
    alive = torch.ones_like(rew)
    for i in range(n):
        inside = (i < horizon).to(rew.dtype).reshape(shape)
        ret = ret + inside * alive * (gamma ** i) * rew_p[i:i + T]
        alive = alive * (1 - inside * done_p[i:i + T])
    ends = (steps + horizon).reshape(shape).expand_as(rew)     # the observation bootstrapped from
    powers = (gamma ** horizon.to(rew.dtype)).reshape(shape)
    target = ret + alive * powers * torch.gather(boot, 0, ends)
    return value_rescale(torch, target) if rescale else target


class NStep:
    """An actor's n-step transitions (Ape-X's local buffer makes them): per env the last n steps; each step
    `add` returns the transitions completed by it (obs, act, ret = sum_k gamma^k r_k, next_obs: the
    observation after the last step counted, disc = gamma^k, 0 where the episode terminated, tag: what `add`
    was given with the step's observation, e.g. the parameter version that chose its action). An episode end
    completes every step still open; a truncated one bootstraps from the final observation. The observations are
    arrays of `obs_shape` and `obs_dtype`, or batches of `obs_space` (a Dict's or Tuple's: an array per part)."""

    def __init__(self, envs: int, n: int, gamma: float, obs_shape: tuple = None, obs_dtype=None, obs_space=None):
        self.n, self.gamma, self.t = n, gamma, 0
        self.obs = (obs_arrays(obs_space, (n, envs)) if obs_space is not None
                    else np.zeros((n, envs, *obs_shape), dtype=obs_dtype))
        self.act = np.zeros((n, envs), dtype=np.int64)
        self.rew = np.zeros((n, envs), dtype=np.float64)
        self.tag = np.zeros(n, dtype=np.int64)
        self.open = np.zeros(envs, dtype=np.int64)   # steps of each env not yet completed
        self.powers = gamma ** np.arange(n + 1)

    def add(self, obs, act, rew, next_obs, terminated, truncated, tag: int = 0) -> dict:
        n, t = self.n, self.t
        put(self.obs, t % n, obs)
        self.act[t % n], self.rew[t % n], self.tag[t % n] = act, rew, tag
        self.open += 1
        done = np.asarray(terminated) | np.asarray(truncated)
        out = {"obs": [], "act": [], "ret": [], "next_obs": [], "disc": [], "tag": []}
        full = np.nonzero(~done & (self.open == n))[0]
        if len(full):
            rows = (t - n + 1 + np.arange(n)) % n
            out["obs"].append(take(self.obs, (rows[0], full)))
            out["act"].append(self.act[rows[0], full])
            out["ret"].append(self.powers[:n] @ self.rew[rows][:, full])
            out["next_obs"].append(take(next_obs, full))
            out["disc"].append(np.full(len(full), self.powers[n]))
            out["tag"].append(np.full(len(full), self.tag[rows[0]]))
            self.open[full] -= 1
        for j in np.nonzero(done)[0]:
            k = int(self.open[j])
            rows = (t - k + 1 + np.arange(k)) % n
            r = self.rew[rows, j]
            for s in range(k):   # step s of the k open ones: its return runs to the episode's end
                out["obs"].append(map_obs(_one, take(self.obs, (rows[s], j))))
                out["act"].append(self.act[rows[s], j][None])
                out["ret"].append(np.array([self.powers[:k - s] @ r[s:]]))
                out["next_obs"].append(map_obs(_one, take(next_obs, j)))
                out["disc"].append(np.array([0.0 if terminated[j] else self.powers[k - s]]))
                out["tag"].append(self.tag[rows[s]][None])
            self.open[j] = 0
        self.t += 1
        if not out["act"]:
            return {}
        return {k: join(v) if k in OBS_KEYS else np.concatenate(v) for k, v in out.items()}


OBS_KEYS = ("obs", "next_obs")   # a transition's observations: an array, or a dict or tuple of them


def _one(a):
    """One observation's part as a batch of one."""
    return a[None]


# -- what an actor steps ----------------------------------------------------------------------------------

class Envs:
    """Envs lo..hi-1 of the batch, auto-reset, with termination and truncation apart and the final
    observation of an episode kept (n-step returns bootstrap from it when the episode was truncated).
    `mask_velocity` zeroes CartPole's velocities in every observation (a partially observed env). `obs` is a
    batch as the space lays it out: an array, or a dict or tuple of arrays (procs.obs_arrays)."""

    def __init__(self, workload, lo: int, hi: int, mask_velocity: bool = False):
        self.envs = [make_env(workload.env_id, **workload.env_kwargs) for _ in range(lo, hi)]
        self.observation_space = space = self.envs[0].observation_space
        self.action_space = self.envs[0].action_space
        self.start = int(getattr(self.action_space, "start", 0))
        self.masked = list(MASKED[workload.env_id]) if mask_velocity else None
        self.obs = obs_arrays(space, (hi - lo,))
        for j, env in enumerate(self.envs):
            put(self.obs, j, self._mask(env.reset(seed=workload.seed + lo + j)[0]))

    def _mask(self, obs):
        if self.masked is not None:
            obs = np.array(obs, copy=True)
            obs[self.masked] = 0
        return obs

    def step(self, actions):
        """(next observations before any reset, rewards, terminated, truncated); self.obs moves on (reset
        where an episode ended)."""
        n = len(self.envs)
        final = map_obs(np.empty_like, self.obs)
        rew = np.zeros(n, dtype=np.float32)
        term, trunc = np.zeros(n, dtype=np.bool_), np.zeros(n, dtype=np.bool_)
        for j, env in enumerate(self.envs):
            obs, rew[j], term[j], trunc[j], _ = env.step(int(actions[j]) + self.start)
            put(final, j, self._mask(obs))
            put(self.obs, j, self._mask(env.reset()[0]) if term[j] or trunc[j] else take(final, j))
        return final, rew, term, trunc

    def close(self):
        for env in self.envs:
            env.close()


# -- parameters in shared memory --------------------------------------------------------------------------

class SharedParams(Transient):
    """The learner's parameters as one float32 vector in shared memory, with the learner update they are
    from, under a sequence word (odd while the learner writes): readers copy and retry, nobody locks, so
    an actor killed mid-read blocks no one."""
    transient = ("_views",)

    def __init__(self, ctx, count: int):
        self.count = count
        self.raw = ctx.RawArray("f", max(count, 1))
        self.raw_meta = ctx.RawArray("q", 2)     # sequence word, update
        self._views = None

    def views(self):
        if self._views is None:
            self._views = (np.frombuffer(self.raw, np.float32), np.frombuffer(self.raw_meta, np.int64))
        return self._views

    @property
    def seq(self) -> int:
        return int(self.views()[1][0])

    def publish(self, net, update: int) -> None:
        import torch
        p, meta = self.views()
        flat = torch.nn.utils.parameters_to_vector(net.parameters()).detach().cpu().numpy()
        meta[0] += 1
        p[:] = flat
        meta[1] = update
        meta[0] += 1

    def load_first(self, net, give_up):
        """Wait for the learner's first parameters and copy them into net: (sequence word, update), or None
        when give_up() said stop first."""
        while True:
            held = self.load(net, 0, give_up)
            if held is not None:
                return held
            if give_up():
                return None
            time.sleep(1e-3)

    def load(self, net, held_seq: int, give_up=None):
        """Copy newer parameters into net. Returns (sequence word, update) of what net holds now, or None
        when nothing newer was published (or give_up() said stop while the learner was writing)."""
        import torch
        p, meta = self.views()
        while True:
            s = int(meta[0])
            if s == held_seq or s == 0:
                return None
            if s & 1:
                if give_up is not None and give_up():
                    return None
                time.sleep(1e-5)
                continue
            flat, update = p.copy(), int(meta[1])
            if int(meta[0]) == s:
                break
        torch.nn.utils.vector_to_parameters(torch.from_numpy(flat), net.parameters())
        return s, update


# -- options and checks -----------------------------------------------------------------------------------

def wait_for_room(replay, k: int, opts: dict, give_up) -> bool:
    """An actor with k items to write waits while the rate limiter says no; False when give_up() said stop."""
    while not replay.room(k, opts["samples_per_insert"], opts["slack"]):
        if give_up():
            return False
        time.sleep(1e-3)
    return True


def cuda_visible() -> bool:
    """A CUDA device seen without importing torch: an NVIDIA device node, not hidden by CUDA_VISIBLE_DEVICES."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    return bool(glob.glob("/dev/nvidia[0-9]*"))


def dqn_options(batch: int, lr: float, capacity: int, learn_start: int, target_every: int, publish_every: int,
                n_step: int) -> tuple:
    return (
        Option("batch", int, batch, "items (transitions or sequences) per learner update", low=1),
        Option("lr", float, lr, "Adam learning rate", low=0, open_low=True),
        Option("gamma", float, 0.99, "discount", high=1),
        Option("n_step", int, n_step, "n of the n-step double-Q target", low=1),
        Option("capacity", int, capacity, "replay capacity in items (split evenly over the actors)", low=1),
        Option("learn_start", int, learn_start, "items in replay before the first update", low=1),
        Option("target_every", int, target_every, "learner updates between target-network copies", low=1),
        Option("publish_every", int, publish_every, "learner updates between parameter publications (actors "
               "load the newest as they act)", low=1),
        Option("eps", float, EPS_BASE, "Ape-X's base exploration rate (actor i: eps^(1 + eps_alpha i/(N-1)))",
               high=1),
        Option("eps_alpha", float, EPS_ALPHA, "Ape-X's exploration exponent"),
        Option("eps_per", str, "actor", "actor: one rate per actor process (Ape-X's actors); env: the schedule "
               "spread over every env", ("actor", "env")),
        Option("samples_per_insert", float, 0.0, "a rate limiter (Reverb's SampleToInsertRatio): actors wait while "
               "the items they inserted exceed learn_start + the items sampled / this; 0: they never wait (Ape-X)"),
        Option("max_grad_norm", float, 40.0, "clip the gradient to this global norm (0: no clipping)"),
        Option("mask_velocity", bool, False, "CartPole-v1 only: zero the cart and pole velocities in every "
               "observation (a partially observed env)"),
    )


def dqn_supports(name: str, workload, options: dict, recurrent: bool = False):
    """The reason apex or r2d2 (`recurrent`) cannot host the workload, or None; cheap (torch not imported; an
    env is built only to read a CNN or lstm policy's observation space)."""
    reason = policy_reason(name, workload, "a Q-network", recurrent)
    if reason:
        return reason
    workers = options["workers"]
    if workload.num_envs % workers:
        return (f"{name} splits num_envs over workers: num_envs={workload.num_envs} "
                f"is not a multiple of workers={workers}")
    family = env_info(workload.env_id).family
    if family in ("mujoco", "replay", "brax"):
        return f"{name} acts epsilon-greedily: needs a Discrete action space ({workload.env_id} has none)"
    if options["mask_velocity"] and workload.env_id not in MASKED:
        return f"mask_velocity masks {', '.join(MASKED)} only (got {workload.env_id})"
    if workload.policy.device.startswith("cuda") and not cuda_visible():
        return "no CUDA device"
    return obs_reason(name, workload, ACT) or torso_reason(workload)


def memory_check(name: str, item_bytes: int, capacity: int):
    """The reason a replay of capacity x item_bytes does not fit in half the available memory, or None."""
    import psutil
    need, have = item_bytes * capacity, psutil.virtual_memory().available
    if need > have / 2:
        return (f"{name}'s replay needs {need / 2**30:.1f} GiB ({capacity} items x {item_bytes} bytes), more "
                f"than half of the {have / 2**30:.1f} GiB available: lower capacity")
    return None


def obs_dim(space) -> int:
    return math.prod(space.shape)
