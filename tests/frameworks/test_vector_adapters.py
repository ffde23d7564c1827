"""stable-baselines3's and tianshou's vector envs: a tiny real run of each through `rlbench run`, the
async mode, the unsupported cases, and the same observations as `serial` with the same seed and actions."""
import importlib.util
import pickle

import numpy as np
import pytest
from support import TINY, run_cli
from support.equivalence import STEPS, _trajectory

from rlbench import registry
from rlbench.api import PolicySpec, Workload

NUM_ENVS = 4
SYNC = ("sb3-dummy", "sb3-subproc", "tianshou-dummy", "tianshou-subproc", "tianshou-shmem")
ASYNC = ("tianshou-subproc", "tianshou-shmem")
WORKERS = {"sb3-dummy": 1, "sb3-subproc": NUM_ENVS, "tianshou-dummy": 1, "tianshou-subproc": NUM_ENVS,
           "tianshou-shmem": NUM_ENVS, "tianshou-ray": NUM_ENVS}


def _cli(tmp_path, name, *flags):
    return run_cli(["run", *flags, "--env", "CartPole-v1", "--num-envs", NUM_ENVS, *TINY], tmp_path / name)


def _ok(row):
    assert row["status"] == "ok", row.get("error")
    assert not row.get("error")  # also: no leftover process had to be killed after the cell
    assert row["env_steps"] > 0 and row["units"] >= 1
    assert row["workers"] == WORKERS[row["adapter"]]


@pytest.fixture(scope="module")
def sync_run(tmp_path_factory):
    flags = [f for name in SYNC for f in ("--adapter", name)]
    return _cli(tmp_path_factory.mktemp("vector-sync"), "run", *flags)


@pytest.mark.parametrize("adapter", SYNC)
def test_sync_adapters_step_every_env_per_unit(sync_run, adapter):
    assert sync_run.rc == 0
    row = sync_run.row(adapter)
    _ok(row)
    # one unit is one vector step of every env; tianshou's resets are not counted as steps
    assert row["env_steps"] % NUM_ENVS == 0
    assert row["env_steps"] == row["units"] * NUM_ENVS
    assert row["options"] == {}


@pytest.mark.slow
def test_tianshou_async_mode_returns_the_envs_that_finished(tmp_path):
    run = _cli(tmp_path, "async", *[f for name in ASYNC for f in ("--adapter", name)], "--opt", "wait_num=2")
    assert run.rc == 0
    for adapter in ASYNC:
        row = run.row(adapter)
        _ok(row)
        assert row["options"] == {"wait_num": 2} and row["cell_id"].endswith("/wait_num=2")
        # every unit returns at least wait_num envs (a subprocess pool returns every pipe ready by then)
        assert 2 * row["units"] <= row["env_steps"] <= NUM_ENVS * row["units"]


def test_tianshou_async_with_a_timeout(tmp_path):
    run = _cli(tmp_path, "timeout", "--adapter", "tianshou-shmem", "--opt", "wait_num=3", "--opt", "timeout=0.01")
    assert run.rc == 0
    row = run.row("tianshou-shmem")
    _ok(row)
    assert row["options"] == {"timeout": 0.01, "wait_num": 3}
    assert row["units"] <= row["env_steps"] <= NUM_ENVS * row["units"]  # with a timeout: at least one env


class _Built(Exception):
    pass


