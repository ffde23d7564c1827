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
