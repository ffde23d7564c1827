"""A small environment package of the kind a user brings to rlbench: importing it registers
`ToyCorridor-v0` with gymnasium, and `make_corridor` is a factory. Neither is known to rlbench.

    PYTHONPATH=examples rlbench run --adapter serial --adapter gymnasium-async --num-envs 1,4 \
        --env toyenvs:ToyCorridor-v0 --env-kwarg obs=dict --env-kwarg step_cost_us=50
    PYTHONPATH=examples rlbench tune --env toyenvs:make_corridor --policy toyenvs.policies:linear

An agent walks a corridor of `length` cells towards a goal; `step_cost_us` burns CPU inside step() like a
physics engine would, per frame (`frameskip` frames per step). `obs` picks the observation space (box, dict,
tuple, discrete, multidiscrete, multibinary; and what third-party envs bring: text, sequence, graph, mission
(a Dict of an image, a direction and a custom MissionSpace holding a str, as MiniGrid's), dict_image (a
first-person shooter's: a `screen` of HxWx3 uint8 pixels, `screen="240x320"` by default, and a `vars` vector of
5 floats, for `--policy cnn` on Dict observations)) and `act` the
action space (discrete, box, multidiscrete,
multibinary), so one env exercises every space an adapter may or may not carry. The dynamics depend only on
the actions and the reset seed: the same seed and actions give the same transitions under every strategy.
"""
import time

import gymnasium as gym
import numpy as np

OBS = ("box", "dict", "tuple", "discrete", "multidiscrete", "multibinary",
       "text", "sequence", "graph", "mission", "dict_image")   # the last five: what third-party envs bring
WORDS = ("go", "left", "right", "to", "the", "goal")


class MissionSpace(gym.Space):
    """A custom Space subclass holding a str, as MiniGrid's own MissionSpace does: no shape, no dtype."""

    def __init__(self, seed=None):
        super().__init__(None, None, seed)

    def sample(self, mask=None, probability=None):
        return " ".join(self.np_random.choice(WORDS, 3))

    def contains(self, x) -> bool:
        return isinstance(x, str)

    def __eq__(self, other) -> bool:
        return isinstance(other, MissionSpace)

ACT = ("discrete", "box", "multidiscrete", "multibinary", "dict", "text", "tuple")   # the last three: some envs


