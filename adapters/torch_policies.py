"""The torch policies: `mlp`, `cnn` (the Nature DQN network), `cnn:impala` (the IMPALA ResNet) and `lstm`
(R2D2-style: the Nature CNN on frames, else an MLP, then an LSTM whose state is carried per env and
zeroed when an env's episode starts). The same torsos the torch learners train (adapters._kit.nets).

One call acts for the whole batch on the policy's device; the copies to the device and back are inside
the call, so the harness's policy time (`policy_s`) includes them. uint8 frames cross to the device as
uint8 (4x fewer bytes) and are scaled there, as CleanRL's Atari PPO does. `cnn`, `cnn:impala` and `lstm` take a
Dict or Tuple observation with image entries too (a CNN per image, the rest concatenated, as SB3's
MultiInputPolicy): its parts cross one by one, each in its own dtype. Discrete actions are the
argmax, Box actions tanh per dimension.
"""
import numpy as np

from adapters._kit.nets import flat_obs, head_size, obs_leaves, obs_scale, torso_of
from rlbench.api import Unsupported, register_policy


def _torch(spec, action_space, seed):
    """torch with the policy's threads, seeded, after the checks that refuse the cell up front."""
    from gymnasium import spaces
    if not isinstance(action_space, (spaces.Discrete, spaces.Box)):
        raise Unsupported(f"{type(action_space).__name__} actions: policy {spec.name} picks Discrete, Box "
                          "actions only")
    try:
        import torch
    except ImportError:
        raise Unsupported("package not installed: torch") from None
    if spec.device.startswith("cuda") and not torch.cuda.is_available():
        raise Unsupported("no CUDA device")
    torch.set_num_threads(spec.threads)
    torch.manual_seed(seed)  # the same seed gives the same weights in every strategy and worker
    return torch


def _pick(torch, action_space):
    """Network outputs -> actions, on the device (the copy back is one array)."""
    from gymnasium import spaces
    if isinstance(action_space, spaces.Discrete):
        start = int(action_space.start)
        return lambda out: out.argmax(-1) + start if start else out.argmax(-1)
    return lambda out: torch.tanh(out).reshape(len(out), *action_space.shape)


def _inputs(torch, observation_space, device):
    """A batch of observations -> the network's flat float input on the device. A Dict or Tuple crosses part by
    part in its own dtype (a uint8 screen as uint8) and is joined there, in the space's order, unscaled: the
    torso scales each image entry itself (adapters._kit.nets.obs_entries)."""
    if getattr(observation_space, "spaces", None) is not None:
        def to_device_parts(obs):
            parts = [torch.as_tensor(np.asarray(p)).to(device) for p in obs_leaves(obs, observation_space)]
            return torch.cat([p.reshape(len(p), -1).float() for p in parts], 1)
        return to_device_parts
    scale = obs_scale(getattr(observation_space, "dtype", None) or np.float32)

    def to_device(obs):
        x = torch.as_tensor(flat_obs(obs)).to(device)
        return x.float().mul_(scale) if scale != 1.0 else x.float()
    return to_device


@register_policy("mlp")
def build_mlp(spec, observation_space, action_space, seed):
    return _feed_forward(spec, observation_space, action_space, seed)


@register_policy("cnn")
def build_cnn(spec, observation_space, action_space, seed):
    return _feed_forward(spec, observation_space, action_space, seed)


@register_policy("cnn:impala")
def build_cnn_impala(spec, observation_space, action_space, seed):
    return _feed_forward(spec, observation_space, action_space, seed)


def _feed_forward(spec, observation_space, action_space, seed):
    torch = _torch(spec, action_space, seed)
    torso = torso_of(spec, observation_space)
    device = torch.device(spec.device)
    net = torch.nn.Sequential(torso.build(), torch.nn.Linear(torso.width, head_size(action_space)))
    net = net.to(device).eval()
    to_device, pick = _inputs(torch, observation_space, device), _pick(torch, action_space)

    def act(obs):
        with torch.inference_mode():
            return pick(net(to_device(obs))).cpu().numpy()  # .cpu() waits for the device: the time is real
    act.net = net  # for samplers that share or train the parameters
    return act


@register_policy("lstm")
def build_lstm(spec, observation_space, action_space, seed):
    torch = _torch(spec, action_space, seed)
    torso = torso_of(spec, observation_space)
    device = torch.device(spec.device)

    class Recurrent(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.torso, self.cell = torso.build(), torso.recurrent_cell()
            self.head = torch.nn.Linear(torso.width, head_size(action_space))

    net = Recurrent().to(device).eval()
    to_device, pick = _inputs(torch, observation_space, device), _pick(torch, action_space)
    state = EnvStates(torch, torso.width, device)

    def act(obs, starts=None, env_ids=None):
        with torch.inference_mode():
            x = to_device(obs)
            rows = state.rows(len(x), env_ids)
            h, c = state.read(rows, starts)
            h, c = net.cell(net.torso(x), (h, c))
            state.write(rows, h, c)
            return pick(net.head(h)).cpu().numpy()
    act.net, act.recurrent = net, True
    return act


class EnvStates:
    """The LSTM state (h, c) of every env the policy acts for, one row per env id, kept on the device. An
    env's row is zeroed when its observation starts an episode; rows appear as ids are first seen."""

    def __init__(self, torch, units, device):
        self.torch, self.device = torch, device
        self.h = torch.zeros(0, units, device=device)
        self.c = torch.zeros(0, units, device=device)

    def rows(self, n, env_ids):
        """The state rows of this batch: the first n (a whole vector env), or these env ids (an async one)."""
        needed = n if env_ids is None else int(np.max(env_ids)) + 1
        if needed > len(self.h):
            grow = self.torch.zeros(needed - len(self.h), self.h.shape[1], device=self.device)
            self.h, self.c = self.torch.cat([self.h, grow]), self.torch.cat([self.c, grow])
        if env_ids is None:
            return slice(0, n)
        return self.torch.as_tensor(np.asarray(env_ids, dtype=np.int64)).to(self.device)

    def read(self, rows, starts):
        h, c = self.h[rows], self.c[rows]
        if starts is not None:
            keep = ~self.torch.as_tensor(np.asarray(starts, dtype=np.bool_)).to(self.device)[:, None]
            h, c = h * keep, c * keep
        return h, c

    def write(self, rows, h, c):
        self.h[rows], self.c[rows] = h, c

