"""Which policies a torch learner can train as its network, and the one reason it cannot, told in `supports()`
before any process starts: an actor-critic learner (impala, seed, a3c, ga3c, ddp / rlpyt-sync, cleanrl-ppo) and
apex train `mlp`, `cnn` or `cnn:impala`, impala and seed also `lstm` (a recurrent actor-critic,
adapters._kit.nets.recurrent_actor_critic), the recurrent Q-learner (r2d2) `mlp` or `lstm`; a CNN policy needs
image observations (adapters._kit.nets.torso_of says why not, after building one env to read its space). The
network is the acting policies' own (torso_of: frames, or a CNN per image entry of a Dict or Tuple), so a learner
trains what a stepping strategy acts with. Which observations a learner's buffers carry is `obs_reason`'s: Box
everywhere, Dict and Tuple (of array parts, a buffer per part in its own dtype) in DICT_LEARNERS; sb3-ppo a Dict of
array parts (SB3's MultiInputPolicy), but no Tuple.
"""
import numpy as np

from adapters._kit.nets import CNN_POLICIES, MIN_SIDE, image_layout, torso_of
from adapters._kit.procs import ARRAY_SPACES
from rlbench.api import Unsupported, env_info, spaces, unsupported_leaves, unsupported_spaces

FEED_FORWARD = ("mlp", *CNN_POLICIES)   # mlp, cnn, cnn:impala
RECURRENT = ("mlp", "lstm")
LSTM_ACTOR_CRITICS = ("impala", "seed")   # the actor-critic learners that train `lstm` as a recurrent network
# the learners whose buffers hold a Dict or Tuple observation: one buffer per part (procs.obs_specs and
# procs.obs_arrays, or torch tensors in cleanrl-ppo; a replay field per part in apex and r2d2), their network reading
# the parts as one flat input (nets.net_input, nets.obs_columns)
DICT_LEARNERS = ("impala", "seed", "cleanrl-ppo", "a3c", "ga3c", "ddp", "rlpyt-sync", "rlpyt-async", "apex", "r2d2")
# the learners that take a Dict of array parts as SB3's MultiInputPolicy does (CombinedExtractor: a CNN per image,
# the rest flattened), and no Tuple and nothing nested (SB3's check_for_nested_spaces)
SB3_DICT_LEARNERS = ("sb3-ppo",)
STRUCTURED = ("Dict", "Tuple")


def obs_reason(name: str, workload, act: tuple):
    """The reason learner `name` cannot carry the workload's observations or actions (`act`: the action spaces it
    samples), or None; cheap (the user's env's spaces are built once per process). A Box everywhere; a Dict or
    Tuple of array parts (Box, Discrete, MultiDiscrete, MultiBinary, at any depth) in DICT_LEARNERS; a Dict of
    array parts in SB3_DICT_LEARNERS; the others' refusal names the learners that carry them."""
    if name in DICT_LEARNERS:
        return (unsupported_spaces(workload, name, obs=("Box", *STRUCTURED), act=act)
                or unsupported_leaves(workload, name, carries=ARRAY_SPACES))
    if name in SB3_DICT_LEARNERS:
        reason = unsupported_spaces(workload, name, obs=("Box", "Dict"), act=act)
        if reason is not None and reason.startswith("Tuple observations"):
            return reason + f" (SB3's policies take no Tuple observations; {_carriers()})"
        return reason or sb3_dict_reason(workload, name)
    reason = unsupported_spaces(workload, name, obs=("Box",), act=act)
    if reason is not None and reason.split(" ", 1)[0] in STRUCTURED:
        reason += f" ({_carriers()})"
    return reason


def _carriers() -> str:
    return f"{', '.join(DICT_LEARNERS[:-1])} and {DICT_LEARNERS[-1]} carry Dict and Tuple observations"


def sb3_dict_reason(workload, name: str):
    """The reason SB3's MultiInputPolicy cannot take the workload's Dict observation, or None (also for any other
    space): each part must be an array (Box, Discrete, MultiDiscrete, MultiBinary; no Dict or Tuple inside, which
    SB3 refuses), and a part SB3 takes for an image (a uint8 Box of rank 3 in [0, 255]) at least 36x36, the
    smallest its NatureCNN takes. Cheap: the user's env's spaces are built once per process."""
    if not env_info(workload.env_id).probed:
        return None
    space = spaces(workload.env_id, workload.env_kwargs)[0]
    if type(space).__name__ != "Dict":
        return None
    for key, part in space.spaces.items():
        kind = type(part).__name__
        if kind in STRUCTURED:
            return (f"a {kind} inside a Dict observation (at {key}): {name}'s MultiInputPolicy takes a Dict of "
                    "Box, Discrete, MultiDiscrete, MultiBinary parts, nothing nested")
        if kind not in ARRAY_SPACES:
            return (f"{kind} observations (at {key}): {name}'s MultiInputPolicy takes a Dict of Box, Discrete, "
                    "MultiDiscrete, MultiBinary parts only")
    for key, part in space.spaces.items():   # every part an array: its images must fit the CNN
        if sb3_image(part):
            _, height, width, _ = image_layout(part.shape)
            if min(height, width) < MIN_SIDE["nature"]:
                return (f"image '{key}' of {height}x{width}: {name}'s MultiInputPolicy puts SB3's NatureCNN on it, "
                        f"which needs at least {MIN_SIDE['nature']}x{MIN_SIDE['nature']}")
    return None


def sb3_image(space) -> bool:
    """Whether SB3 takes this part for an image (its is_image_space): a uint8 Box of rank 3 with bounds 0 and 255."""
    return (type(space).__name__ == "Box" and len(space.shape) == 3 and space.dtype == np.uint8
            and bool(np.all(space.low == 0)) and bool(np.all(space.high == 255)))


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
