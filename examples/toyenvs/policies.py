"""Policy factories of the kind a user brings: `--policy toyenvs.policies:linear` (numpy) or
`--policy toyenvs.policies:torch_mlp` (torch, CPU or CUDA). rlbench calls the factory once with the
single-env observation and action spaces and the batch size; what it returns maps a batch of
observations to a batch of actions, and its time is the policy's share of every step."""
import gymnasium as gym
import numpy as np


def _features(observation_space):
    """obs batch -> (batch, features) float32, for any of the corridor's observation spaces; text (a batch of
    str, as vector envs batch a Text or custom str space) gives no features."""
    def flat(batch):
        if isinstance(batch, dict):
            return np.concatenate([flat(batch[k]) for k in sorted(batch)], axis=1)
        if isinstance(batch, tuple) and batch and isinstance(batch[0], str) or \
                isinstance(batch, np.ndarray) and batch.dtype.kind in "US":
            return np.zeros((len(batch), 0), np.float32)
        if isinstance(batch, tuple):
            return np.concatenate([flat(b) for b in batch], axis=1)
        b = np.asarray(batch, np.float32)
        return b.reshape(len(b), -1)
    return flat


def _to_actions(action_space):
    """(batch, outputs) scores -> a batch of actions in the action space."""
    if isinstance(action_space, gym.spaces.Discrete):
        return action_space.n, lambda s: s.argmax(axis=1) + action_space.start
    if isinstance(action_space, gym.spaces.Box):
        size = int(np.prod(action_space.shape))
        return size, lambda s: np.tanh(s).reshape(len(s), *action_space.shape).astype(action_space.dtype)
    if isinstance(action_space, gym.spaces.MultiBinary):
        size = int(np.prod(action_space.shape))
        return size, lambda s: (s > 0).astype(np.int8).reshape(len(s), *action_space.shape)
    if isinstance(action_space, gym.spaces.MultiDiscrete):
        nvec = action_space.nvec.reshape(-1)
        cuts = np.cumsum(nvec)[:-1]
        return int(nvec.sum()), lambda s: np.stack([p.argmax(axis=1) for p in np.split(s, cuts, axis=1)], axis=1)
    if isinstance(action_space, (gym.spaces.Tuple, gym.spaces.Dict)):   # one tuple or dict per env, as an env takes
        keys = list(action_space.spaces) if isinstance(action_space, gym.spaces.Dict) else None
        parts = [_to_actions(part) for part in (action_space.spaces.values() if keys else action_space.spaces)]
        cuts = np.cumsum([size for size, _ in parts])[:-1]

        def structured(s):
            chunks = [to(c) for (_, to), c in zip(parts, np.split(s, cuts, axis=1))]
            out = np.empty(len(s), dtype=object)
            for i in range(len(s)):
                out[i] = dict(zip(keys, (c[i] for c in chunks))) if keys else tuple(c[i] for c in chunks)
            return out
        return int(sum(size for size, _ in parts)), structured
    raise ValueError(f"no actions for {action_space}")


def linear(observation_space, action_space, batch_size):
    """A fixed random linear map in numpy: cheap, so the env's own cost dominates. Each env's action depends on
    its own observation only, to the last bit, whatever the batch it comes in (a strategy that splits the batch
    over workers gives the same actions): products summed over the inputs, not a matmul, whose BLAS kernel and
    so its rounding change with the batch's size (OpenBLAS on an AMD EPYC: 78% of float32 rows computed in
    batches of 1-16 differ in their last bits from the same rows computed one at a time)."""
    flat = _features(observation_space)
    outputs, act = _to_actions(action_space)
    inputs = flat(_one(observation_space)).shape[1]
    weights = np.random.default_rng(0).standard_normal((inputs, outputs)).astype(np.float32)
    return lambda obs: act((flat(obs)[:, :, None] * weights).sum(axis=1))


def torch_mlp(observation_space, action_space, batch_size, hidden: int = 256, device: str = "cpu"):
    """A two-layer torch MLP under no_grad: inference costs what a real network costs."""
    import torch
    flat = _features(observation_space)
    outputs, act = _to_actions(action_space)
    inputs = flat(_one(observation_space)).shape[1]
    net = torch.nn.Sequential(torch.nn.Linear(inputs, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, outputs))
    net = net.to(device).eval()

    @torch.no_grad()
    def policy(obs):
        x = torch.as_tensor(flat(obs), device=device)
        return act(net(x).cpu().numpy())
    return policy


def _one(space):
    """A batch of one sample of the space, batched as vector envs batch it."""
    return gym.vector.utils.concatenate(space, [space.sample()], gym.vector.utils.create_empty_array(space, 1))


def recurrent_linear(observation_space, action_space, batch_size, decay: float = 0.5):
    """A recurrent policy as a user writes one: `act.recurrent = True`, then rlbench calls it as
    `act(obs, starts, env_ids)`. Each env's state is a decayed sum of its observations since its episode began:
    zeroed where `starts` marks an episode's first observation; `env_ids` names the envs an asynchronous batch
    holds (None: the first len(obs)). An env's action depends on its own history only, to the last bit (products
    summed, as `linear`), whatever batches and workers its observations come through."""
    flat = _features(observation_space)
    outputs, act = _to_actions(action_space)
    inputs = flat(_one(observation_space)).shape[1]
    weights = np.random.default_rng(1).standard_normal((inputs, outputs))
    state = np.zeros((batch_size, inputs))

    def policy(obs, starts, env_ids):
        nonlocal state
        x = flat(obs).astype(np.float64)
        ids = np.arange(len(x)) if env_ids is None else np.asarray(env_ids, dtype=np.int64)
        if len(ids) and ids.max() >= len(state):   # an env id beyond the batch size: rows as ids are seen
            state = np.concatenate([state, np.zeros((int(ids.max()) + 1 - len(state), inputs))])
        h = state[ids]
        if starts is not None:
            h[np.asarray(starts, dtype=bool)] = 0.0
        h = decay * h + x
        state[ids] = h
        return act((h[:, :, None] * weights).sum(axis=1))
    policy.recurrent = True
    return policy
