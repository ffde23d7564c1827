"""The CNN policies in JAX (flax.linen), for pixel JAX envs under gymnax and purejaxrl-ppo: `cnn` is the Nature
DQN CNN, `cnn:impala` the IMPALA ResNet, the layers of adapters/_kit/nets.py's torch ones (the same sizes, so the
same parameter count on the same frame), the same layout rule (`image_layout`: the channel axis is the shorter of
the two ends, a tie reads as CHW) and the same refusal of what they cannot take. The observation reaches them in
its own shape, HxWxC or CxHxW (CxHxW transposed to flax's NHWC), uint8 scaled by 1/255, as CleanRL's JAX Atari PPO
feeds its network; weights orthogonal (gain sqrt 2), biases zero, as there. Flax is imported inside functions.

XLA's CPU backend differentiates a convolution inside a loop (a PPO update is scans of minibatches) 13-22x slower
than outside one (jax-ml/jax#12868: in a loop body it cannot pick the layouts its fast convolution needs; on 2
cores a Nature CNN's gradient over 256 frames of 84x84x4 took 18.8 s in a loop, 1.2 s outside). `patches=True`
computes each convolution as one matrix product over its input's strided slices (im2col): the same kernels and
outputs, 0.85 s in the loop. PPO on the CPU trains through it; acting (a forward pass, fast in a loop) keeps XLA's
convolution, as does every accelerator, where im2col's copies would cost memory.
"""
import math

from adapters._kit.jax_env import flat
from adapters._kit.nets import (
    CNN_POLICIES,
    IMPALA_CHANNELS,
    IMPALA_OUT,
    MIN_SIDE,
    NATURE,
    NATURE_OUT,
    NEEDS,
    image_layout,
)
from rlbench.api import Unsupported


def cnn_refusal(policy_name: str, shape, got: str):
    """Why the policy's CNN cannot take observations of this shape (None: not one array), in one line naming the
    size needed and `got` (what the observation is); None when it can: a rank-3 image each of whose sides is at
    least the CNN's smallest (36 for the Nature CNN)."""
    refused = f"policy {policy_name} needs {NEEDS}; got {got}"
    if shape is None or len(shape) != 3:
        return refused
    _, height, width, _ = image_layout(shape)
    return refused if min(height, width) < MIN_SIDE[CNN_POLICIES[policy_name]] else None


def space_text(space) -> str:
    """An observation space in a refusal, as nets' torch refusal writes it: Box(32, 64, 3), Dict(a: Box(3,), ...);
    a structure of spaces (Jumanji's) by its type name."""
    parts = getattr(space, "spaces", None)
    if isinstance(parts, dict):
        return f"{type(space).__name__}({', '.join(f'{k}: {space_text(p)}' for k, p in parts.items())})"
    if isinstance(parts, (list, tuple)):
        return f"{type(space).__name__}({', '.join(space_text(p) for p in parts)})"
    shape = space_shape(space)
    return f"{type(space).__name__}{shape if shape is not None else ''}"


def space_shape(space):
    """The shape of an observation space that is one array (a Box, a spec), or None."""
    try:
        shape = getattr(space, "shape", None)
    except Exception:  # noqa: BLE001  (a package's property may raise anything for what it lacks)
        return None
    if getattr(space, "spaces", None) is not None or not isinstance(shape, (tuple, list)):
        return None
    return tuple(int(s) for s in shape)


def policy_input(jax, workload, env):
    """(shape of one env's policy input, to_input(batch of observations) -> what the policy takes) for the
    workload's policy on the FunctionalEnv `env`: a CNN takes the observation in its own shape (one array, batch
    first); every other policy `flat`'s float matrix. Unsupported (the planning refusal's text) when the env's
    observation, as reset gives it, is no image the CNN takes, whatever its declared space said."""
    name = workload.policy.name
    if name not in CNN_POLICIES:
        return (env.obs_dim,), lambda obs: flat(jax, obs)
    leaves = jax.tree.leaves(jax.eval_shape(env.reset, jax.random.PRNGKey(0))[0])
    shape = tuple(leaves[0].shape) if len(leaves) == 1 else None
    got = " ".join(f"{leaf.dtype}{list(leaf.shape)}" for leaf in leaves)
    reason = cnn_refusal(name, shape, got)
    if reason:
        raise Unsupported(reason)
    return shape, lambda obs: jax.tree.leaves(obs)[0]


