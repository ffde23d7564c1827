"""The torch networks, described before torch is imported: the torsos every policy and learner shares
(an MLP, the Nature DQN CNN, the IMPALA ResNet, with an LSTM on top for `lstm`), the `mlp` policy's
widths and the actor-critic the torch learners train. Parameter counts are arithmetic here because
shared memory for parameters is made before the workers fork, and a process that forks must not have
touched torch yet. torch itself is imported only inside the builders.

A torso takes the observation flattened and scaled (`flat_obs`, `obs_scale`), as every learner already
batches it, and restores the frame's shape itself: so a CNN plugs in wherever an MLP did.
"""
import math
from dataclasses import dataclass

import numpy as np

from rlbench.api import Unsupported

NATURE = ((32, 8, 4), (64, 4, 2), (64, 3, 1))  # (channels, kernel, stride): Mnih et al. 2015
NATURE_OUT = 512
IMPALA_CHANNELS = (16, 32, 32)                 # Espeholt et al. 2018, the "deep" network
IMPALA_OUT = 256
CNN_POLICIES = {"cnn": "nature", "cnn:impala": "impala"}


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


def dense_params(widths) -> int:
    """Parameters (weights and biases) of Linear layers of these widths in a row."""
    return sum(a * b + b for a, b in zip(widths[:-1], widths[1:]))


def conv_params(c_in: int, c_out: int, kernel: int) -> int:
    return c_in * c_out * kernel * kernel + c_out


def lstm_params(inputs: int, units: int) -> int:
    """torch.nn.LSTMCell: four gates, each with input and recurrent weights and two biases."""
    return 4 * units * (inputs + units) + 8 * units


def frame_layout(observation_space):
    """(channels, height, width, 'chw' or 'hwc') of stacked frames, or None when the observation is not
    one 3-D image: 4x84x84 as EnvPool and gymnasium's FrameStackObservation give them, 84x84x4 as
    CleanRL's Atari wrappers do. The channel axis is the shorter of the two ends (a tie reads as CHW)."""
    shape = getattr(observation_space, "shape", None)
    if getattr(observation_space, "spaces", None) is not None or shape is None or len(shape) != 3:
        return None
    if shape[0] <= shape[2]:
        return shape[0], shape[1], shape[2], "chw"
    return shape[2], shape[0], shape[1], "hwc"


def nature_sizes(height: int, width: int):
    """The feature map after each of the Nature CNN's convolutions (84x84 -> 20, 9, 7)."""
    sizes = []
    for _, kernel, stride in NATURE:
        height, width = (height - kernel) // stride + 1, (width - kernel) // stride + 1
        sizes.append((height, width))
    return sizes


def impala_size(side: int) -> int:
    """A side after the IMPALA ResNet's three max-pools (3x3, stride 2, padding 1): 84 -> 42, 21, 11."""
    for _ in IMPALA_CHANNELS:
        side = (side - 1) // 2 + 1
    return side


@dataclass(frozen=True)
class Torso:
    """What turns one flattened observation into features: `kind` mlp (the `hidden` widths, tanh), nature or
    impala (a CNN on frames of `frame` = (channels, height, width, layout)), each optionally topped by an
    LSTM of `lstm` units (0: none)."""
    kind: str
    inputs: int
    hidden: tuple = ()
    frame: tuple = None
    lstm: int = 0

    @property
    def feed_width(self) -> int:
        """Features out of the feed-forward part."""
        if self.kind == "nature":
            return NATURE_OUT
        if self.kind == "impala":
            return IMPALA_OUT
        return self.hidden[-1] if self.hidden else self.inputs

    @property
    def width(self) -> int:
        return self.lstm or self.feed_width

    @property
    def params(self) -> int:
        channels, height, width, _ = self.frame or (0, 0, 0, "")
        if self.kind == "nature":
            convs, c_in = 0, channels
            for c_out, kernel, _ in NATURE:
                convs, c_in = convs + conv_params(c_in, c_out, kernel), c_out
            h, w = nature_sizes(height, width)[-1]
            feed = convs + dense_params([c_in * h * w, NATURE_OUT])
        elif self.kind == "impala":
            feed, c_in = 0, channels
            for c_out in IMPALA_CHANNELS:
                feed += conv_params(c_in, c_out, 3) + 4 * conv_params(c_out, c_out, 3)  # stem + 2 blocks of 2
                c_in = c_out
            feed += dense_params([c_in * impala_size(height) * impala_size(width), IMPALA_OUT])
        else:
            feed = dense_params([self.inputs, *self.hidden])
        return feed + (lstm_params(self.feed_width, self.lstm) if self.lstm else 0)

    def build(self):
        """The torch module: [batch, inputs] floats -> [batch, feed_width] features (the LSTM, which needs
        its state, is built apart by `recurrent_cell`)."""
        import torch
        nn = torch.nn
        if self.kind == "mlp":
            layers, size = [], self.inputs
            for h in self.hidden:
                layers += [nn.Linear(size, h), nn.Tanh()]
                size = h
            return nn.Sequential(*layers)
        channels, height, width, layout = self.frame
        shape = (channels, height, width) if layout == "chw" else (height, width, channels)
        if self.kind == "nature":
            layers, c_in = [], channels
            for c_out, kernel, stride in NATURE:
                layers += [nn.Conv2d(c_in, c_out, kernel, stride), nn.ReLU()]
                c_in = c_out
            h, w = nature_sizes(height, width)[-1]
            body = nn.Sequential(*layers, nn.Flatten(), nn.Linear(c_in * h * w, NATURE_OUT), nn.ReLU())
        else:
            body = impala_resnet(nn, channels, impala_size(height) * impala_size(width))
        return Frames(nn, shape, layout == "hwc", body)

    def recurrent_cell(self):
        import torch
        return torch.nn.LSTMCell(self.feed_width, self.lstm)