class Corridor(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self, length: int = 16, obs: str = "box", act: str = "discrete", step_cost_us: float = 0.0,
                 episode_len: int = 200, frameskip: int = 1, screen: str = "240x320"):
        if obs not in OBS or act not in ACT:
            raise ValueError(f"obs={obs!r} act={act!r} (valid obs: {', '.join(OBS)}; act: {', '.join(ACT)})")
        self.length, self.obs_kind, self.act_kind = int(length), obs, act
        self.step_cost_s, self.episode_len = float(step_cost_us) / 1e6, int(episode_len)
        self.frameskip = int(frameskip)  # frames per step: the action repeats, the cost is paid per frame
        n = self.length
        height, width = (int(side) for side in str(screen).lower().split("x"))
        self.screen = None
        if obs == "dict_image":   # drawn into, copied out per step; the other spaces hold no screen
            self.screen = np.zeros((height, width, 3), np.uint8)
            self.screen[height // 2:, :, 2] = 96                   # a floor
        self.observation_space = {
            "box": gym.spaces.Box(-1.0, 1.0, (4,), np.float32),
            "dict": gym.spaces.Dict({"position": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
                                     "cell": gym.spaces.Discrete(n), "walls": gym.spaces.MultiBinary(4)}),
            "tuple": gym.spaces.Tuple((gym.spaces.Box(-1.0, 1.0, (2,), np.float32), gym.spaces.Discrete(n))),
            "discrete": gym.spaces.Discrete(n),
            "multidiscrete": gym.spaces.MultiDiscrete([n, n]),
            "multibinary": gym.spaces.MultiBinary(n),
            "text": gym.spaces.Text(32, charset="abcdefghijklmnopqrstuvwxyz "),
            "sequence": gym.spaces.Sequence(gym.spaces.Discrete(n)),
            "graph": gym.spaces.Graph(gym.spaces.Box(-1.0, 1.0, (2,), np.float32), gym.spaces.Discrete(2)),
            "mission": gym.spaces.Dict({"image": gym.spaces.Box(0, 255, (3, 3, 3), np.uint8),
                                        "direction": gym.spaces.Discrete(4), "mission": MissionSpace()}),
            "dict_image": gym.spaces.Dict({"screen": gym.spaces.Box(0, 255, (height, width, 3), np.uint8),
                                           "vars": gym.spaces.Box(-1.0, 1.0, (5,), np.float32)}),
        }[obs]
        self.action_space = {
            "discrete": gym.spaces.Discrete(3),
            "box": gym.spaces.Box(-1.0, 1.0, (1,), np.float32),
            "multidiscrete": gym.spaces.MultiDiscrete([3, 2]),
            "multibinary": gym.spaces.MultiBinary(2),
            "dict": gym.spaces.Dict({"move": gym.spaces.Discrete(3), "speed": gym.spaces.Box(0.0, 1.0, (1,))}),
            "text": gym.spaces.Text(8, charset="lrs"),
            # a multi-agent wrapper's (highway-env's): one action per agent, a tuple asserted as one
            "tuple": gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Discrete(2))),
        }[act]
        self.pos = self.goal = self.t = 0

    def _move(self, action) -> int:
        """-1, 0 or +1 from any action space."""
        a = np.asarray(action)
        if self.act_kind == "box":
            return int(np.sign(np.round(float(a.reshape(-1)[0]))))
        if self.act_kind == "multibinary":
            return int(a[0]) - int(a[1])
        if self.act_kind == "dict":
            return int(action["move"]) - 1
        if self.act_kind == "text":
            return {"l": -1, "r": 1}.get(str(action)[:1], 0)
        if self.act_kind == "tuple":
            if not isinstance(action, tuple):
                raise TypeError(f"a tuple action, one per agent, expected; got {type(action).__name__}")
            return int(action[0]) - 1 if int(action[1]) else 0
        return int(a.reshape(-1)[0]) - 1

    def _obs(self):
        n, p, g = self.length, self.pos, self.goal
        x = np.array([2 * p / (n - 1) - 1, 2 * g / (n - 1) - 1], np.float32)
        walls = np.array([p == 0, p == n - 1, p < g, p > g], np.int8)
        if self.obs_kind == "box":
            return np.concatenate([x, walls[:2].astype(np.float32)])
        if self.obs_kind == "dict":
            return {"position": x, "cell": p, "walls": walls}
        if self.obs_kind == "tuple":
            return (x, p)
        if self.obs_kind == "discrete":
            return p
        if self.obs_kind == "multidiscrete":
            return np.array([p, g], np.int64)
        if self.obs_kind == "multibinary":
            return (np.arange(n) == p).astype(np.int8)
        if self.obs_kind == "dict_image":
            return {"screen": self._draw(), "vars": np.concatenate([x, walls[:2], [self.t / self.episode_len]],
                                                                    dtype=np.float32)}
        mission = f"go {'left' if g < p else 'right'} to the goal"
        if self.obs_kind == "text":
            return mission
        if self.obs_kind == "sequence":
            return tuple(range(min(p, g), max(p, g) + 1))        # the cells between agent and goal: any length
        if self.obs_kind == "graph":
            return gym.spaces.GraphInstance(nodes=np.stack([x, x[::-1]]).astype(np.float32),
                                            edges=np.array([int(p < g)]), edge_links=np.array([[0, 1]]))
        image = np.zeros((3, 3, 3), np.uint8)                      # mission
        image[1, 1] = (10 * p, 10 * g, 255 * (p == g))
        return {"image": image, "direction": int(p < g) + 2 * int(p > g), "mission": mission}

    def _draw(self) -> np.ndarray:
        """The screen: the agent's column red, the goal's green (cheap: one copy, two slices)."""
        frame, n = self.screen.copy(), self.length
        band = max(frame.shape[1] // n, 1)
        frame[:, self.pos * band:(self.pos + 1) * band, 0] = 255
        frame[: frame.shape[0] // 2, self.goal * band:(self.goal + 1) * band, 1] = 255
        return frame

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos, self.goal = (int(v) for v in self.np_random.integers(0, self.length, size=2))
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        move, terminated = self._move(action), False
        for _ in range(self.frameskip):
            if self.step_cost_s:
                end = time.perf_counter() + self.step_cost_s
                while time.perf_counter() < end:
                    pass
            self.pos = min(max(self.pos + move, 0), self.length - 1)
            terminated = self.pos == self.goal
            if terminated:
                break
        self.t += 1
        truncated = self.t >= self.episode_len
        reward = 1.0 if terminated else -0.01
        if self.act_kind == "tuple":   # as highway-env's MultiAgentWrapper: each agent's reward and termination
            return self._obs(), (reward, 0.0), (terminated, terminated), truncated, {}
        return self._obs(), reward, terminated, truncated, {}


def make_corridor(**kwargs) -> Corridor:
    """A factory, as `--env toyenvs:make_corridor` names it; its arguments come from --env-kwarg."""
    return Corridor(**kwargs)


gym.register("ToyCorridor-v0", entry_point=Corridor)
