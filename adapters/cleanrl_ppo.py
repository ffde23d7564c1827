"""`cleanrl-ppo` (learner): a compact CleanRL-style PPO (ppo.py / ppo_atari.py for discrete actions,
ppo_continuous_action.py for continuous ones) with the vector env underneath swapped by `vec`: `dummy` (gymnasium
SyncVectorEnv), `subproc` (AsyncVectorEnv) or `envpool` (EnvPool's pool).

One unit is one PPO iteration. EnvPool's reset slots are masked out of GAE and the loss and not counted, so every
`vec` counts the same transitions. How it is built: docs/strategies/learners.md.

A Dict or Tuple observation (a screen beside game variables) is kept in one rollout buffer per part (a uint8 part
uint8, any other float32, as a Box is kept) and handed to the network as its one flat float input (nets.net_input);
only a Gaussian's normalized observations, floats anyway, are flattened into one row (EnvPool's DeepMind Control
Dicts).
"""
import math
from collections import deque
from time import perf_counter, perf_counter_ns

import numpy as np

from adapters._kit.batch import take
from adapters._kit.gym_vec import close_vector
from adapters._kit.learner_nets import learner_reason
from adapters._kit.learner_stats import TargetRun
from adapters._kit.nets import (
    CNN_POLICIES,
    Torso,
    actor_critic,
    flat_obs,
    map_obs,
    net_input,
    obs_leaves,
    obs_scale,
    obs_size,
    torso_of,
)
from adapters._kit.ppo import (
    CLIP_COEF,
    COLLECTORS,
    ENT_COEF,
    ENT_COEF_GAUSSIAN,
    HISTORY,
    LEARNER_OPTIONS,
    MAX_GRAD_NORM,
    NORM_CLIP,
    VF_COEF,
    default_target,
    learner_supports,
    vec_space,
)
from rlbench.api import Adapter, Unsupported, env_fns, env_info, envpool_kwargs, register

STAGES = ("env", "inference", "learn", "transfer")   # transfer: observations copied into the network's tensors
GAUSSIAN_ACT = ("Discrete", "Box")     # a categorical or a Gaussian


# -- the vector envs underneath -----------------------------------------------------------------------------

class GymVec:
    """gymnasium SyncVectorEnv / AsyncVectorEnv from the project's env constructors, SAME_STEP autoreset."""

    def __init__(self, workload, subproc: bool):
        import gymnasium as gym
        mode = gym.vector.AutoresetMode.SAME_STEP
        if subproc:
            self.envs = gym.vector.AsyncVectorEnv(env_fns(workload), shared_memory=True, context="fork",
                                                  autoreset_mode=mode)
        else:
            self.envs = gym.vector.SyncVectorEnv(env_fns(workload), autoreset_mode=mode)
        self.seed = workload.seed
        self.observation_space = self.envs.single_observation_space
        self.action_space = self.envs.single_action_space
        self.workers = workload.num_envs if subproc else 1

    def reset(self):
        return self.envs.reset(seed=self.seed)[0]   # env i from reset(seed=seed + i)

    def step(self, actions):
        """(obs, reward, done, valid): valid None = every slot a transition."""
        obs, reward, terminated, truncated, _ = self.envs.step(actions)
        return obs, reward, terminated | truncated, None

    def close(self):
        close_vector(self.envs)


