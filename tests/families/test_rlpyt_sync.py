"""`rlpyt-sync`: DDP keeps every rank's parameters identical while they learn, a step is one
iteration on every rank, and a dead rank fails the session instead of hanging it."""
import importlib.util
import os
import signal
import time

import numpy as np
import pytest
from support import TINY

from rlbench import registry
from rlbench.api import SESSION_METRICS, PolicySpec, Unsupported, Workload

MLP = PolicySpec("mlp", hidden=(16, 16))


def _open(workload, **options):
    cls = registry.get("rlpyt-sync")
    resolved = cls.resolve_options(options)
    assert cls().supports(workload, resolved) is None
    return cls().open(workload, resolved)


def test_ranks_keep_identical_parameters_while_learning():
    session = _open(Workload("CartPole-v1", 4, MLP, seed=0), ranks=2, batch_T=16)
    try:
        before = session.rank_params()
        assert len(before) == 2 and before[0].dtype == np.float32
        np.testing.assert_array_equal(before[0], before[1])  # same seed, and DDP broadcasts rank 0's
        for _ in range(5):
            session.step()
        after = session.rank_params()
        assert after[0].shape == before[0].shape
        assert after[0].tobytes() == after[1].tobytes()  # bitwise: the same averaged gradient everywhere
        assert not np.array_equal(after[0], before[0])  # and it did learn
    finally:
        session.close()


def test_step_info_and_metrics():
    # the synthetic env has uint8 observations and short episodes: both paths of the sampler
    workload = Workload("rlbench/Synthetic-v0", 4, MLP, seed=0,
                        env_kwargs={"obs_bytes": 8, "episode_len": 5, "step_cost_us": 0.0})
    session = _open(workload, ranks=2, batch_T=8)
    try:
        assert session.info == {"workers": 2, "batch_size": 2 * 2 * 8}
        assert len(session.worker_pids) == 1
        assert session.step() == 32
        session.metrics.reset()
        t0 = time.perf_counter()
        for _ in range(3):
            assert session.step() == 32
        got = session.metrics.read(time.perf_counter() - t0)
    finally:
        session.close()
    assert set(got) <= set(SESSION_METRICS)
    assert got["updates_per_s"] > 0
    fracs = {k: v for k, v in got.items() if k.endswith("_frac")}
    assert set(fracs) == {"env_frac", "inference_frac", "learn_frac", "sync_frac"}
    assert all(0 <= v <= 1 for v in fracs.values()), fracs
    assert sum(fracs.values()) <= 1


@pytest.mark.parametrize("workload, options, reason", [
    (Workload("CartPole-v1", 4), {}, "rlpyt-sync trains the policy: needs policy mlp, cnn or cnn:impala (got random)"),
    (Workload("CartPole-v1", 3, MLP), {"ranks": 2}, "rlpyt-sync splits num_envs over ranks: num_envs=3"),
    (Workload("CartPole-v1", 4, MLP), {"backend": "nccl"}, "backend nccl needs policy device cuda"),
    (Workload("CartPole-v1", 4, MLP), {"ranks": 4}, None),
])
def test_supports(workload, options, reason):
    cls = registry.get("rlpyt-sync")
    got = cls().supports(workload, cls.resolve_options(options))
    assert got is None if reason is None else got.startswith(reason), got


def test_out_of_range_options_are_refused_before_supports():
    with pytest.raises(ValueError, match="option ranks=0 must be an integer >= 1"):
        registry.get("rlpyt-sync").resolve_options({"ranks": 0})


@pytest.mark.skipif(importlib.util.find_spec("mujoco") is None, reason="mujoco not installed")
@pytest.mark.filterwarnings("ignore:.*is out of date")
def test_continuous_actions_are_unsupported_at_open():
    with pytest.raises(Unsupported, match="Discrete action space"):
        _open(Workload("HalfCheetah-v4", 2, MLP), ranks=2)


def test_a_killed_rank_fails_the_step_and_close_cleans_up():
    session = _open(Workload("CartPole-v1", 2, MLP, seed=0), ranks=2, batch_T=4, timeout_s=20)
    try:
        session.step()
        [pid] = session.worker_pids
        os.kill(pid, signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises(RuntimeError, match=r"rank 1 \(pid \d+\) exited with code -9"):
            for _ in range(1000):  # the kill lands between steps or inside one
                session.step()
        assert time.monotonic() - t0 < 15
        with pytest.raises(RuntimeError, match="broken"):
            session.step()
    finally:
        session.close()  # the autouse fixture checks that no process is left


def test_cli_run(cli_run):
    run = cli_run(["run", "--adapter", "rlpyt-sync", "--env", "CartPole-v1", "--num-envs", "2",
                   "--policy", "mlp:hidden=16x16", "--opt", "ranks=2", "--opt", "batch_T=8", *TINY])
    assert run.rc == 0
    row = run.row("rlpyt-sync")
    assert row["status"] == "ok", row.get("error")
    # (not all of `error`: the runner's shared-memory check sees /dev/shm of the whole machine)
    assert "leftover process" not in (row.get("error") or "")
    assert row["workers"] == 2 and row["batch_size"] == 16
    assert row["env_steps"] > 0 and row["env_steps"] % 16 == 0
    assert row["updates_per_s"] > 0
