"""A multi-agent env's per-agent rewards and episode ends, joined into one each by every adapter's make_env
(rlbench.envs.agents): the corridor with act=tuple returns them as highway-env's MultiAgentWrapper does."""
import sys

import numpy as np
from support import REPO

from rlbench.envs import make_env
from rlbench.envs.agents import every, total

if str(REPO / "examples") not in sys.path:
    sys.path.insert(0, str(REPO / "examples"))


def test_rewards_are_summed_and_an_episode_ends_when_every_agents_has():
    assert total((1.0, 0.5)) == 1.5 and total({"a": 1.0, "b": -1.0}) == 0.0 and total(np.array([1, 2])) == 3.0
    assert total(0.25) == 0.25
    assert every((True, True)) is True and every((False, True)) is False and every({"a": True}) is True
    assert every(False) is False and every(np.bool_(True))


def test_make_env_joins_a_multi_agent_envs_signals_and_leaves_a_single_agent_env_alone():
    env = make_env("toyenvs:make_corridor", act="tuple", length=4, episode_len=50)
    env.reset(seed=0)
    ends = 0
    for _ in range(200):
        _, reward, terminated, truncated, _ = env.step((2, 1))   # always right: the goal is reached, or the end
        assert isinstance(reward, float) and isinstance(terminated, bool) and isinstance(truncated, bool)
        if terminated or truncated:
            ends += 1
            env.reset()
    assert 0 < ends < 200                        # not an end after every step, as a non-empty tuple would make it
    single = make_env("toyenvs:make_corridor", length=4)
    assert type(single).__name__ != "AgentsJoined"
    assert type(make_env("toyenvs:make_corridor", act="dict")).__name__ == "AgentsJoined"
