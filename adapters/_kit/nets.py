"""The torch networks, described before torch is imported: the torsos every policy and learner shares
(an MLP, the Nature DQN CNN, the IMPALA ResNet, with an LSTM on top for `lstm`), the `mlp` policy's
widths and the actor-critic the torch learners train. Parameter counts are arithmetic here because
shared memory for parameters is made before the workers fork, and a process that forks must not have
touched torch yet. torch itself is imported only inside the builders.

A torso takes the observation flattened and scaled (`flat_obs`, `obs_scale`), as every learner already
batches it, and restores the frame's shape itself: so a CNN plugs in wherever an MLP did. A Dict or Tuple
observation with image entries (a pixel screen beside game variables, as first-person shooters give) gets a CNN
per image and its other entries passed on flattened, concatenated (SB3's CombinedExtractor): `obs_entries` says
where each entry sits in the flat input, and each image is scaled in the torso, since its dtype is lost there.
"""
import math
from dataclasses import dataclass, replace

import numpy as np

from rlbench.api import Unsupported

NATURE = ((32, 8, 4), (64, 4, 2), (64, 3, 1))  # (channels, kernel, stride): Mnih et al. 2015
NATURE_OUT = 512
IMPALA_CHANNELS = (16, 32, 32)                 # Espeholt et al. 2018, the "deep" network
IMPALA_OUT = 256
CNN_POLICIES = {"cnn": "nature", "cnn:impala": "impala"}


def is_text(space) -> bool:
    """A leaf that is no array (gymnasium's Text, MiniGrid's MissionSpace: a space without a shape): no network
    input. Text is not numbers; SB3's CombinedExtractor refuses it, and a model that reads a mission brings its
    own encoding (MiniGrid's DictObservationSpaceWrapper makes it word indices), so the networks here take the
    other leaves."""
    return space is not None and getattr(space, "spaces", None) is None and getattr(space, "shape", None) is None


def _text_batch(obs) -> bool:
    """A text leaf's batch as gymnasium's vector envs give it: a tuple of strings (one string alone unbatched)."""
    return isinstance(obs, str) or (isinstance(obs, (tuple, list)) and len(obs) > 0 and isinstance(obs[0], str))


def obs_leaves(obs, space=None) -> list:
    """The arrays of a batch (or of one observation): an array alone, a Dict's values and a Tuple's items one
    after the other, nested ones opened, in the order of `space`'s keys when it is given (else the dict's own,
    which every batcher here builds from the space), the order `obs_entries` lays the flat input out in; a
    text leaf is left out (`is_text`)."""
    if is_text(space) or (space is None and _text_batch(obs)):
        return []
    if isinstance(obs, dict):
        keys = list(space.spaces) if space is not None else list(obs)
        return [leaf for k in keys for leaf in obs_leaves(obs[k], space[k] if space is not None else None)]
    if isinstance(obs, tuple):
        return [leaf for i, part in enumerate(obs)
                for leaf in obs_leaves(part, space[i] if space is not None else None)]
    return [obs]


def obs_size(observation_space) -> int:
    """Inputs of the network: the observation, flattened; a Dict or Tuple observation is its parts
    flattened one after the other (a Discrete part is one input, its index), as `flat_obs` lays it out."""
    parts = getattr(observation_space, "spaces", None)
    if parts is not None:
        return sum(obs_size(p) for p in (parts.values() if isinstance(parts, dict) else parts))
    if is_text(observation_space):
        return 0
    return math.prod(observation_space.shape)


def flat_obs(obs):
    """A batch of observations (an array, or a dict or tuple of them, as vector envs batch Dict and Tuple
    observations) as one [batch, obs_size] array: the parts flattened and joined in the space's order."""
    if isinstance(obs, (dict, tuple)):
        parts = [np.asarray(p) for p in obs_leaves(obs)]
        return np.concatenate([p.reshape(len(p), -1).astype(np.float32, copy=False) for p in parts], axis=1)
    obs = np.asarray(obs)
    return obs.reshape(len(obs), -1)


def map_obs(fn, obs):
    """`fn` of every array of a batch (an array, or a dict or tuple of them, nested ones opened), in the batch's
    structure: fn(obs) itself for an array."""
    if isinstance(obs, dict):
        return {k: map_obs(fn, v) for k, v in obs.items()}
    if isinstance(obs, tuple):
        return tuple(map_obs(fn, v) for v in obs)
    return fn(obs)


