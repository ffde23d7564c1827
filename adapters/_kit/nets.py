"""The torch networks: the layer widths of the `mlp` policy, the actor-critic every torch learner
trains (rlpyt-sync, impala, seed, a3c, cleanrl-ppo), and their parameter counts, known without torch:
shared memory for parameters is made before the workers fork, and a process that forks must not
have touched torch yet. torch itself is imported only inside `actor_critic`.
"""
import math

import numpy as np

from rlbench.api import Unsupported


def obs_size(observation_space) -> int:
    """Inputs of the network: the observation, flattened; a Dict or Tuple observation is its parts
    flattened one after the other (a Discrete part is one input, its index), as `flat_obs` lays it out."""
    parts = getattr(observation_space, "spaces", None)
    if parts is not None:
        return sum(obs_size(p) for p in (parts.values() if isinstance(parts, dict) else parts))
    return math.prod(observation_space.shape)


def flat_obs(obs):
    """A batch of observations (an array, or a dict or tuple of them, as vector envs batch Dict and Tuple
    observations) as one [batch, obs_size] array: the parts flattened and joined in the space's order."""
    if isinstance(obs, (dict, tuple)):
        parts = [flat_obs(p) for p in (obs.values() if isinstance(obs, dict) else obs)]
        return np.concatenate([p.astype(np.float32, copy=False) for p in parts], axis=1)
    obs = np.asarray(obs)
    return obs.reshape(len(obs), -1)


def obs_scale(dtype) -> float:
    """Images (uint8) enter the network in [0, 1]."""
    return 1.0 / 255 if np.dtype(dtype) == np.uint8 else 1.0


def policy_widths(hidden, observation_space, action_space) -> list:
    """Layer widths of the `mlp` policy: the observation (flattened, every part of a Dict or Tuple),
    the hidden sizes, then one output per action (a Discrete space) or per action dimension (a Box)."""
    out = int(action_space.n) if hasattr(action_space, "n") else math.prod(action_space.shape)
    return [obs_size(observation_space), *hidden, out]


def dense_params(widths) -> int:
    """Parameters (weights and biases) of Linear layers of these widths in a row."""
    return sum(a * b + b for a, b in zip(widths[:-1], widths[1:]))


def policy_params(policy, observation_space, action_space) -> int:
    """Length of the flat parameter vector of the workload's policy (a PolicySpec; 0 if it has no
    parameters: only `mlp` has), known before any worker starts."""
    if policy.name != "mlp":
        return 0
    return dense_params(policy_widths(policy.hidden, observation_space, action_space))


def actor_critic_params(obs: int, hidden: tuple, n_actions: int) -> int:
    """Parameters of `actor_critic(obs, hidden, n_actions)`."""
    torso = [obs, *hidden]
    return dense_params(torso) + dense_params([torso[-1], n_actions]) + dense_params([torso[-1], 1])


def actor_critic(obs: int, hidden: tuple, n_actions: int):
    """A shared tanh MLP torso with a policy-logits head and a value head."""
    import torch

    class ActorCritic(torch.nn.Module):
        def __init__(self):
            super().__init__()
            layers, size = [], obs
            for h in hidden:
                layers += [torch.nn.Linear(size, h), torch.nn.Tanh()]
                size = h
            self.torso = torch.nn.Sequential(*layers)
            self.pi = torch.nn.Linear(size, n_actions)
            self.v = torch.nn.Linear(size, 1)

        def forward(self, x):
            z = self.torso(x)
            return self.pi(z), self.v(z).squeeze(-1)

    return ActorCritic()


def learner_torch(policy, seed: int):
    """torch for a learner process of `policy` (its threads, seeded): (torch, its device); Unsupported when
    the policy's device is CUDA and there is none."""
    import torch
    if policy.device.startswith("cuda") and not torch.cuda.is_available():
        raise Unsupported("no CUDA device")
    torch.set_num_threads(policy.threads)
    torch.manual_seed(seed)
    return torch, torch.device(policy.device)