def Frames(nn, shape, channels_last: bool, body):
    """Flat observations back into [batch, C, H, W] frames before the convolutions."""

    class FramesModule(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = body

        def forward(self, x):
            x = x.reshape(len(x), *shape)
            return self.body(x.permute(0, 3, 1, 2) if channels_last else x)

    return FramesModule()


def impala_resnet(nn, channels: int, cells: int):
    """The IMPALA paper's deep network: per stack a 3x3 conv, a 3x3 max-pool (stride 2) and two residual
    blocks of two 3x3 convs; then ReLU, a 256-wide layer and ReLU."""

    class Residual(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv0, self.conv1 = nn.Conv2d(c, c, 3, padding=1), nn.Conv2d(c, c, 3, padding=1)

        def forward(self, x):
            return x + self.conv1(nn.functional.relu(self.conv0(nn.functional.relu(x))))

    layers, c_in = [], channels
    for c_out in IMPALA_CHANNELS:
        layers += [nn.Conv2d(c_in, c_out, 3, padding=1), nn.MaxPool2d(3, 2, padding=1), Residual(c_out),
                   Residual(c_out)]
        c_in = c_out
    return nn.Sequential(*layers, nn.ReLU(), nn.Flatten(), nn.Linear(c_in * cells, IMPALA_OUT), nn.ReLU())


def torso_of(policy, observation_space) -> Torso:
    """The torso of the workload's policy (a PolicySpec) on this observation: `cnn` and `cnn:impala` need
    frames, `lstm` puts its LSTM (of hidden[-1] units) on the Nature CNN for frames or on an MLP of the
    other hidden sizes; every other policy (mlp, random, a user's) gives a learner its MLP of `hidden`."""
    inputs, frame = obs_size(observation_space), frame_layout(observation_space)
    kind = CNN_POLICIES.get(policy.name)
    if policy.name == "lstm":
        if frame is not None and _fits(frame, "nature"):
            return Torso("nature", inputs, frame=frame, lstm=policy.hidden[-1])
        return Torso("mlp", inputs, tuple(policy.hidden[:-1]), lstm=policy.hidden[-1])
    if kind is None:
        return Torso("mlp", inputs, tuple(policy.hidden))
    if frame is None or not _fits(frame, kind):
        raise Unsupported(f"policy {policy.name} needs image observations of at least 36x36 (stacked frames "
                          f"CxHxW or HxWxC); got {_space_text(observation_space)}")
    return Torso(kind, inputs, frame=frame)


def _fits(frame, kind) -> bool:
    """Whether the CNN's layers leave at least one cell of the frame (the Nature CNN needs 36x36)."""
    _, height, width, _ = frame
    return kind == "impala" or min(nature_sizes(height, width)[-1]) >= 1


def _space_text(space) -> str:
    shape = getattr(space, "shape", None)
    return f"{type(space).__name__}{tuple(shape) if shape is not None else ''}"


def head_size(action_space) -> int:
    """One output per action (a Discrete space) or per action dimension (a Box)."""
    return int(action_space.n) if hasattr(action_space, "n") else math.prod(action_space.shape)


def policy_widths(hidden, observation_space, action_space) -> list:
    """Layer widths of the `mlp` policy: the observation (flattened, every part of a Dict or Tuple),
    the hidden sizes, then the head."""
    return [obs_size(observation_space), *hidden, head_size(action_space)]


def policy_params(policy, observation_space, action_space) -> int:
    """Length of the flat parameter vector of the workload's policy (a PolicySpec; 0 if it has none), known
    before any worker starts: `mlp`'s layers, or a torso (cnn, cnn:impala, lstm) and its head."""
    if policy.name == "mlp":
        return dense_params(policy_widths(policy.hidden, observation_space, action_space))
    if policy.name in (*CNN_POLICIES, "lstm"):
        torso = torso_of(policy, observation_space)
        return torso.params + dense_params([torso.width, head_size(action_space)])
    return 0


def actor_critic_params(torso: Torso, n_actions: int) -> int:
    """Parameters of `actor_critic(torso, n_actions)`."""
    return torso.params + dense_params([torso.width, n_actions]) + dense_params([torso.width, 1])


def actor_critic(torso: Torso, n_actions: int):
    """The torso with a policy-logits head and a value head (feed-forward torsos only: the recurrent
    learner, r2d2, builds its own)."""
    import torch
    if torso.lstm:
        raise Unsupported("policy lstm: this learner trains a feed-forward network (impala, seed and r2d2 train "
                          "recurrent networks)")

    class ActorCritic(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.torso = torso.build()
            self.pi = torch.nn.Linear(torso.width, n_actions)
            self.v = torch.nn.Linear(torso.width, 1)

        def forward(self, x):
            z = self.torso(x)
            return self.pi(z), self.v(z).squeeze(-1)

    return ActorCritic()


def recurrent_actor_critic_params(torso: Torso, n_actions: int) -> int:
    """Parameters of `recurrent_actor_critic(torso, n_actions)`: the torso (its LSTM included) and the two heads
    on the LSTM's output, which is `actor_critic_params`'s sum for a torso with an LSTM."""
    return actor_critic_params(torso, n_actions)


def recurrent_actor_critic(torso: Torso, n_actions: int):
    """The recurrent actor-critic impala and seed train for `lstm` (the IMPALA paper's LSTM agent, SEED RL's
    recurrent agents): the torso's feed-forward part (the Nature CNN on frames, else its tanh MLP), an LSTM cell of
    torso.lstm units, a policy-logits head and a value head on the cell's output.

    `step(x [B, inputs], first [B] bool, (h, c))` acts: the state of every row whose `first` is set (its episode
    starts with this observation) is zeroed first; it returns logits [B, A], values [B] and the new state.
    `unroll(x [T, B, ...], first [T, B], (h, c))` re-runs a stored trajectory from the state at its start, zeroing
    the state before every step whose `first` is set, and returns logits [T, B, A], values [T, B] and the state
    after the last step. `initial_state(batch, device)` is the zero state."""
    import torch
    if not torso.lstm:
        raise ValueError("recurrent_actor_critic needs a torso with an LSTM (policy lstm)")

    class RecurrentActorCritic(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.units = torso.lstm
            self.torso = torso.build()
            self.cell = torso.recurrent_cell()
            self.pi = torch.nn.Linear(torso.width, n_actions)
            self.v = torch.nn.Linear(torso.width, 1)

        def initial_state(self, batch: int, device=None):
            z = torch.zeros((batch, self.units), device=device)
            return z, z.clone()

        def step(self, x, first, state):
            h, c = state
            keep = (~first).to(h.dtype)[:, None]
            h, c = self.cell(self.torso(x), (h * keep, c * keep))
            return self.pi(h), self.v(h).squeeze(-1), (h, c)

        def unroll(self, x, first, state):
            T, B = first.shape
            z = self.torso(x.reshape(T * B, -1)).reshape(T, B, -1)  # a CNN takes one batch of frames
            resets = first.any(1).tolist()
            h, c = state
            outs = []
            for t in range(T):
                if resets[t]:
                    keep = (~first[t]).to(z.dtype)[:, None]
                    h, c = h * keep, c * keep
                h, c = self.cell(z[t], (h, c))
                outs.append(h)
            out = torch.stack(outs)
            return self.pi(out), self.v(out).squeeze(-1), (h, c)

    return RecurrentActorCritic()


def learner_torch(policy, seed: int):
    """torch for a learner process of `policy` (its threads, seeded): (torch, its device); Unsupported when
    the policy's device is CUDA and there is none."""
    import torch
    if policy.device.startswith("cuda") and not torch.cuda.is_available():
        raise Unsupported("no CUDA device")
    torch.set_num_threads(policy.threads)
    torch.manual_seed(seed)
    return torch, torch.device(policy.device)