@pytest.mark.parametrize("adapter, options, cls_path, expected", [
    ("sb3-subproc", {"start_method": "spawn"}, "stable_baselines3.common.vec_env.SubprocVecEnv",
     {"start_method": "spawn"}),
    ("tianshou-subproc", {"context": "forkserver", "wait_num": 2, "timeout": 0.5}, "tianshou.env.SubprocVectorEnv",
     {"context": "forkserver", "wait_num": 2, "timeout": 0.5}),
    ("tianshou-subproc", {}, "tianshou.env.SubprocVectorEnv", {"context": "fork", "wait_num": None, "timeout": None}),
    ("tianshou-shmem", {"context": "spawn"}, "tianshou.env.SubprocVectorEnv",
     {"context": "spawn", "share_memory": True, "wait_num": None, "timeout": None}),
])
def test_options_reach_the_framework(monkeypatch, adapter, options, cls_path, expected):
    """What each adapter passes to the framework's constructor (no process is started here)."""
    import importlib
    module, _, name = cls_path.rpartition(".")
    calls = []

    def fake(env_fns, **kwargs):
        calls.append((env_fns, kwargs))
        raise _Built

    monkeypatch.setattr(importlib.import_module(module), name, fake)
    cls = registry.get(adapter)
    with pytest.raises(_Built):
        cls().open(Workload("CartPole-v1", NUM_ENVS, seed=3), cls.resolve_options(options))
    (env_fns, kwargs), = calls
    assert kwargs == expected
    assert len(env_fns) == NUM_ENVS
    assert env_fns[0].args == ("CartPole-v1",) and env_fns[0].func.__name__ == "make_env"
    assert pickle.loads(pickle.dumps(env_fns[0])).args == ("CartPole-v1",)  # picklable for spawn/forkserver


def test_wait_num_above_num_envs_is_dropped_from_the_plan(tmp_path, capsys):
    """No cell left to run: a usage error naming why (exit 2), nothing written."""
    run = run_cli(["run", *[f for name in ASYNC for f in ("--adapter", name)], "--opt", "wait_num=5",
                   "--env", "CartPole-v1", "--num-envs", NUM_ENVS, *TINY], tmp_path / "bad", capsys)
    assert run.rc == 2 and not run.out.exists()
    [line] = run.stderr.strip().splitlines()
    assert line == ("rlbench: error: no cell can run: all 2 planned cells are impossible: " + "; ".join(
        f"{adapter} needs 0 <= wait_num <= num_envs (num_envs={NUM_ENVS}, wait_num=5) (x1)" for adapter in ASYNC))


@pytest.mark.parametrize("adapter, options, reason", [
    ("tianshou-subproc", {"wait_num": 4}, None),
    ("tianshou-ray", {"wait_num": 5}, "tianshou-ray needs 0 <= wait_num <= num_envs"),
    ("sb3-subproc", {"start_method": "spawn"}, None),
])
def test_supports_checks_the_options_without_importing(adapter, options, reason):
    cls = registry.get(adapter)
    got = cls().supports(Workload("CartPole-v1", NUM_ENVS), cls.resolve_options(options))
    assert got is None if reason is None else got.startswith(reason), got


@pytest.mark.parametrize("adapter, options, message", [
    ("tianshou-subproc", {"wait_num": -1}, "option wait_num=-1 must be an integer >= 0"),
    ("tianshou-shmem", {"timeout": -1}, "option timeout=-1 must be a finite number >= 0"),
])
def test_out_of_range_options_are_refused_before_supports(adapter, options, message):
    with pytest.raises(ValueError, match=message):
        registry.get(adapter).resolve_options(options)


def test_bad_option_values_are_rejected():
    with pytest.raises(ValueError, match="valid: fork, forkserver, spawn"):
        registry.get("sb3-subproc").resolve_options({"start_method": "threads"})
    with pytest.raises(ValueError, match="must be an integer"):
        registry.get("tianshou-subproc").resolve_options({"wait_num": "two"})
    assert "context" not in {o.name for o in registry.get("tianshou-ray").options}
    with pytest.raises(ValueError, match="unknown option 'wait_num' for tianshou-dummy"):
        registry.get("tianshou-dummy").resolve_options({"wait_num": 2})  # no async mode in-process