def net_input(obs, part, scale: float = 1.0):
    """The network's flat float input from a batch held as the env gives it (an array, or a dict or tuple of
    arrays or tensors, each in its own dtype: a learner's buffers keep a uint8 screen uint8): `part(array)` turns
    one array into float rows (a tensor [..., its inputs]), and a Dict's or Tuple's rows are joined in
    `obs_entries`' order (torch.cat). An array alone is `part(obs) * scale` (obs_scale: uint8 frames enter in
    [0, 1]); a Dict's images are scaled in the torso (Entry.scale), so `scale` is not applied to its parts."""
    if isinstance(obs, (dict, tuple)):
        import torch
        return torch.cat([part(leaf) for leaf in obs_leaves(obs)], -1)
    x = part(obs)
    return x * scale if scale != 1.0 else x


def obs_columns(obs, observation_space) -> list:
    """(columns of the flat input, array) for every leaf of a batch of `observation_space`: where `flat_obs`
    puts each part (a Dict's and a Tuple's at their Entry's place), so a learner fills a preallocated float input
    leaf by leaf, each converted as it is copied; [(all columns, obs)] for an array."""
    entries = obs_entries(observation_space)
    if not entries:
        return [(slice(None), obs)]
    return [(slice(e.start, e.start + e.size), leaf) for e, leaf in zip(entries, obs_leaves(obs, observation_space))]


def obs_scale(dtype) -> float:
    """Images (uint8) enter the network in [0, 1]."""
    return 1.0 / 255 if np.dtype(dtype) == np.uint8 else 1.0


def space_scale(observation_space) -> float:
    """What `net_input` multiplies a batch of this space by: `obs_scale` of an array space's dtype; 1 for a Dict
    or Tuple, whose images the torso scales (Entry.scale)."""
    if getattr(observation_space, "spaces", None) is not None:
        return 1.0
    return obs_scale(observation_space.dtype)


def dense_params(widths) -> int:
    """Parameters (weights and biases) of Linear layers of these widths in a row."""
    return sum(a * b + b for a, b in zip(widths[:-1], widths[1:]))


def conv_params(c_in: int, c_out: int, kernel: int) -> int:
    return c_in * c_out * kernel * kernel + c_out


def lstm_params(inputs: int, units: int) -> int:
    """torch.nn.LSTMCell: four gates, each with input and recurrent weights and two biases."""
    return 4 * units * (inputs + units) + 8 * units


Frame = tuple[int, int, int, str]   # (channels, height, width, "chw" or "hwc")
MIN_SIDE = {"nature": 36, "impala": 1}   # the smallest side each CNN's layers leave a cell of
NEEDS = "image observations of at least 36x36 (stacked frames CxHxW or HxWxC)"


def image_layout(shape) -> Frame:
    """(channels, height, width, layout) of an image of this rank-3 shape: the channel axis is the shorter of
    the two ends (a tie reads as CHW), as SB3's is_image_space_channels_first decides before VecTransposeImage:
    4x84x84 as EnvPool and gymnasium's FrameStackObservation give frames, 84x84x4 as CleanRL's Atari wrappers
    do, 240x320x3 as a game's RGB screen comes."""
    if shape[0] <= shape[2]:
        return int(shape[0]), int(shape[1]), int(shape[2]), "chw"
    return int(shape[2]), int(shape[0]), int(shape[1]), "hwc"


def frame_layout(observation_space) -> Frame | None:
    """The layout of stacked frames (`image_layout`), or None when the observation is not one 3-D image (a
    Dict or Tuple with images is `obs_entries`'s)."""
    shape = getattr(observation_space, "shape", None)
    if getattr(observation_space, "spaces", None) is not None or shape is None or len(shape) != 3:
        return None
    return image_layout(shape)


@dataclass(frozen=True)
class Entry:
    """One leaf of a Dict or Tuple observation in the flat input (in `flat_obs`'s order): inputs
    start..start+size-1. An image (a Box of rank 3, uint8 or float) has its `frame` and gets a CNN of its own;
    `scale` is what its pixels are multiplied by first (1/255 for uint8, as SB3's preprocess_obs, since the flat
    input is floats of every entry and no longer tells their dtypes). Any other leaf is passed on flattened, as
    CombinedExtractor's nn.Flatten does (a Discrete one as its index)."""
    path: str
    start: int
    size: int
    frame: Frame | None = None
    scale: float = 1.0


