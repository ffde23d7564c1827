"""Pieces the actor-critic learners `seed` and `a3c` share: their options and checks, the A2C loss on a
[T, B] rollout (n-step returns cut at episode ends, bootstrapped from the value of the observation
after the rollout), the network's input, and the returns of the episodes the actors finish.

The network is torch_mlp's `actor_critic` (the workload's `mlp` hidden sizes); actions are sampled
from its logits. Truncation (CartPole's 500 steps) ends the return like termination, as in rlpyt-sync.
"""
import math

import numpy as np

from rlbench.api import Option, env_info

GAMMA, VALUE_COEF, ENTROPY_COEF = 0.99, 0.5, 0.01
RETURN_WINDOW = 100  # return_mean: the mean return of about the last this many finished episodes


def learner_options(batch_T: int, lr: float) -> tuple:
    return (
        Option("batch_T", int, batch_T, "time steps per env in one update's rollout (n-step returns)", low=1),
        Option("lr", float, lr, "Adam learning rate", low=0, open_low=True),
        Option("max_grad_norm", float, 0.5, "clip the gradient to this global norm (0: no clipping)"),
    )


def learner_supports(name: str, workload, options: dict):
    """The reason a learner cannot train on this workload, or None; cheap (no env is built)."""
    if workload.policy.name != "mlp":
        return f"{name} trains the policy: needs policy mlp (got {workload.policy.name})"
    workers = options["workers"]
    if workers < 1 or workload.num_envs % workers:
        return (f"{name} splits num_envs over workers: num_envs={workload.num_envs} "
                f"is not a multiple of workers={workers}")
    family = env_info(workload.env_id).family
    if family in ("mujoco", "replay"):
        return f"{name} samples a categorical policy: needs a Discrete action space ({workload.env_id} has none)"
    return None


def obs_size(observation_space) -> int:
    return math.prod(observation_space.shape)


def obs_scale(observation_space) -> float:
    """Images (uint8) enter the network in [0, 1]."""
    return 1.0 / 255 if np.dtype(observation_space.dtype) == np.uint8 else 1.0


def a2c_loss(torch, logits, values, last_value, actions, rewards, dones):
    """logits [T, B, A], values [T, B], last_value [B] (no gradient), actions [T, B] int64,
    rewards and dones [T, B] float: policy-gradient + value + entropy loss of an n-step A2C."""
    T = rewards.shape[0]
    returns = torch.empty_like(rewards)
    ret = last_value
    not_done = 1.0 - dones
    for t in reversed(range(T)):
        ret = rewards[t] + GAMMA * ret * not_done[t]
        returns[t] = ret
    advantage = returns - values.detach()
    logp = torch.log_softmax(logits, -1)
    policy_loss = -(logp.gather(-1, actions.unsqueeze(-1)).squeeze(-1) * advantage).mean()
    value_loss = (returns - values).pow(2).mean()
    entropy = -(logp.exp() * logp).sum(-1).mean()
    return policy_loss + VALUE_COEF * value_loss - ENTROPY_COEF * entropy


def sample_actions(torch, logits, generator):
    return torch.multinomial(torch.softmax(logits, -1), 1, generator=generator).squeeze(-1)


class Episodes:
    """Running return of each env; a finished episode's return goes into `ring` (float64, the last
    ring.size episodes) and `count` ([1] int64: episodes finished so far). Both may be shared memory
    that only this process writes."""

    def __init__(self, num_envs: int, ring: np.ndarray, count: np.ndarray):
        self.ret = np.zeros(num_envs, dtype=np.float64)
        self.ring, self.count = ring, count

    def add(self, rewards: np.ndarray, dones: np.ndarray):
        """rewards, dones: [T, B] or [B]."""
        for rew, done in zip(np.atleast_2d(rewards), np.atleast_2d(dones)):
            self.ret += rew
            if done.any():
                for r in self.ret[done]:
                    self.ring[int(self.count[0]) % self.ring.size] = r
                    self.count[0] += 1
                self.ret[done] = 0.0


def return_mean(rings: np.ndarray, counts: np.ndarray) -> float:
    """Mean return over every ring's stored episodes ([rings, size], [rings]); nan before any ended."""
    held = [ring[:min(int(c), ring.size)] for ring, c in zip(rings, counts)]
    total = sum(len(h) for h in held)
    return float(sum(h.sum() for h in held) / total) if total else float("nan")


def lag_stats(hist: np.ndarray) -> dict:
    """policy_lag_mean / _max of a histogram [batches at lag 0, lag 1, ...] (nan when empty)."""
    n = hist.sum()
    if not n:
        return {"policy_lag_mean": float("nan"), "policy_lag_max": float("nan")}
    lags = np.arange(hist.size)
    return {"policy_lag_mean": float((hist * lags).sum() / n), "policy_lag_max": float(lags[hist > 0].max())}


def trimmed(hist: np.ndarray) -> list:
    """The histogram as a list without trailing empty bins (info["policy_lag_hist"])."""
    nz = np.flatnonzero(hist)
    return [int(h) for h in hist[:nz[-1] + 1]] if nz.size else []
