"""Policies in JAX, to run inside a compiled program: a tanh MLP (init and apply) and the actor of
the workload's policy (random, mlp, or a CNN of adapters/_kit/jax_cnn.py: cnn, cnn:impala) for a discrete, a
multi-discrete or a bounded continuous action space.
"""
import math

from adapters._kit.jax_cnn import CNN_POLICIES, cnn_network


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


def head_size(action) -> int:
    """The actor's outputs for an action space: a logit per choice (a multi-discrete space's components padded
    to its largest), a number per box entry."""
    if action[0] == "discrete":
        return action[1]
    if action[0] == "multidiscrete":
        return int(action[1].size * action[1].max())
    return int(math.prod(action[1].shape))


def factored_logits(jax, out, nvec, legal=None):
    """A multi-discrete space's logits, (batch, components, largest count): each component's past its own count
    at the float's lowest, and so each illegal choice where `legal` (the same shape) says."""
    import jax.numpy as jnp
    import numpy as np
    k, m = nvec.size, int(nvec.max())
    logits = out.reshape(out.shape[0], k, m)
    valid = jnp.asarray(np.arange(m)[None, :] < nvec.reshape(-1, 1))
    return masked(jax, logits, valid if legal is None else valid & legal)


def factored_actions(choice, action):
    """Each component's choice (batch, components) as the env takes it: from its lowest value, in the space's
    shape and dtype."""
    nvec, low = action[1], action[2]
    return (choice.reshape(choice.shape[0], *nvec.shape) + low).astype(nvec.dtype)


def greedy_actions(jax, out, action, legal=None):
    """The actor's greedy choice from its outputs `out` for a discrete or a multi-discrete space (each
    component's), among the legal actions where `legal` is given."""
    import jax.numpy as jnp
    if action[0] == "multidiscrete":
        return factored_actions(jnp.argmax(factored_logits(jax, out, action[1], legal), -1), action)
    return jnp.argmax(masked(jax, out, legal), -1).astype(jnp.int32)


def make_actor(jax, workload, obs_shape, action):
    """(params, act(params, obs, key, legal=None) -> actions) for the workload's policy on inputs of `obs_shape`
    (one env's: `flat`'s length for mlp, the image's own shape for a CNN, a linear head on its features); `action` is
    ("discrete", n), ("multidiscrete", nvec, low) (each component's count and lowest value, in the action's
    shape and dtype) or ("box", low, high) with finite bounds; `legal` (bool, batch x n; a multi-discrete
    space's batch x components x largest count) keeps a choice among the legal actions."""
    import jax.numpy as jnp
    key = jax.random.PRNGKey(workload.seed)
    discrete = action[0] == "discrete"
    n_out = head_size(action)
    if workload.policy.name == "random":
        if action[0] == "multidiscrete":   # uniform over each component's legal choices
            def uniform_each(params, obs, k, legal=None):
                zeros = jnp.zeros((obs.shape[0], n_out), jnp.float32)
                return factored_actions(jax.random.categorical(k, factored_logits(jax, zeros, action[1], legal)),
                                        action)
            return (), uniform_each
        if discrete:
            def uniform(params, obs, k, legal=None):
                if legal is None:
                    return jax.random.randint(k, (obs.shape[0],), 0, n_out, jnp.int32)
                return jax.random.categorical(k, masked(jax, jnp.zeros(legal.shape, jnp.float32), legal)).astype(
                    jnp.int32)
            return (), uniform
        low, high = jnp.asarray(action[1]), jnp.asarray(action[2])
        if jnp.issubdtype(low.dtype, jnp.integer):   # integers in bounds, too many for a choice each
            return (), lambda params, obs, k, legal=None: jax.random.randint(k, (obs.shape[0], *low.shape), low,
                                                                             high + 1, low.dtype)
        return (), lambda params, obs, k, legal=None: jax.random.uniform(k, (obs.shape[0], *low.shape), low.dtype,
                                                                         low, high)
    if workload.policy.name in CNN_POLICIES:
        init, apply = cnn_network(jax, workload.policy.name, obs_shape, (("actor", n_out, 1.0),))
        params, outputs = init(key), lambda p, obs: apply(p, obs)[0]
    else:
        params = mlp_init(jax, key, [int(math.prod(obs_shape)), *workload.policy.hidden, n_out])
        outputs = lambda p, obs: mlp_apply(jax, p, obs)   # noqa: E731
    if action[0] != "box":
        return params, lambda p, obs, k, legal=None: greedy_actions(jax, outputs(p, obs), action, legal)
    low, high = jnp.asarray(action[1]), jnp.asarray(action[2])

    def act(p, obs, k, legal=None):
        out = jnp.tanh(outputs(p, obs)).reshape(obs.shape[0], *low.shape)
        return (low + (out + 1) * 0.5 * (high - low)).astype(low.dtype)
    return params, act


def masked(jax, logits, legal):
    """Logits with the illegal actions' at the float's lowest (never chosen, softmax weight 0); as is when
    `legal` is None."""
    import jax.numpy as jnp
    if legal is None:
        return logits
    return jnp.where(legal, logits, jnp.finfo(logits.dtype).min)