def test_a_missing_ray_is_a_reason_not_a_crash(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    assert registry.get("tianshou-ray")().available() == "package not installed: ray"
    assert registry.get("tianshou-subproc")().available() is None


@pytest.mark.slow
def test_tianshou_ray_runs_async_on_a_local_ray(tmp_path):
    """One cell: Ray starts (~15 s), steps with wait_num=2 (ray.wait returns exactly 2) and shuts down."""
    run = _cli(tmp_path, "ray", "--adapter", "tianshou-ray", "--opt", "wait_num=2")
    assert run.rc == 0
    row = run.row("tianshou-ray")
    _ok(row)
    assert row["env_steps"] == 2 * row["units"]


# -- the same observations as serial ---------------------------------------------------------------

@pytest.fixture(scope="module")
def serial_cartpole():
    return _trajectory("serial", Workload("CartPole-v1", NUM_ENVS, PolicySpec(), seed=0))


@pytest.mark.parametrize("adapter, options", [
    ("sb3-dummy", {}),
    ("sb3-subproc", {}),
    ("tianshou-dummy", {}),
    ("tianshou-subproc", {}),
    ("tianshou-shmem", {}),
])
def test_same_observations_as_serial(serial_cartpole, adapter, options):
    """Same seed, same actions (the seeded random policy draws the same 4 actions per step everywhere),
    300 steps with many episode ends: every observation equals serial's, resets included."""
    got = _trajectory(adapter, Workload("CartPole-v1", NUM_ENVS, PolicySpec(), seed=0), options)
    assert got.shape == serial_cartpole.shape == (STEPS + 1, NUM_ENVS, 4)
    assert got.dtype == serial_cartpole.dtype == np.float32
    np.testing.assert_array_equal(got[0], serial_cartpole[0])  # initial observations: env i reset with seed + i
    np.testing.assert_array_equal(got, serial_cartpole)


def test_a_fixed_action_sequence_gives_the_same_observations():
    """The sessions' step() with the policy replaced by one fixed action sequence (4 actions per step)."""
    workload = Workload("CartPole-v1", NUM_ENVS, PolicySpec(), seed=0)
    actions = np.random.default_rng(7).integers(0, 2, size=(STEPS, NUM_ENVS))
    runs = {}
    for adapter in ("serial", "sb3-dummy", "sb3-subproc", "tianshou-dummy", "tianshou-subproc"):
        cls = registry.get(adapter)
        session = cls().open(workload, cls.resolve_options({}))
        try:
            fixed = iter(actions)
            session.policy = lambda obs, fixed=fixed: next(fixed)
            observations = [np.array(session.obs, copy=True)]
            for _ in range(STEPS):
                assert session.step() == NUM_ENVS
                observations.append(np.array(session.obs, copy=True))
            runs[adapter] = np.stack(observations)
        finally:
            session.close()
    for adapter, got in runs.items():
        np.testing.assert_array_equal(got, runs["serial"], err_msg=adapter)


def _per_env_observations(adapter, options, units):
    """Each env's observations in the order it made them, the actions a function of each env's own
    observation, so that the order in which an async pool returns envs cannot change them."""
    cls = registry.get(adapter)
    session = cls().open(Workload("CartPole-v1", NUM_ENVS, PolicySpec(), seed=0), cls.resolve_options(options))
    try:
        session.policy = lambda obs: np.floor(obs[:, 1] * 1e4).astype(np.int64) % 2  # short episodes
        seen = [[row.copy()] for row in session.obs]
        for _ in range(units):
            n = session.step()
            ids = session.ready if adapter.startswith("tianshou") else np.arange(NUM_ENVS)
            assert n == len(ids) >= 1
            for i in ids:
                seen[i].append(session.obs[i].copy())
        return [np.stack(s) for s in seen]
    finally:
        session.close()


@pytest.mark.parametrize("adapter", ASYNC)
def test_async_mode_keeps_each_env_on_its_own_trajectory(adapter):
    """wait_num=2: envs come back in any order and any number; each env's observations (resets after
    episode ends included) are still exactly serial's for that env."""
    reference = _per_env_observations("serial", {}, STEPS)
    got = _per_env_observations(adapter, {"wait_num": 2}, STEPS)
    assert sum(len(g) - 1 for g in got) >= 2 * STEPS
    for i in range(NUM_ENVS):
        k = min(len(got[i]), len(reference[i]))
        np.testing.assert_array_equal(got[i][:k], reference[i][:k], err_msg=f"env {i}")
        # a reset shows as a jump of the pole angle (> 0.14 rad; a step moves it < 0.05 rad)
        assert np.sum(np.abs(np.diff(reference[i][:k, 2])) > 0.1) >= 2, "compare at least two episode ends"
