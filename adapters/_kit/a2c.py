"""The n-step advantage actor-critic (A2C) that rlpyt-sync, seed and a3c train: its loss on a [T, B] rollout
(n-step returns cut at episode ends, truncation included, bootstrapped from the value of the observation after
the rollout), action sampling from the logits, and the options and checks seed and a3c share (the checks ga3c
too). torch comes in as an argument, so importing this module imports no framework.
"""
from adapters._kit.learner_nets import obs_reason, policy_reason
from rlbench.api import Option, env_info

GAMMA, VALUE_COEF, ENTROPY_COEF = 0.99, 0.5, 0.01
# what rlbench's torch learners (A2C here, ga3c, impala, rlpyt-async) sample: a categorical (their observations:
# learner_nets.obs_reason)
ACT = ("Discrete",)


def learner_options(batch_T: int, lr: float) -> tuple:
    return (
        Option("batch_T", int, batch_T, "time steps per env in one update's rollout (n-step returns)", low=1),
        Option("lr", float, lr, "Adam learning rate", low=0, open_low=True),
        Option("max_grad_norm", float, 0.5, "clip the gradient to this global norm (0: no clipping)"),
    )


def learner_supports(name: str, workload, options: dict, per: str = "workers"):
    """The reason a learner cannot train on this workload, or None; cheap (no env is built). `per`: the option
    that counts the processes num_envs is split over (ga3c: agents)."""
    reason = policy_reason(name, workload)
    if reason:
        return reason
    workers = options[per]
    if workers < 1 or workload.num_envs % workers:
        return (f"{name} splits num_envs over {per}: num_envs={workload.num_envs} "
                f"is not a multiple of {per}={workers}")
    family = env_info(workload.env_id).family
    if family in ("mujoco", "replay"):
        return f"{name} samples a categorical policy: needs a Discrete action space ({workload.env_id} has none)"
    return obs_reason(name, workload, ACT)


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