class EnvPoolVec:
    """EnvPool, synchronous (batch_size = num_envs); its reset steps (elapsed_step 0) are marked invalid."""

    def __init__(self, workload, num_threads: int = 0):
        import os

        import envpool
        self.env = envpool.make(workload.env_id, env_type="gymnasium", num_envs=workload.num_envs,
                                batch_size=workload.num_envs, num_threads=num_threads, seed=workload.seed,
                                **envpool_kwargs(workload.env_id), **workload.env_kwargs)
        self.observation_space = self.env.observation_space
        self.action_space = self.env.action_space
        self.action_dtype = np.int32 if self.action_space.shape == () else self.action_space.dtype
        self.ids = np.arange(workload.num_envs, dtype=np.int32)
        # EnvPool's num_threads=0 means min(batch_size, hardware threads)
        self.workers = num_threads or min(workload.num_envs, os.cpu_count() or 1)

    def reset(self):
        obs, info = self.env.reset()
        return self._ordered(info, obs)[0]

    def step(self, actions):
        obs, reward, terminated, truncated, info = self.env.step(actions.astype(self.action_dtype, copy=False))
        return self._ordered(info, obs, reward, terminated | truncated, info["elapsed_step"] > 0)

    def _ordered(self, info, *arrays):
        """A synchronous batch comes in env_id order; should it ever not, each row goes back to its env."""
        ids = info["env_id"]
        if np.array_equal(ids, self.ids):
            return arrays
        return tuple(_by_env(x, ids) for x in arrays)

    def close(self):
        self.env.close()


def _by_env(x, ids):
    """Rows of a batch (an array, or a dict of them for a Dict observation) put back in env order."""
    if isinstance(x, dict):
        return {k: _by_env(v, ids) for k, v in x.items()}
    y = np.empty_like(x)
    y[ids] = x
    return y


def make_vec(workload, vec: str, num_threads: int = 0):
    return EnvPoolVec(workload, num_threads) if vec == "envpool" else GymVec(workload, subproc=vec == "subproc")


# -- networks ----------------------------------------------------------------------------------------------

SQRT2 = math.sqrt(2)


def layer_init(layer, std=SQRT2, bias=0.0):
    """CleanRL's init: orthogonal weights of gain std, constant bias."""
    import torch
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias)
    return layer


def nature_cnn(channels: int, n_actions: int):
    """ppo_atari.py's Agent: the Nature-DQN torso (3 convs, 512 units) with policy and value heads;
    takes uint8 frames and scales them to [0, 1]."""
    import torch
    nn = torch.nn

    class NatureCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.torso = nn.Sequential(
                layer_init(nn.Conv2d(channels, 32, 8, stride=4)), nn.ReLU(),
                layer_init(nn.Conv2d(32, 64, 4, stride=2)), nn.ReLU(),
                layer_init(nn.Conv2d(64, 64, 3, stride=1)), nn.ReLU(),
                nn.Flatten(), layer_init(nn.Linear(64 * 7 * 7, 512)), nn.ReLU())
            self.pi = layer_init(nn.Linear(512, n_actions), std=0.01)
            self.v = layer_init(nn.Linear(512, 1), std=1.0)

        def forward(self, x):
            z = self.torso(x.float() / 255.0)
            return self.pi(z), self.v(z).squeeze(-1)

    return NatureCNN()