def obs_entries(observation_space) -> tuple[Entry, ...]:
    """The leaves of a Dict or Tuple observation space (nested ones opened, in the space's order), each with its
    place in the flat input; () for any other space, which enters a torso whole."""
    if getattr(observation_space, "spaces", None) is None:
        return ()
    entries: list[Entry] = []

    def walk(space, path: str, start: int) -> int:
        parts = getattr(space, "spaces", None)
        if parts is not None:
            named = parts.items() if isinstance(parts, dict) else enumerate(parts)
            for key, part in named:
                start = walk(part, f"{path}/{key}" if path else str(key), start)
            return start
        if is_text(space):
            return start
        size, shape = obs_size(space), getattr(space, "shape", None)
        image = type(space).__name__ == "Box" and shape is not None and len(shape) == 3
        entries.append(Entry(path, start, size, image_layout(shape) if image else None,
                             obs_scale(space.dtype) if image else 1.0))
        return start + size

    walk(observation_space, "", 0)
    return tuple(entries)


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


CNN_OUT = {"nature": NATURE_OUT, "impala": IMPALA_OUT}


def cnn_params(kind: str, frame: Frame) -> int:
    """Parameters of `cnn(nn, kind, frame)`: its last layer's inputs are the feature map of this frame's size
    (SB3 finds them with a dummy forward pass; here they are arithmetic, torch not imported yet)."""
    channels, height, width, _ = frame
    if kind == "nature":
        convs, c_in = 0, channels
        for c_out, kernel, _ in NATURE:
            convs, c_in = convs + conv_params(c_in, c_out, kernel), c_out
        h, w = nature_sizes(height, width)[-1]
        return convs + dense_params([c_in * h * w, NATURE_OUT])
    feed, c_in = 0, channels
    for c_out in IMPALA_CHANNELS:
        feed += conv_params(c_in, c_out, 3) + 4 * conv_params(c_out, c_out, 3)  # stem + 2 blocks of 2
        c_in = c_out
    return feed + dense_params([c_in * impala_size(height) * impala_size(width), IMPALA_OUT])


def cnn(nn, kind: str, frame: Frame):
    """The `kind` CNN (nature, impala) on flattened frames of this layout: [batch, C*H*W] -> [batch, its out]."""
    channels, height, width, layout = frame
    shape = (channels, height, width) if layout == "chw" else (height, width, channels)
    if kind == "nature":
        layers, c_in = [], channels
        for c_out, kernel, stride in NATURE:
            layers += [nn.Conv2d(c_in, c_out, kernel, stride), nn.ReLU()]
            c_in = c_out
        h, w = nature_sizes(height, width)[-1]
        body = nn.Sequential(*layers, nn.Flatten(), nn.Linear(c_in * h * w, NATURE_OUT), nn.ReLU())
    else:
        body = impala_resnet(nn, channels, impala_size(height) * impala_size(width))
    return Frames(nn, shape, layout == "hwc", body)


@dataclass(frozen=True)
class Torso:
    """What turns one flattened observation into features: `kind` mlp (the `hidden` widths, tanh), nature or
    impala (a CNN on frames of `frame` = (channels, height, width, layout), or, for a Dict or Tuple observation,
    one CNN per image of `entries` and the other entries as they are, concatenated), each optionally topped by an
    LSTM of `lstm` units (0: none)."""
    kind: str
    inputs: int
    hidden: tuple = ()
    frame: Frame | None = None
    lstm: int = 0
    entries: tuple[Entry, ...] = ()

    @property
    def images(self) -> tuple[Entry, ...]:
        return tuple(e for e in self.entries if e.frame is not None)

    @property
    def feed_width(self) -> int:
        """Features out of the feed-forward part."""
        if self.entries:
            return len(self.images) * CNN_OUT[self.kind] + sum(e.size for e in self.entries if e.frame is None)
        if self.kind in CNN_OUT:
            return CNN_OUT[self.kind]
        return self.hidden[-1] if self.hidden else self.inputs

    @property
    def width(self) -> int:
        return self.lstm or self.feed_width

    @property
    def params(self) -> int:
        if self.entries:
            feed = sum(cnn_params(self.kind, e.frame) for e in self.images)
        elif self.kind in CNN_OUT:
            feed = cnn_params(self.kind, self.frame)
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
        if self.entries:
            return combined(torch, self.kind, self.entries)
        return cnn(nn, self.kind, self.frame)

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


