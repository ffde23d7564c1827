"""Which policies a torch learner can train as its network, and the one reason it cannot, told in `supports()`
before any process starts: an actor-critic learner (impala, seed, a3c, ga3c, ddp / rlpyt-sync, cleanrl-ppo) and
apex train `mlp`, `cnn` or `cnn:impala`, impala and seed also `lstm` (a recurrent actor-critic,
adapters._kit.nets.recurrent_actor_critic), the recurrent Q-learner (r2d2) `mlp` or `lstm`; a CNN policy needs
image observations (adapters._kit.nets.torso_of says why not, after building one env to read its space). The
network is the acting policies' own (torso_of: frames, or a CNN per image entry of a Dict or Tuple), so a learner
trains what a stepping strategy acts with. Which observations a learner's buffers carry is `obs_reason`'s: Box
everywhere, Dict and Tuple (of array parts, a buffer per part in its own dtype) in DICT_LEARNERS.
"""
from adapters._kit.nets import CNN_POLICIES, torso_of
from adapters._kit.procs import ARRAY_SPACES
from rlbench.api import Unsupported, spaces, unsupported_leaves, unsupported_spaces

FEED_FORWARD = ("mlp", *CNN_POLICIES)   # mlp, cnn, cnn:impala
RECURRENT = ("mlp", "lstm")
LSTM_ACTOR_CRITICS = ("impala", "seed")   # the actor-critic learners that train `lstm` as a recurrent network
# the learners whose buffers hold a Dict or Tuple observation: one buffer per part (procs.obs_specs, or torch
# tensors in cleanrl-ppo), their network reading the parts as one flat input (nets.net_input, nets.obs_columns)
DICT_LEARNERS = ("impala", "seed", "cleanrl-ppo")
STRUCTURED = ("Dict", "Tuple")


def obs_reason(name: str, workload, act: tuple):
    """The reason learner `name` cannot carry the workload's observations or actions (`act`: the action spaces it
    samples), or None; cheap (the user's env's spaces are built once per process). A Box everywhere; a Dict or
    Tuple of array parts (Box, Discrete, MultiDiscrete, MultiBinary, at any depth) in DICT_LEARNERS, and the
    others' refusal names those."""
    if name in DICT_LEARNERS:
        return (unsupported_spaces(workload, name, obs=("Box", *STRUCTURED), act=act)
                or unsupported_leaves(workload, name, carries=ARRAY_SPACES))
    reason = unsupported_spaces(workload, name, obs=("Box",), act=act)
    if reason is not None and reason.split(" ", 1)[0] in STRUCTURED:
        reason += f" ({', '.join(DICT_LEARNERS[:-1])} and {DICT_LEARNERS[-1]} carry Dict and Tuple observations)"
    return reason


def policy_reason(name: str, workload, what: str = "the policy", recurrent: bool = False):
    """The reason learner `name` cannot train the workload's policy, by its name alone (nothing built), or None."""
    policy = workload.policy.name
    if policy == "lstm" and (name in LSTM_ACTOR_CRITICS or recurrent):
        return None
    if policy == "lstm":
        return f"policy lstm: {name} trains a feed-forward network (impala, seed and r2d2 train recurrent networks)"
    if recurrent and policy in CNN_POLICIES:
        return (f"policy {policy}: {name} trains a recurrent network (policy lstm puts its LSTM on the Nature CNN "
                "for image observations)")
    allowed = RECURRENT if recurrent else FEED_FORWARD + (("lstm",) if name in LSTM_ACTOR_CRITICS else ())
    if policy not in allowed:
        return f"{name} trains {what}: needs policy {', '.join(allowed[:-1])} or {allowed[-1]} (got {policy})"
    return None


def torso_reason(workload):
    """The reason the policy's torso does not fit the env's observations (a CNN on anything but frames), or
    None. `mlp` fits every observation, so only a CNN or lstm policy builds the env (once per process)."""
    if workload.policy.name == "mlp":
        return None
    try:
        torso_of(workload.policy, spaces(workload.env_id, workload.env_kwargs)[0])
    except Unsupported as exc:
        return str(exc)
    return None


def learner_reason(name: str, workload, checks, what: str = "the policy", recurrent: bool = False):
    """The policy by its name, then the learner's own `checks(workload)`, then the torso on the env's
    observations; the first reason found, or None."""
    return policy_reason(name, workload, what, recurrent) or checks(workload) or torso_reason(workload)