def cnn_network(jax, policy_name: str, shape, heads, patches: bool = False):
    """(init(key) -> variables, apply(variables, obs) -> one output per head) of the policy's CNN torso on images
    of `shape` (one env's) with linear heads on its features; `heads`: (name, outputs, orthogonal init's gain) each
    (PPO's actor 0.01, critic 1, as CleanRL's). The torso's variables are `variables["params"]["torso"]`, the same
    with `patches` (each convolution an im2col matrix product: see the module's doc) as without."""
    import flax.linen as nn
    import jax.numpy as jnp
    kind = CNN_POLICIES[policy_name]
    channels_first = image_layout(shape)[3] == "chw"
    relu_gain = nn.initializers.orthogonal(math.sqrt(2))
    zeros = nn.initializers.zeros_init()

    class SlicedConv(nn.Module):
        """nn.Conv's layer (its kernel k x k x in x out and bias) as a matrix product over the k*k strided slices of
        its input, laid side by side in the kernel's (row, column, channel) order."""
        features: int
        kernel: int
        stride: int
        padding: str

        @nn.compact
        def __call__(self, x):
            k, s = self.kernel, self.stride
            weights = self.param("kernel", relu_gain, (k, k, x.shape[-1], self.features))
            bias = self.param("bias", zeros, (self.features,))
            if self.padding == "SAME":   # stride 1 here (IMPALA's 3x3): (k - 1) / 2 each side, as nn.Conv pads
                x = jnp.pad(x, ((0, 0), ((k - 1) // 2, k // 2), ((k - 1) // 2, k // 2), (0, 0)))
            rows, cols = (x.shape[1] - k) // s + 1, (x.shape[2] - k) // s + 1
            sliced = jnp.concatenate([x[:, i:i + s * (rows - 1) + 1:s, j:j + s * (cols - 1) + 1:s, :]
                                      for i in range(k) for j in range(k)], axis=-1)
            return sliced @ weights.reshape(-1, self.features) + bias

    def conv(name, features, kernel, stride=1, padding="VALID"):
        if patches:
            return SlicedConv(features, kernel, stride, padding, name=name)
        return nn.Conv(features, (kernel, kernel), (stride, stride), padding=padding, kernel_init=relu_gain,
                       bias_init=zeros, name=name)

    class Residual(nn.Module):
        @nn.compact
        def __call__(self, x):
            c = x.shape[-1]
            return x + conv("conv1", c, 3, padding="SAME")(nn.relu(conv("conv0", c, 3, padding="SAME")(nn.relu(x))))

    class Torso(nn.Module):
        """nets.cnn's layers: Nature (conv 32 8x8/4, 64 4x4/2, 64 3x3/1, dense 512) or IMPALA (per stack a 3x3
        conv, a 3x3 max-pool of stride 2 padded by 1, two residual blocks; dense 256), ReLUs between."""
        @nn.compact
        def __call__(self, x):
            x = x.astype(jnp.float32) / 255.0 if x.dtype == jnp.uint8 else x.astype(jnp.float32)
            if channels_first:
                x = jnp.transpose(x, (0, 2, 3, 1))
            if kind == "nature":
                for i, (features, kernel, stride) in enumerate(NATURE):
                    x = nn.relu(conv(f"conv{i}", features, kernel, stride)(x))
                out = NATURE_OUT
            else:
                for i, features in enumerate(IMPALA_CHANNELS):
                    x = conv(f"conv{i}", features, 3, padding="SAME")(x)
                    x = nn.max_pool(x, (3, 3), (2, 2), padding=((1, 1), (1, 1)))
                    x = Residual()(Residual()(x))
                x = nn.relu(x)
                out = IMPALA_OUT
            x = x.reshape(x.shape[0], -1)
            return nn.relu(nn.Dense(out, kernel_init=relu_gain, bias_init=zeros)(x))

    class Network(nn.Module):
        @nn.compact
        def __call__(self, x):
            z = Torso(name="torso")(x)
            return tuple(nn.Dense(size, kernel_init=nn.initializers.orthogonal(gain), bias_init=zeros, name=name)(z)
                         for name, size, gain in heads)

    network = Network()

    def init(key):
        return network.init(key, jnp.zeros((1, *shape), jnp.float32))

    return init, network.apply


def torso_params(variables) -> int:
    """Parameters of the CNN torso in `cnn_network`'s variables (nets.cnn_params' count for the torch one)."""
    import jax
    return sum(int(math.prod(leaf.shape)) for leaf in jax.tree.leaves(variables["params"]["torso"]))
