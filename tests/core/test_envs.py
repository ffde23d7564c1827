"""Every env is built the same way by every adapter: same observation shape and dtype, same action space."""
import numpy as np
import pytest

from rlbench import registry
from rlbench.envs import env_info, envpool_kwargs, make_env
from rlbench.errors import UsageError
from rlbench.workload import Workload

ENVS = ["CartPole-v1", "Pong-v5", "Ant-v4", "HalfCheetah-v4"]


@pytest.mark.parametrize("env_id", ENVS)
def test_gymnasium_and_envpool_build_the_same_env(env_id):
    envpool = pytest.importorskip("envpool")
    ours = make_env(env_id)
    pool = envpool.make(env_id, env_type="gymnasium", num_envs=1, **envpool_kwargs(env_id))
    try:
        assert ours.observation_space.shape == pool.observation_space.shape
        assert ours.observation_space.dtype == pool.observation_space.dtype
        a, b = ours.action_space, pool.action_space
        assert type(a).__name__ == type(b).__name__
        if hasattr(a, "n"):
            assert a.n == b.n
        else:  # Box: the same shape and bounds (gymnasium float32, EnvPool float64; both accept either)
            assert a.shape == b.shape
            np.testing.assert_array_equal(a.low, b.low)
            np.testing.assert_array_equal(a.high, b.high)
    finally:
        ours.close()
        pool.close()


@pytest.mark.parametrize("env_id", ENVS)
@pytest.mark.parametrize("adapter", ["serial", "envpool-sync"])
def test_adapters_step_each_env_with_the_same_batch_shape(env_id, adapter):
    cls = registry.get(adapter)
    session = cls().open(Workload(env_id, 2, frameskip=env_info(env_id).frameskip), cls.resolve_options({}))
    try:
        assert session.step() == 2
        single = make_env(env_id).observation_space
        assert session.obs.shape == (2, *single.shape) and session.obs.dtype == single.dtype
    finally:
        session.close()


def test_atari_preprocessing_matches_envpool_benchmark_conditions():
    env = make_env("Pong-v5")
    try:
        ale = env.unwrapped
        assert ale._frameskip == 1 and ale.ale.getFloat("repeat_action_probability") == 0.0
        pre = env.env  # AtariPreprocessing under FrameStackObservation
        assert (pre.frame_skip, pre.noop_max, pre.screen_size, pre.terminal_on_life_loss, pre.grayscale_obs) == \
            (4, 30, (84, 84), False, True)
    finally:
        env.close()
    assert envpool_kwargs("Pong-v5")["episodic_life"] is False and envpool_kwargs("Pong-v5")["reward_clip"] is False
    assert env_info("Pong-v5").frameskip == 4 and env_info("Ant-v4").frameskip == 5


def test_any_atari_game_is_known_and_a_typo_is_not():
    assert env_info("SpaceInvaders-v5").family == "atari"
    with pytest.raises(UsageError, match="unknown env 'Pongg-v5'.*Pong-v5"):
        env_info("Pongg-v5")


def test_atari_games_include_envpools_own_roms_without_ale_py(tmp_path, monkeypatch):
    """EnvPool runs Atari on its own emulator: the ROMs its assets hold (ENVPOOL_ASSETS_PATH, as the device kit
    carries them) name games without ale-py."""
    from rlbench import envs
    roms = tmp_path / "atari" / "roms"
    roms.mkdir(parents=True)
    (roms / "made_up_game.bin").write_bytes(b"")
    monkeypatch.setenv("ENVPOOL_ASSETS_PATH", str(tmp_path))
    assert "made_up_game" in envs.atari_games()
    assert env_info("MadeUpGame-v5").family == "atari"


def test_envpool_counts_transitions_not_its_auto_reset_steps():
    """Every finished episode costs EnvPool one extra step (the reset); that step is not counted."""
    cls = registry.get("envpool-sync")
    session = cls().open(Workload("CartPole-v1", 4, seed=0), cls.resolve_options({}))
    env = session.env
    counted, dones_before_last, units = 0, 0, 300
    original = env.step

    def spy(actions):
        nonlocal dones_before_last
        out = original(actions)
        spy.last_dones = int(np.count_nonzero(np.logical_or(out[2], out[3])))
        dones_before_last += spy.last_dones
        return out
    env.step = spy
    try:
        for _ in range(units):
            counted += session.step()
    finally:
        session.close()
    dones_before_last -= spy.last_dones  # episodes ending on the last step have not been reset yet
    assert dones_before_last > 10  # random CartPole episodes are short
    assert counted == units * 4 - dones_before_last


DECLARED = '''
class Box:
    def __init__(self, shape):
        self.shape, self.low, self.high = shape, -1.0, 1.0

    @property
    def n(self):   # as gxm's Box: a property that raises for what the space lacks
        raise NotImplementedError("Box space does not have a single dimension 'n'.")


class Discrete:
    def __init__(self, n):
        self.n = n


class Tree:
    def __init__(self, spaces):
        self.spaces = spaces


class Playground:   # Brax's API, a dict of observation shapes (MuJoCo Playground's observation_size)
    action_size = 3
    observation_size = {"state": (5,), "privileged_state": (2, 4)}

    def reset(self, rng): ...
    def step(self, state, action): ...


class Gxm:
    def __init__(self, continuous):
        self.action_space = Box((2,)) if continuous else Discrete(4)
        self.observation_space = Tree({"pixels": Box((3, 3)), "position": Box((2,))})

    def init(self, key): ...
    def reset(self, key, state): ...
    def step(self, key, state, action): ...


def playground():
    return Playground()


def gxm(continuous=False):
    return Gxm(continuous)
'''


READ_SPACES = """
import json, sys
from rlbench.envs import env_api, spaces
out = {}
for env, kwargs in (("declared_envs:playground", {}), ("declared_envs:gxm", {}),
                    ("declared_envs:gxm", {"continuous": True})):
    obs, act = spaces(env, kwargs)
    out[env + str(kwargs)] = [env_api(env), {k: list(v.shape) for k, v in obs.spaces.items()}, type(act).__name__,
                              [int(d) for d in getattr(act, "shape", ()) or ()], int(getattr(act, "n", 0) or 0),
                              act.low.tolist() if hasattr(act, "low") else None]
out["jax imported"] = "jax" in sys.modules
print(json.dumps(out))
"""


def test_planning_reads_the_spaces_jax_env_packages_declare_without_jax(tmp_path):
    """A dict of observation shapes (Playground's), a Tree of boxes and a box whose `n` raises (gxm's): read as
    gymnasium spaces while planning, nothing built in JAX (checked in a fresh interpreter: the runner's other tests
    may have imported JAX)."""
    import json
    import os
    import subprocess
    import sys

    (tmp_path / "declared_envs.py").write_text(DECLARED)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", READ_SPACES], env=env, capture_output=True, text=True, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["declared_envs:playground{}"][:3] == ["brax", {"state": [5], "privileged_state": [2, 4]}, "Box"]
    assert got["declared_envs:playground{}"][3] == [3]
    assert got["declared_envs:gxm{}"][:3] == ["gxm", {"pixels": [3, 3], "position": [2]}, "Discrete"]
    assert got["declared_envs:gxm{}"][4] == 4
    continuous = got["declared_envs:gxm{'continuous': True}"]
    assert continuous[2:4] == ["Box", [2]] and continuous[5] == [-1.0, -1.0]
    assert got["jax imported"] is False
