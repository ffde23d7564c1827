"""`rlbench/Synthetic-v0`: an env whose step cost and observation size are knobs; `rlbench/Frames-v0`: stacked
84x84 uint8 frames with a chosen step cost, the workload of the CNN policies on a machine without Atari.

Synthetic-v0 shows where inter-process overhead stops mattering (openai/baselines#608): with a cheap step,
subprocess vector envs lose to a plain loop; with an expensive one they win.
"""
import gymnasium as gym
import numpy as np

from rlbench.busy import busy_wait_us

ENV_ID = "rlbench/Synthetic-v0"
FRAMES_ID = "rlbench/Frames-v0"


class SyntheticEnv(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self, step_cost_us: float = 0.0, obs_bytes: int = 64, episode_len: int = 1000,
                 straggler_p: float = 0.0, straggler_x: float = 10.0):
        if step_cost_us < 0 or obs_bytes < 1 or episode_len < 1 or not 0 <= straggler_p <= 1 or straggler_x < 1:
            raise ValueError(f"bad Synthetic-v0 arguments: step_cost_us={step_cost_us} "
                             f"obs_bytes={obs_bytes} episode_len={episode_len} straggler_p={straggler_p} "
                             f"straggler_x={straggler_x}")
        self.step_cost_us = float(step_cost_us)
        # stragglers: with probability straggler_p a step costs straggler_x times as much (steps of highly
        # variable length, where synchronous vector envs wait for the slowest and async ones do not)
        self.straggler_p, self.straggler_x = float(straggler_p), float(straggler_x)
        self._rng = np.random.default_rng(0)
        self.episode_len = int(episode_len)
        self.observation_space = gym.spaces.Box(0, 255, shape=(int(obs_bytes),), dtype=np.uint8)
        self.action_space = gym.spaces.Discrete(2)
        self._obs = np.zeros(int(obs_bytes), dtype=np.uint8)
        self._t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._t = 0
        self._obs = np.zeros(self._obs.size, dtype=np.uint8)  # not in place: a copy shipped to a Ray actor is read-only
        return self._obs.copy(), {}

    def step(self, action):
        if self.straggler_p and self._rng.random() < self.straggler_p:
            busy_wait_us(self.step_cost_us * self.straggler_x)
        else:
            busy_wait_us(self.step_cost_us)
        self._t += 1
        self._obs[self._t % self._obs.size] = self._t & 0xFF
        truncated = self._t >= self.episode_len
        return self._obs.copy(), float(action), False, truncated, {}


class FramesEnv(gym.Env):
    """Atari after DQN's preprocessing, as the policy sees it: `stack` grayscale `size`x`size` uint8 frames,
    CHW (4x84x84, as EnvPool and gymnasium's FrameStackObservation give them) or HWC (84x84x4, CleanRL's
    wrappers), `n_actions` discrete actions (Pong's 6), a step that burns `step_cost_us` and shifts the stack.
    Each new frame is drawn from a bank of noise frames by the step and the action, so observations are
    deterministic given the seed and the actions, and the network cannot shortcut them."""
    metadata = {"render_modes": []}
    BANK = 16

    def __init__(self, step_cost_us: float = 0.0, stack: int = 4, size: int = 84, layout: str = "chw",
                 n_actions: int = 6, episode_len: int = 1000):
        if step_cost_us < 0 or stack < 1 or size < 1 or layout not in ("chw", "hwc") or n_actions < 1 \
                or episode_len < 1:
            raise ValueError(f"bad Frames-v0 arguments: step_cost_us={step_cost_us} stack={stack} size={size} "
                             f"layout={layout!r} (chw or hwc) n_actions={n_actions} episode_len={episode_len}")
        self.step_cost_us, self.episode_len, self.n_actions = float(step_cost_us), int(episode_len), int(n_actions)
        self.channels_last = layout == "hwc"
        shape = (size, size, stack) if self.channels_last else (stack, size, size)
        self.observation_space = gym.spaces.Box(0, 255, shape=shape, dtype=np.uint8)
        self.action_space = gym.spaces.Discrete(int(n_actions))
        self._stack = np.zeros((stack, size, size), dtype=np.uint8)  # CHW inside: the shift is one memmove
        self._bank = self._frames(0)
        self._t = 0

    def _frames(self, seed):
        size = self._stack.shape[1]
        return np.random.default_rng(seed).integers(0, 256, size=(self.BANK, size, size), dtype=np.uint8)

    def _push(self, frame):
        self._stack[:-1] = self._stack[1:]
        self._stack[-1] = frame

    def _obs(self):
        return np.ascontiguousarray(self._stack.transpose(1, 2, 0)) if self.channels_last else self._stack.copy()

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self._bank = self._frames(seed)
        self._t = 0
        self._stack = np.zeros_like(self._stack)  # not in place: a copy shipped to a Ray actor is read-only
        self._push(self._bank[0])
        return self._obs(), {}

    def step(self, action):
        busy_wait_us(self.step_cost_us)
        self._t += 1
        self._push(self._bank[(self._t + 7 * int(action)) % self.BANK])
        reward = float(int(action) == self._t % self.n_actions)
        return self._obs(), reward, False, self._t >= self.episode_len, {}


def register() -> None:
    if ENV_ID not in gym.registry:
        gym.register(ENV_ID, entry_point=SyntheticEnv)
    if FRAMES_ID not in gym.registry:
        gym.register(FRAMES_ID, entry_point=FramesEnv)


register()
