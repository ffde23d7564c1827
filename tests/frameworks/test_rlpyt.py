"""rlpyt-style samplers and the async runner: same transitions as the serial sampler, exact counts,
parameters reach the workers, the lag and replay-ratio bounds hold, and nothing outlives a session."""
import os
import signal
import time

import numpy as np
import pytest
from support import TINY_ASYNC, run_cli, shm_left_since

from rlbench import registry
from rlbench.api import PolicySpec, Workload, register_policy
from rlbench.running import proctree

SAMPLERS = ["rlpyt-serial", "rlpyt-cpu", "rlpyt-gpu", "rlpyt-alternating"]
BATCHES = 6


def _obs_parity(spec, observation_space, action_space, seed):
    """Deterministic and per-row: the same action for the same observation, whatever the batch."""
    n = int(action_space.n)
    return lambda obs: (np.asarray(obs).reshape(len(obs), -1).view(np.uint8).sum(1) % n).astype(np.int64)


@pytest.fixture(autouse=True, scope="module")
def obs_parity_policy():
    """Registered for this module only (forked workers inherit it), so other tests see the real list."""
    from rlbench.registry import POLICIES
    register_policy("obs_parity")(_obs_parity)
    yield
    POLICIES.pop("obs_parity")


def _open(adapter, workload, **options):
    cls = registry.get(adapter)
    opts = cls.resolve_options(options)
    assert cls().supports(workload, opts) is None
    return cls().open(workload, opts)


def _batches(adapter, workload, **options):
    session = _open(adapter, workload, **options)
    try:
        out = []
        for _ in range(BATCHES):
            assert session.step() == options["batch_T"] * workload.num_envs
            out.append({k: v.copy() for k, v in session.samples.items()})
        return out
    finally:
        session.close()


WORKLOADS = {
    "cartpole": Workload("CartPole-v1", 4, PolicySpec("obs_parity"), seed=3),
    "synthetic": Workload("rlbench/Synthetic-v0", 8, PolicySpec("obs_parity"), seed=0,
                          env_kwargs={"obs_bytes": 6, "episode_len": 5, "step_cost_us": 0.0}),
}


@pytest.mark.parametrize("env", WORKLOADS)
def test_every_sampler_collects_the_serial_samplers_transitions(env):
    workload = WORKLOADS[env]
    reference = _batches("rlpyt-serial", workload, batch_T=7)
    assert any(b["done"][:-1].any() for b in reference)  # auto-resets inside the batches
    for adapter, workers in (("rlpyt-cpu", 2), ("rlpyt-gpu", 2), ("rlpyt-alternating", 2),
                             ("rlpyt-alternating", 4), ("rlpyt-cpu", 4)):
        got = _batches(adapter, workload, batch_T=7, workers=workers)
        for b, (want, have) in enumerate(zip(reference, got)):
            for key in want:
                assert have[key].shape == want[key].shape and have[key].dtype == want[key].dtype
                np.testing.assert_array_equal(have[key], want[key], err_msg=f"{adapter} x{workers} batch {b} {key}")


def test_batches_continue_the_plain_serial_loop():
    """The sampler's observations are those of the `serial` adapter, step by step: nothing dropped,
    duplicated or shifted at batch boundaries."""
    workload = WORKLOADS["cartpole"]
    batches = _batches("rlpyt-gpu", workload, batch_T=5, workers=2)
    serial = registry.get("serial")().open(workload, {})
    try:
        for batch in batches:
            for t in range(5):
                np.testing.assert_array_equal(batch["obs"][t], serial.obs)
                serial.step()
    finally:
        serial.close()


def test_cpu_workers_act_with_the_masters_newest_parameters():
    import torch
    session = _open("rlpyt-cpu", Workload("CartPole-v1", 4, PolicySpec("mlp", hidden=(8,)), seed=0),
                    batch_T=4, workers=2)
    try:
        session.step()
        with torch.no_grad():  # an "optimiser step" that makes action 1 always best
            for p in session.policy.net.parameters():
                p.zero_()
            session.policy.net[-1].bias[1] = 1.0
        session.step()
        assert (session.samples["act"] == 1).all()
        assert session.params.version == 2  # published once per batch
    finally:
        session.close()


