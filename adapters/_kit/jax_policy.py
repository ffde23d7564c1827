"""Policies in JAX, to run inside a compiled program: a tanh MLP (init and apply) and the actor of
the workload's policy (random or mlp) for a discrete or a bounded continuous action space.
"""
import math


def mlp_init(jax, key, sizes, out_scale=1.0):
    """[(W, b), ...] for layer sizes; W ~ N(0, 1/fan_in) (the last layer times out_scale), b = 0."""
    import jax.numpy as jnp
    params = []
    keys = jax.random.split(key, len(sizes) - 1)
    for i, (k, a, b) in enumerate(zip(keys, sizes[:-1], sizes[1:])):
        scale = (out_scale if i == len(sizes) - 2 else 1.0) / math.sqrt(a)
        params.append((jax.random.normal(k, (a, b), jnp.float32) * scale, jnp.zeros((b,), jnp.float32)))
    return params


def mlp_apply(jax, params, x):
    import jax.numpy as jnp
    x = x.reshape(x.shape[0], -1).astype(jnp.float32)
    for w, b in params[:-1]:
        x = jnp.tanh(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def make_actor(jax, workload, obs_shape, action):
    """(params, act(params, obs, key, legal=None) -> actions) for the workload's policy; `action` is
    ("discrete", n) or ("box", low, high) with finite bounds; `legal` (bool, batch x n) keeps a discrete
    choice among the legal actions."""
    import jax.numpy as jnp
    key = jax.random.PRNGKey(workload.seed)
    discrete = action[0] == "discrete"
    n_out = action[1] if discrete else int(math.prod(action[1].shape))
    if workload.policy.name == "random":
        if discrete:
            def uniform(params, obs, k, legal=None):
                if legal is None:
                    return jax.random.randint(k, (obs.shape[0],), 0, n_out, jnp.int32)
                return jax.random.categorical(k, masked(jax, jnp.zeros(legal.shape, jnp.float32), legal)).astype(
                    jnp.int32)
            return (), uniform
        low, high = jnp.asarray(action[1]), jnp.asarray(action[2])
        return (), lambda params, obs, k, legal=None: jax.random.uniform(k, (obs.shape[0], *low.shape), low.dtype,
                                                                         low, high)
    params = mlp_init(jax, key, [int(math.prod(obs_shape)), *workload.policy.hidden, n_out])
    if discrete:
        return params, lambda p, obs, k, legal=None: jnp.argmax(masked(jax, mlp_apply(jax, p, obs), legal),
                                                                -1).astype(jnp.int32)
    low, high = jnp.asarray(action[1]), jnp.asarray(action[2])

    def act(p, obs, k, legal=None):
        out = jnp.tanh(mlp_apply(jax, p, obs)).reshape(obs.shape[0], *low.shape)
        return (low + (out + 1) * 0.5 * (high - low)).astype(low.dtype)
    return params, act


def masked(jax, logits, legal):
    """Logits with the illegal actions' at the float's lowest (never chosen, softmax weight 0); as is when
    `legal` is None."""
    import jax.numpy as jnp
    if legal is None:
        return logits
    return jnp.where(legal, logits, jnp.finfo(logits.dtype).min)