def combined(torch, kind: str, entries: tuple[Entry, ...]):
    """SB3's CombinedExtractor on the flat input: each image entry through a `kind` CNN of its own (its pixels
    scaled first), the other entries flattened, the features concatenated in the entries' order."""
    nn = torch.nn

    class Combined(nn.Module):
        def __init__(self):
            super().__init__()
            self.cnns = nn.ModuleList([cnn(nn, kind, e.frame) for e in entries if e.frame is not None])

        def forward(self, x):
            features, cnns = [], iter(self.cnns)
            for e in entries:
                part = x[:, e.start:e.start + e.size]
                if e.frame is not None:
                    part = next(cnns)(part * e.scale if e.scale != 1.0 else part)
                features.append(part)
            return torch.cat(features, 1)

    return Combined()


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
    """The torso of the workload's policy (a PolicySpec) on this observation, for every acting policy and
    learner alike: `cnn` and `cnn:impala` need frames, or a Dict or Tuple with image entries (`image_torso`);
    `lstm` puts its LSTM (of hidden[-1] units) on the Nature CNN where it fits them or on an MLP of the other
    hidden sizes; every other policy (mlp, random, a user's) gives a learner its MLP of `hidden`."""
    inputs = obs_size(observation_space)
    if policy.name == "lstm":
        try:
            return replace(image_torso("nature", policy.name, observation_space), lstm=policy.hidden[-1])
        except Unsupported:
            return Torso("mlp", inputs, tuple(policy.hidden[:-1]), lstm=policy.hidden[-1])
    kind = CNN_POLICIES.get(policy.name)
    if kind is None:
        return Torso("mlp", inputs, tuple(policy.hidden))
    return image_torso(kind, policy.name, observation_space)


def image_torso(kind: str, policy_name: str, observation_space) -> Torso:
    """The `kind` CNN torso on this observation: frames, or a Dict or Tuple with at least one image entry (a CNN
    each, the rest passed on); Unsupported, in one line, before anything is built, when there is no image, or
    when an image is smaller than the CNN takes (each such entry named with its size)."""
    inputs, frame = obs_size(observation_space), frame_layout(observation_space)
    entries = obs_entries(observation_space)
    refused = f"policy {policy_name} needs {NEEDS}; got "
    if frame is not None:
        if not _fits(frame, kind):
            raise Unsupported(refused + _space_text(observation_space))
        return Torso(kind, inputs, frame=frame)
    images = [e for e in entries if e.frame is not None]
    if not images:
        what = _space_text(observation_space)
        raise Unsupported(refused + (f"{what}, with no image entry (a Box of rank 3)" if entries else what))
    small = [f"image '{e.path}' of {e.frame[1]}x{e.frame[2]} ({_space_text(_leaf(observation_space, e.path))})"
             for e in images if not _fits(e.frame, kind)]
    if small:
        raise Unsupported(refused + ", ".join(small))
    return Torso(kind, inputs, entries=entries)


def _fits(frame: Frame, kind: str) -> bool:
    """Whether the CNN's layers leave at least one cell of the frame (the Nature CNN needs 36x36)."""
    _, height, width, _ = frame
    return min(height, width) >= MIN_SIDE[kind]


def _leaf(space, path: str):
    for key in path.split("/"):
        space = space.spaces[key] if isinstance(space.spaces, dict) else space.spaces[int(key)]
    return space


def _space_text(space) -> str:
    """A space in a refusal: Box(4,), Dict(screen: Box(240, 320, 3), vars: Box(5,)), Tuple(Box(2,), ...)."""
    parts = getattr(space, "spaces", None)
    if parts is not None:
        inner = (", ".join(f"{k}: {_space_text(p)}" for k, p in parts.items()) if isinstance(parts, dict)
                 else ", ".join(_space_text(p) for p in parts))
        return f"{type(space).__name__}({inner})"
    if type(space).__name__ == "Discrete":
        return f"Discrete({int(space.n)})"
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