@pytest.mark.parametrize("adapter", SAMPLERS[1:] + ["rlpyt-async"])
def test_a_crashed_worker_fails_the_step_and_close_cleans_up(adapter):
    shm_before = proctree.shm_snapshot()
    workload = Workload("CartPole-v1", 4, PolicySpec("mlp", hidden=(8,)), seed=0)
    session = _open(adapter, workload, batch_T=4, workers=2)
    try:
        session.step()
        os.kill(session.procs[1].pid, signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises(RuntimeError, match=r"exited with code -9"):
            for _ in range(10_000):
                session.step()
        assert time.monotonic() - t0 < 10
    finally:
        session.close()
    assert all(not p.is_alive() for p in session.procs) and session.procs == []
    assert shm_left_since(shm_before) == {}


@pytest.mark.parametrize("adapter", SAMPLERS)
def test_metrics_are_shares_of_the_window(adapter):
    workload = Workload("rlbench/Synthetic-v0", 4, PolicySpec("fixed_cost", cost_us=200), seed=0,
                        env_kwargs={"step_cost_us": 100.0})
    session = _open(adapter, workload, batch_T=8) if adapter == "rlpyt-serial" else \
        _open(adapter, workload, batch_T=8, workers=2)
    try:
        session.step()
        session.metrics.reset()
        t0 = time.perf_counter()
        for _ in range(3):
            session.step()
        m = session.metrics.read(time.perf_counter() - t0)
    finally:
        session.close()
    assert set(m) == {"env_frac", "inference_frac", "wait_frac", "sync_frac"}
    assert all(0.0 <= v <= 1.0 for v in m.values()), m
    assert m["env_frac"] > 0 and m["inference_frac"] > 0


@pytest.mark.parametrize("adapter, options, workload, reason", [
    ("rlpyt-cpu", {"workers": 3}, Workload("CartPole-v1", 4), "multiple of workers=3"),
    ("rlpyt-alternating", {"workers": 1}, Workload("CartPole-v1", 4), "needs workers >= 2"),
    ("rlpyt-async", {}, Workload("CartPole-v1", 4), "needs policy mlp (got random)"),
    ("rlpyt-async", {"capacity": 8}, Workload("CartPole-v1", 4, PolicySpec("mlp")), "capacity=8"),
])
def test_unsupported_settings_name_the_reason(adapter, options, workload, reason):
    cls = registry.get(adapter)
    assert reason in cls().supports(workload, cls.resolve_options(options))


def test_out_of_range_options_are_refused_before_supports():
    with pytest.raises(ValueError, match="option batch_T=0 must be an integer >= 1"):
        registry.get("rlpyt-serial").resolve_options({"batch_T": 0})


def test_async_runner_holds_its_lag_and_replay_ratio_bounds():
    workload = Workload("CartPole-v1", 4, PolicySpec("mlp", hidden=(16,)), seed=0)
    session = _open("rlpyt-async", workload, batch_T=4, workers=2, max_lag=1, replay_ratio=2.0, minibatch=16)
    try:
        before = session.params.version
        session.metrics.reset()
        t0 = time.perf_counter()
        made = sum(session.step() for _ in range(200))
        m = session.metrics.read(time.perf_counter() - t0)
        added, consumed = int(session.ctrl[0]), int(session.ctrl[1])
        hist = session.lag_histogram()
    finally:
        session.close()
    assert session.params.version == before + 200 and consumed == 200 * 16
    assert made <= added and consumed <= 2.0 * added          # the optimiser never outruns the ratio
    slack = max(2 * 4 * 4, 16 + 4 * 4, 16 / 2.0 + 4 * 4)
    assert added - consumed / 2.0 <= slack + 4 * 4              # samplers run ahead by at most a batch
    assert hist.sum() > 0 and hist[2:].sum() == 0 and m["policy_lag_max"] <= 1
    assert 0 < m["replay_ratio"] and m["updates_per_s"] > 0 and 0 <= m["learn_frac"] <= 1


@pytest.mark.parametrize("adapter, opts", [("rlpyt-gpu", ["--opt", "workers=2", "--opt", "batch_T=4"]),
                                           ("rlpyt-async", ["--opt", "minibatch=8"])])
def test_samplers_run_through_the_cli(tmp_path, adapter, opts):
    run = run_cli(["run", "--adapter", adapter, "--env", "CartPole-v1", "--num-envs", "2",
                   "--policy", "mlp:hidden=8", *opts, *TINY_ASYNC], tmp_path / "run")
    assert run.rc == 0, run.rows
    row = run.row(adapter)
    assert row["status"] == "ok", row
    if adapter == "rlpyt-gpu":
        assert row["env_steps"] % 8 == 0 and row["workers"] == 2 and row["batch_size"] == 8
        assert 0 <= row["wait_frac"] <= 1
    else:
        assert row["updates_per_s"] > 0 and row["replay_ratio"] > 0
    header = (tmp_path / "run" / "results.csv").read_text().splitlines()[0].split(",")
    assert {"updates_per_s", "policy_lag_max", "env_frac", "sync_frac"} <= set(header)


def test_workers_exit_when_their_master_is_killed(tmp_path):
    """The runner kills a cell's process group anyway; a worker must not depend on that."""
    import subprocess
    import sys

    import psutil
    script = tmp_path / "master.py"
    script.write_text(
        "import os, sys\n"
        "from rlbench import registry\n"
        "from rlbench.api import Workload\n"
        "if __name__ == '__main__':\n"
        "    cls = registry.get(sys.argv[1])\n"
        "    s = cls().open(Workload('CartPole-v1', 4), cls.resolve_options({'context': 'forkserver'}))\n"
        "    s.step()\n"
        "    print(' '.join(str(p.pid) for p in s.procs), flush=True)\n"
        "    os.kill(os.getpid(), 9)\n")
    for adapter in ("rlpyt-cpu", "rlpyt-gpu"):
        out = subprocess.run([sys.executable, str(script), adapter], capture_output=True, text=True, timeout=60)
        pids = [int(p) for p in out.stdout.split()]
        assert len(pids) == 2, out.stderr
        gone, alive = psutil.wait_procs([psutil.Process(p) for p in pids if psutil.pid_exists(p)], timeout=10)
        assert not alive, f"{adapter} workers outlived their master: {alive}"
