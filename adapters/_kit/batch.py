"""Batches of observations for any observation space, held as gymnasium's vector envs hold them: one array
(num_envs, *shape) for Box, Discrete, MultiDiscrete and MultiBinary, a dict of batches for a Dict space, a tuple
for a Tuple space. Adapters that gather observations from several places build, join, index and write their
batches with these (on a plain array, the numpy operation itself), so the policy sees what `serial` hands it.
`spaces_reason` is the check of an adapter whose framework lays out one array per part of a Dict.
"""
import numpy as np

from rlbench.api import env_info, spaces, unsupported_spaces


def dict_parts(space):
    """The kinds of the parts of a Dict space ("Box", "Discrete", "Tuple", ...), nested Dicts opened."""
    for part in space.spaces.values():
        if type(part).__name__ == "Dict":
            yield from dict_parts(part)
        else:
            yield type(part).__name__


def spaces_reason(workload, who: str, obs: tuple, parts: tuple, act: tuple = None):
    """`unsupported_spaces(workload, who, obs, act)`, and for a Dict observation its parts too: None when
    every part is of a kind in `parts`, else the reason naming the first that is not. Cheap: the user's
    env's spaces are built once per process."""
    reason = unsupported_spaces(workload, who, obs=obs)   # the observations first, the actions last
    if reason is None and env_info(workload.env_id).probed:
        space = spaces(workload.env_id, workload.env_kwargs)[0]
        if type(space).__name__ == "Dict":
            bad = next((kind for kind in dict_parts(space) if kind not in parts), None)
            if bad is not None:
                return f"{bad} observations inside a Dict: {who} carries Dicts of {', '.join(parts)} only"
    if reason is None and act:
        reason = unsupported_spaces(workload, who, obs=obs, act=act)
    return reason


def stack(space, items, out=None):
    """One batch from single-env observations of `space` (gymnasium.vector.utils.concatenate), written into
    `out` when given."""
    from gymnasium.vector.utils import concatenate, create_empty_array
    if out is None:
        out = create_empty_array(space, len(items))
    return concatenate(space, items, out)


def unstacker(space, n: int):
    """batch -> one item per env from n envs' batch of `space`, the inverse of `stack`
    (gymnasium.vector.utils.iterate): a Tuple space's batch gives one tuple per env. The batched space is built
    once, here, not per call."""
    from gymnasium.vector.utils import batch_space, iterate
    batched = batch_space(space, n)
    return lambda batch: list(iterate(batched, batch))


def vector_actions(action_space):
    """How one action per env, as rlbench's policies give a Dict or Tuple action space's (one dict or tuple per env:
    what `serial` hands each env's step, and what a multi-agent wrapper asserts), becomes what gymnasium's vector
    envs take: a dict or tuple of arrays, part by part (`stack`). None for an array space: nothing to do."""
    if type(action_space).__name__ not in ("Dict", "Tuple"):
        return None
    return lambda actions: stack(action_space, list(actions))


class VectorActions:
    """A policy whose actions are batched part by part for gymnasium's vector envs (`vector_actions`)."""

    def __init__(self, policy, to_batch):
        self.policy, self.to_batch, self.recurrent = policy, to_batch, policy.recurrent

    def __call__(self, *args):
        return self.to_batch(self.policy(*args))


def for_vector_env(policy, action_space):
    """The policy as gymnasium's vector envs take its actions: itself for an array space (no call added to the
    timed step), VectorActions for a Dict or Tuple."""
    to_batch = vector_actions(action_space)
    return policy if to_batch is None else VectorActions(policy, to_batch)


ARRAY_SPACES = ("Box", "Discrete", "MultiDiscrete", "MultiBinary")  # batched as one array
DYNAMIC_SPACES = ("Sequence", "Graph", "OneOf")  # observations whose shape varies: they do not stack


def join(batches, space=None, axis: int = 0):
    """Batches one after the other, along the env axis: np.concatenate of every array part; a part of a
    space that is no array (Text, Sequence, Graph, a custom Space: gymnasium batches it as a tuple of
    observations) joined as tuples. The space tells such a tuple from a Tuple space's batch; without it,
    tuples are taken for Tuple batches. `axis`: the arrays' axis to join along (a learner's [T, envs, ...]
    rollouts side by side: 1)."""
    first = batches[0]
    kind = type(space).__name__ if space is not None else None
    if isinstance(first, dict):
        return {key: join([b[key] for b in batches], space[key] if space is not None else None, axis)
                for key in first}
    if isinstance(first, tuple) and kind in (None, "Tuple"):
        return tuple(join([b[i] for b in batches], space[i] if space is not None else None, axis)
                     for i in range(len(first)))
    if kind is not None and kind not in ARRAY_SPACES:
        return tuple(item for b in batches for item in b)
    return np.concatenate(batches, axis)


def _items(space) -> bool:
    """Whether a batch of this space is a tuple of observations (no array: Text, Sequence, a custom Space)."""
    return space is not None and type(space).__name__ not in (*ARRAY_SPACES, "Dict", "Tuple")


def take(batch, index, space=None):
    """batch[index] of every part (a view where numpy gives one: a slice); a part that is a tuple of
    observations (the space says which) gives the tuple of those picked."""
    if isinstance(batch, dict):
        return {key: take(part, index, space[key] if space is not None else None) for key, part in batch.items()}
    if _items(space):
        return tuple(batch[i] for i in np.arange(len(batch))[index])
    if isinstance(batch, tuple):
        return tuple(take(part, index, space[i] if space is not None else None) for i, part in enumerate(batch))
    return batch[index]


def put(batch, index, value, space=None):
    """batch[index] = value for every part, in place where a part is an array; returns the batch, since a
    part that is a tuple of observations (the space says which) is replaced by a new tuple. `value` has the
    batch's structure (a batch, or one observation when index picks one env)."""
    if isinstance(batch, dict):
        for key, part in batch.items():
            batch[key] = put(part, index, value[key], space[key] if space is not None else None)
        return batch
    if _items(space):
        items, picked = list(batch), np.arange(len(batch))[index]
        for j, i in enumerate(np.atleast_1d(picked)):
            items[i] = value[j] if np.ndim(picked) else value
        return tuple(items)
    if isinstance(batch, tuple):
        return tuple(put(part, index, v, space[i] if space is not None else None)
                     for i, (part, v) in enumerate(zip(batch, value)))
    batch[index] = value
    return batch
