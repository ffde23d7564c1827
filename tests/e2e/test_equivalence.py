"""Strategies measure the same work: with the same seed and the same random actions, gymnasium-based
adapters produce the same transitions, and EnvPool's CartPole has gymnasium's spaces."""
import gymnasium as gym
import numpy as np
import pytest
from support.equivalence import STEPS, _trajectory

from rlbench import registry
from rlbench.api import PolicySpec, Workload, make_env

pytestmark = pytest.mark.filterwarnings("ignore:.*precision lowered by casting:UserWarning")  # envpool

@pytest.fixture(scope="module")
def serial_cartpole():
    return _trajectory("serial", Workload("CartPole-v1", 4, PolicySpec(), seed=0))


@pytest.mark.parametrize("adapter, options", [
    ("gymnasium-sync", {}),
    ("gymnasium-async", {"shared_memory": True}),
    ("gymnasium-async", {"shared_memory": False}),
])
def test_same_observations_as_serial(serial_cartpole, adapter, options):
    got = _trajectory(adapter, Workload("CartPole-v1", 4, PolicySpec(), seed=0), options)
    assert got.shape == serial_cartpole.shape == (STEPS + 1, 4, 4)
    assert got.dtype == serial_cartpole.dtype == np.float32
    np.testing.assert_array_equal(got, serial_cartpole)


def test_seed_changes_the_trajectory(serial_cartpole):
    other = _trajectory("serial", Workload("CartPole-v1", 4, PolicySpec(), seed=1))
    assert not np.array_equal(other, serial_cartpole)


def test_same_observations_on_the_synthetic_env():
    workload = Workload("rlbench/Synthetic-v0", 3, PolicySpec(), seed=0,
                        env_kwargs={"obs_bytes": 5, "episode_len": 7, "step_cost_us": 0.0})
    np.testing.assert_array_equal(_trajectory("gymnasium-sync", workload), _trajectory("serial", workload))


def test_envpool_cartpole_has_gymnasium_spaces():
    import envpool
    reference = make_env("CartPole-v1")
    pool = envpool.make("CartPole-v1", env_type="gymnasium", num_envs=2, seed=0)
    try:
        assert pool.observation_space.shape == reference.observation_space.shape == (4,)
        assert pool.observation_space.dtype == reference.observation_space.dtype == np.float32
        assert isinstance(pool.action_space, gym.spaces.Discrete)
        assert isinstance(reference.action_space, gym.spaces.Discrete)
        assert pool.action_space.n == reference.action_space.n == 2
        assert pool.action_space.start == reference.action_space.start == 0
    finally:
        pool.close()
        reference.close()


@pytest.mark.parametrize("adapter", ["envpool-sync", "envpool-async"])
def test_envpool_sessions_step_like_the_others(adapter):
    workload = Workload("CartPole-v1", 4, PolicySpec(), seed=0)
    cls = registry.get(adapter)
    session = cls().open(workload, cls.resolve_options({}))
    try:
        unit = session.info["batch_size"]
        assert unit == (4 if adapter == "envpool-sync" else 2)
        counted = sum(session.step() for _ in range(50))  # EnvPool's auto-reset steps are not counted
        assert 50 * unit * 0.8 < counted <= 50 * unit
        if adapter == "envpool-sync":
            assert session.obs.shape == (4, 4) and session.obs.dtype == np.float32
    finally:
        session.close()