def mlp_actor_critic(obs_shape, hidden, n_actions, uint8: bool):
    """ppo.py's Agent: a separate tanh MLP for the actor and for the critic (a shared torso lets the value
    loss, whose targets reach the hundreds on CartPole, steer the policy's features), each a
    actor_critic of the policy's hidden sizes keeping only its own head, with CleanRL's init
    (torso sqrt(2), policy head 0.01, value head 1); flattens the observation (uint8 scaled to [0, 1]; a Dict's
    or Tuple's parts joined, as they are)."""
    import torch
    torso = Torso("mlp", int(math.prod(obs_shape)), tuple(hidden))
    actor, critic = actor_critic(torso, n_actions), actor_critic(torso, n_actions)
    actor.v = critic.pi = None
    for module in (*actor.torso, *critic.torso):
        if isinstance(module, torch.nn.Linear):
            layer_init(module)
    layer_init(actor.pi, std=0.01)
    layer_init(critic.v, std=1.0)
    scale = 1.0 / 255 if uint8 else 1.0

    class SeparateActorCritic(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.actor, self.critic = actor, critic

        def forward(self, x):
            x = net_input(x, _rows, scale)
            return self.actor.pi(self.actor.torso(x)), self.critic.v(self.critic.torso(x)).squeeze(-1)

    return SeparateActorCritic()


def torso_actor_critic(torso, n_actions: int, scale: float):
    """The policy's CNN (`cnn`: the Nature CNN, `cnn:impala`: the IMPALA ResNet, adapters._kit.nets) shared by a
    policy and a value head, with CleanRL's init where CleanRL has one: ppo_atari.py's Nature CNN is orthogonal
    throughout (sqrt(2)), ppo_procgen.py's IMPALA ResNet keeps torch's init; both heads 0.01 (policy) and 1
    (value). Takes the observation batch as it is stored (uint8 frames scaled to [0, 1] here; a Dict's or Tuple's
    parts joined, their images scaled in the torso)."""
    import torch
    net = actor_critic(torso, n_actions)
    if torso.kind == "nature":
        for module in net.torso.modules():
            if isinstance(module, (torch.nn.Conv2d, torch.nn.Linear)):
                layer_init(module)
    layer_init(net.pi, std=0.01)
    layer_init(net.v, std=1.0)

    class TorsoActorCritic(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = net

        def forward(self, x):
            return self.net(net_input(x, _rows, scale))

    return TorsoActorCritic()


def _rows(x):
    """One stored array of a batch as the network's float rows."""
    return x.reshape(x.shape[0], -1).float()


def gaussian(net, n_actions: int):
    """ppo_continuous_action.py's Agent: the actor's output is the mean of a diagonal Gaussian whose log std
    is a learned vector (zeros at the start), the same for every observation."""
    import torch

    class Gaussian(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = net
            self.logstd = torch.nn.Parameter(torch.zeros(1, n_actions))

        def forward(self, x):
            return self.net(x)

        def dist(self, mean):
            return torch.distributions.Normal(mean, self.logstd.exp().expand_as(mean))

    return Gaussian()


class Normalizer:
    """ppo_continuous_action.py's wrappers (NormalizeObservation, NormalizeReward, each clipped to +-10) done
    on the batch in the learner, so every `vec` trains on the same normalization: one running mean/std of the
    observations, one of each env's discounted return (gymnasium's RunningMeanStd, its epsilon 1e-8)."""

    EPS = 1e-8

    def __init__(self, obs_shape, num_envs: int, gamma: float):
        from gymnasium.wrappers.utils import RunningMeanStd
        self.gamma = gamma
        self.obs_rms = RunningMeanStd(shape=obs_shape)
        self.ret_rms = RunningMeanStd(shape=())
        self.returns = np.zeros(num_envs)

    def obs(self, obs):
        self.obs_rms.update(obs)
        z = (obs - self.obs_rms.mean) / np.sqrt(self.obs_rms.var + self.EPS)
        return np.clip(z, -NORM_CLIP, NORM_CLIP).astype(np.float32)

    def reward(self, reward, done, valid):
        """`valid` None: every slot a transition; else EnvPool's reset slots (False) leave the statistics alone."""
        self.returns = self.returns * self.gamma * (1.0 - done) + reward
        counted = self.returns if valid is None else self.returns[valid]
        if counted.size:
            self.ret_rms.update(counted)
        return np.clip(reward / np.sqrt(self.ret_rms.var + self.EPS), -NORM_CLIP, NORM_CLIP)


# -- the learner ---------------------------------------------------------------------------------------------

class CleanRLPPOSession(TargetRun):
    def __init__(self, workload, options):
        self.options = options
        self.vec = make_vec(workload, options["vec"], options["num_threads"])   # before torch starts its threads (fork)
        try:
            self._build(workload, options)
        except BaseException:
            self.vec.close()
            raise

    def _build(self, workload, options):
        import gymnasium as gym
        import torch
        space = self.vec.action_space
        self.gaussian = isinstance(space, gym.spaces.Box) and len(space.shape) == 1
        if not (self.gaussian or isinstance(space, gym.spaces.Discrete)):
            raise Unsupported(f"cleanrl-ppo samples a categorical (Discrete actions) or a Gaussian (Box actions "
                              f"of one axis): got {space}")
        self.torch = torch
        self.action_start = 0 if self.gaussian else int(space.start)
        device = workload.policy.device
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise Unsupported("no CUDA device")
        self.device = torch.device(device)
        obs_space = self.vec.observation_space
        structured = not isinstance(obs_space, gym.spaces.Box)   # a Dict or Tuple
        if structured:
            from gymnasium.vector.utils import create_empty_array
            shape, dtype = (obs_size(obs_space),), np.dtype(np.float32)
            parts = create_empty_array(obs_space, 1)   # a batch of one: every part's shape and dtype
            frames = any(part.dtype == np.uint8 for part in obs_leaves(parts))
        else:
            shape, dtype = tuple(obs_space.shape), np.dtype(obs_space.dtype)
            frames = dtype == np.uint8
        # a Gaussian's observations are normalized (float observations only: frames are scaled by the network);
        # normalized parts are floats anyway, so a Dict's or Tuple's are one flattened row (EnvPool's DeepMind
        # Control tasks); else every part keeps its own buffer
        normalized = self.gaussian and not frames
        self.flatten = structured and normalized
        image = len(shape) == 3
        self.clip_coef = CLIP_COEF["image" if image else "vector"]
        self.clip_reward = env_info(workload.env_id).family == "atari"

        torch.manual_seed(workload.seed)
        n_actions = int(space.shape[0]) if self.gaussian else int(space.n)
        if workload.policy.name in CNN_POLICIES:
            net = torso_actor_critic(torso_of(workload.policy, obs_space), n_actions, obs_scale(dtype))
        elif image:
            net = nature_cnn(shape[0], n_actions)
        else:
            net = mlp_actor_critic(shape, workload.policy.hidden, n_actions, dtype == np.uint8)
        self.net = (gaussian(net, n_actions) if self.gaussian else net).to(self.device)
        self.ent_coef = ENT_COEF_GAUSSIAN if self.gaussian else ENT_COEF
        # a Gaussian's actions are clipped to the space as they go to the env (CleanRL's ClipAction), and its
        # observations and rewards normalized (float observations only: frames are scaled by the network)
        self.low, self.high = (space.low, space.high) if self.gaussian else (None, None)
        self.norm = Normalizer(shape, workload.num_envs, options["gamma"]) if normalized else None
        self.lr = options["lr"]
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=self.lr, eps=1e-5)
        self.gen = torch.Generator(self.device)
        self.gen.manual_seed(workload.seed)
        self.rng = np.random.default_rng(workload.seed)

        T, N = options["num_steps"], workload.num_envs
        self.T, self.N = T, N
        self.batch = T * N
        self.num_iterations = max(options["total_timesteps"] // self.batch, 1)
        if structured and not self.flatten:   # one buffer per part, as the first batch lays them out
            self.buf_obs = map_obs(lambda a: self._buffer(a.shape[1:], a.dtype), parts)
        else:
            self.buf_obs = self._buffer(shape, dtype)
        self.buf_actions = (torch.zeros((T, N, n_actions), device=self.device) if self.gaussian
                            else torch.zeros((T, N), dtype=torch.int64, device=self.device))
        self.buf_logp = torch.zeros((T, N), device=self.device)
        self.buf_values = torch.zeros((T, N), device=self.device)
        self.rewards = np.zeros((T, N), dtype=np.float32)
        self.dones = np.zeros((T, N), dtype=np.float32)
        self.valid = np.ones((T, N), dtype=bool)

        self.obs = self._observe(self.vec.reset())
        self.ep_ret = np.zeros(N, dtype=np.float64)
        self.history = deque(maxlen=HISTORY)
        self.episodes = 0
        self.target = options["target_return"] or default_target(workload.env_id)
        self.iterations = self.env_steps = self.updates = 0
        self.ns = dict.fromkeys(STAGES, 0)
        self.t_start = None
        self.metrics = self
        self.info = {"workers": self.vec.workers, "batch_size": self.batch}
        self.reset()   # the window's marks: from the start until the harness opens its window

    def _buffer(self, shape, dtype):
        """A rollout buffer [T, N, *shape] on the device: uint8 kept (frames, a screen), anything else float32."""
        torch = self.torch
        obs_dtype = torch.uint8 if dtype == np.uint8 else torch.float32
        return torch.zeros((self.T, self.N, *shape), dtype=obs_dtype, device=self.device)

    def _observe(self, obs):
        """The observation batch as the network takes it: flattened (a Dict's parts), normalized (a Gaussian's)."""
        if self.flatten:
            obs = flat_obs(obs)
        return obs if self.norm is None else self.norm.obs(obs)

    # -- one PPO iteration --
    def step(self) -> int:
        if self.t_start is None:
            self.t_start = perf_counter()
        made = self._rollout()
        self._learn()
        self.iterations += 1
        self.env_steps += made
        self.progress(self.return_mean(), self.env_steps)
        return made

    def _rollout(self) -> int:
        torch, ns = self.torch, self.ns
        made = 0
        for t in range(self.T):
            t0 = perf_counter_ns()
            obs_t = take(self.buf_obs, t)
            for buf, part in zip(obs_leaves(obs_t), obs_leaves(self.obs)):
                buf.copy_(torch.as_tensor(part))   # to the learner's device: host to GPU there
            tc = perf_counter_ns()
            with torch.no_grad():
                out, value = self.net(obs_t)
                if self.gaussian:
                    dist = self.net.dist(out)
                    action = torch.normal(out, dist.scale, generator=self.gen)
                    self.buf_logp[t] = dist.log_prob(action).sum(-1)
                    self.buf_actions[t] = action
                    actions = np.clip(action.cpu().numpy(), self.low, self.high)
                else:
                    logp_all = torch.log_softmax(out, -1)
                    action = torch.multinomial(logp_all.exp(), 1, generator=self.gen)
                    self.buf_logp[t] = logp_all.gather(1, action).squeeze(1)
                    self.buf_actions[t] = action.squeeze(1)
                    actions = action.squeeze(1).cpu().numpy() + self.action_start
            self.buf_values[t] = value
            t1 = perf_counter_ns()
            obs, reward, done, valid = self.vec.step(actions)
            t2 = perf_counter_ns()
            ns["transfer"] += tc - t0
            ns["inference"] += t1 - tc
            ns["env"] += t2 - t1
            self.obs = self._observe(obs)
            if self.norm is not None:
                self.rewards[t] = self.norm.reward(reward, done, valid)
            else:
                self.rewards[t] = np.sign(reward) if self.clip_reward else reward
            self.dones[t] = done
            if valid is None:
                made += self.N
            else:
                self.valid[t] = valid
                made += int(np.count_nonzero(valid))
            self.ep_ret += reward            # an EnvPool reset slot has reward 0 and never ends an episode
            for i in np.flatnonzero(done):
                self.history.append(float(self.ep_ret[i]))
                self.ep_ret[i] = 0.0
                self.episodes += 1
        return made

    def _learn(self):
        torch = self.torch
        t0 = perf_counter_ns()
        if self.options["anneal_lr"]:
            frac = max(1.0 - self.iterations / self.num_iterations, 0.0)
            for group in self.optimizer.param_groups:
                group["lr"] = frac * self.lr
        with torch.no_grad():
            next_value = self.net(map_obs(lambda a: torch.as_tensor(a).to(self.device), self.obs))[1].cpu().numpy()
        values = self.buf_values.cpu().numpy()
        advantages = np.zeros_like(self.rewards)
        last = np.zeros(self.N, dtype=np.float32)
        gamma, lam = self.options["gamma"], self.options["gae_lambda"]
        for t in reversed(range(self.T)):
            next_v = next_value if t == self.T - 1 else values[t + 1]
            nonterminal = 1.0 - self.dones[t]
            delta = self.rewards[t] + gamma * next_v * nonterminal - values[t]
            last = delta + gamma * lam * nonterminal * last
            advantages[t] = last
        returns = advantages + values

        dev = self.device
        b_obs = map_obs(lambda a: a.reshape(self.batch, *a.shape[2:]), self.buf_obs)
        b_actions = self.buf_actions.reshape(self.batch, *self.buf_actions.shape[2:])
        b_logp = self.buf_logp.reshape(-1)
        b_values = self.buf_values.reshape(-1)
        b_adv = torch.as_tensor(advantages.reshape(-1), device=dev)
        b_returns = torch.as_tensor(returns.reshape(-1), device=dev)
        index = np.flatnonzero(self.valid.reshape(-1))  # EnvPool's reset slots are no transitions
        n_mb = self.options["num_minibatches"]
        clip = self.clip_coef
        for _ in range(self.options["update_epochs"]):
            for mb in np.array_split(self.rng.permutation(index), n_mb):
                if mb.size == 0:
                    continue
                mb = torch.as_tensor(mb, device=dev)
                out, new_value = self.net(take(b_obs, mb))
                if self.gaussian:
                    dist = self.net.dist(out)
                    new_logp = dist.log_prob(b_actions[mb]).sum(-1)
                    entropy = dist.entropy().sum(-1).mean()
                else:
                    logp_all = torch.log_softmax(out, -1)
                    new_logp = logp_all.gather(1, b_actions[mb].unsqueeze(1)).squeeze(1)
                    entropy = -(logp_all.exp() * logp_all).sum(-1).mean()
                ratio = (new_logp - b_logp[mb]).exp()
                adv = b_adv[mb]
                if adv.numel() > 1:
                    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                pg_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - clip, 1 + clip)).mean()
                v_clipped = b_values[mb] + (new_value - b_values[mb]).clamp(-clip, clip)
                v_loss = 0.5 * torch.max((new_value - b_returns[mb]) ** 2, (v_clipped - b_returns[mb]) ** 2).mean()
                loss = pg_loss - self.ent_coef * entropy + VF_COEF * v_loss
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.net.parameters(), MAX_GRAD_NORM)
                self.optimizer.step()
                self.updates += 1
        self.valid[:] = True
        self.ns["learn"] += perf_counter_ns() - t0

    def return_mean(self):
        """Mean return of the last 100 finished episodes; None before the first."""
        return float(np.mean(self.history)) if self.history else None

    def episode_returns(self) -> list:
        """The returns of the last (up to) 100 finished episodes, oldest first."""
        return list(self.history)

    # -- metrics over the timed window --
    def reset(self):
        self._mark = (self.iterations, self.env_steps, self.updates, dict(self.ns))

    def read(self, seconds: float) -> dict:
        if seconds <= 0:
            return {}
        _, steps0, updates0, ns0 = self._mark
        out = {"updates_per_s": (self.updates - updates0) / seconds,
               "samples_per_s": (self.env_steps - steps0) / seconds,
               "return_mean": self.return_mean(), "return_first": self.return_first,
               "time_to_target_s": self.time_to_target, "steps_to_target": self.steps_to_target}
        for stage in STAGES:
            out[f"{stage}_frac"] = (self.ns[stage] - ns0[stage]) / 1e9 / seconds
        return out

    def close(self):
        self.vec.close()


@register
class CleanRLPPO(Adapter):
    name = "cleanrl-ppo"
    kind = "learner"
    description = ("CleanRL-style PPO (GAE, clipped losses, minibatch epochs; a categorical or, for continuous "
                   "actions, a Gaussian with normalized observations and rewards) on a chosen vector env: "
                   "dummy, subproc or envpool; one unit = one rollout + update")
    requires = ("torch", "gymnasium")
    options = LEARNER_OPTIONS
    algo = "ppo"

    def tune_space(self, num_envs, cpus):
        return vec_space(num_envs, cpus)

    def collector(self, options):
        return COLLECTORS["cleanrl-ppo"][options["vec"]]

    def supports(self, workload, options):
        return learner_reason(self.name, workload,
                              lambda w: learner_supports(self.name, w, options, nets=True, act=GAUSSIAN_ACT),
                              "its policy")

    def open(self, workload, options):
        return CleanRLPPOSession(workload, options)
