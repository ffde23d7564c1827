"""Learners `seed` (central inference) and `a3c` (Hogwild workers), and `ddp` (rlpyt-sync under the
learner kind): they report the learner metrics through the measurement protocol, learn CartPole, and a
dead actor fails the session without leaving a process or a shared-memory entry behind."""
import math
import os
import signal
import subprocess
import sys
import time

import numpy as np
import psutil
import pytest
from support import REPO, shm_left_since

from rlbench import registry
from rlbench.api import SESSION_METRICS, PolicySpec, Workload
from rlbench.planning.plan import TimingProtocol
from rlbench.running import proctree
from rlbench.running.timing import measure
from rlbench.workload import parse_policy

MLP = PolicySpec("mlp", hidden=(64, 64))
SMALL = PolicySpec("mlp", hidden=(8,))
TINY = TimingProtocol(warmup_s=0.05, warmup_units=2, duration_s=0.3, min_units=5)
CARTPOLE = Workload("CartPole-v1", 8, MLP, seed=0)
SYNTHETIC = Workload("rlbench/Synthetic-v0", 4, SMALL, seed=0,  # uint8 observations, short episodes
                     env_kwargs={"obs_bytes": 8, "episode_len": 5, "step_cost_us": 0.0})
STAGES = {"seed": {"env_frac", "inference_frac", "learn_frac", "wait_frac", "transfer_frac", "sync_frac"},
          "a3c": {"env_frac", "inference_frac", "learn_frac", "wait_frac", "sync_frac"}}


def _open(adapter, workload, **options):
    cls = registry.get(adapter)
    resolved = cls.resolve_options(options)
    assert cls().supports(workload, resolved) is None
    return cls().open(workload, resolved)


@pytest.mark.parametrize("adapter, workload, options", [
    ("seed", CARTPOLE, {}),
    ("a3c", CARTPOLE, {}),
    ("seed", SYNTHETIC, {"batch_T": 4, "workers": 4}),
    ("a3c", SYNTHETIC, {"batch_T": 4, "lock": True, "updates_per_unit": 2}),
], ids=["seed", "a3c", "seed-uint8", "a3c-lock-uint8"])
def test_measure_reports_the_learner_metrics(adapter, workload, options):
    session = _open(adapter, workload, **options)
    try:
        result = measure(session.step, TINY, session.metrics)
    finally:
        session.close()
    workers = options.get("workers", 2)
    batch_T = options.get("batch_T", 16)
    per_update = batch_T * workload.num_envs // (workers if adapter == "a3c" else 1)
    assert session.info["workers"] == workers and session.info["batch_size"] == per_update
    assert result["units"] >= 5 and result["env_steps"] > 0 and result["env_steps"] % per_update == 0
    expected = {"updates_per_s", "samples_per_s", "actor_steps_per_s", "policy_lag_mean", "policy_lag_max",
                "return_mean", *STAGES[adapter]}
    assert expected <= set(result) and set(result) & set(SESSION_METRICS) <= expected | {
        "queue_wait_ms", "h2d_mb_per_s"}
    fracs = {k: result[k] for k in STAGES[adapter]}
    assert all(0 <= v <= 1 for v in fracs.values()), fracs
    assert result["env_frac"] > 0 and result["inference_frac"] > 0 and result["learn_frac"] > 0
    updates = result["updates_per_s"] * result["seconds"]
    assert result["samples_per_s"] == pytest.approx(updates * per_update / result["seconds"])
    hist = session.info["policy_lag_hist"]
    assert sum(hist) > 0 and len(hist) == result["policy_lag_max"] + 1
    if adapter == "seed":  # one unit is one update, and every batch is acted on with the newest parameters
        assert result["samples_per_s"] == pytest.approx(result["steps_per_s"])
        assert result["actor_steps_per_s"] == pytest.approx(result["steps_per_s"])
        assert hist == [round(updates)] and result["policy_lag_mean"] == 0
        assert result["h2d_mb_per_s"] == 0 and result["queue_wait_ms"] > 0  # on the CPU nothing crosses to a device
    else:  # a unit ends after updates_per_unit updates of any worker; their lag is other workers' updates
        assert result["steps_per_s"] == pytest.approx(result["samples_per_s"], rel=0.3)
        assert sum(hist) == pytest.approx(updates, abs=2 * workers)
        assert result["policy_lag_mean"] == pytest.approx(sum(i * h for i, h in enumerate(hist)) / sum(hist))
        assert result["wait_frac"] == 0 or options.get("lock")  # lock-free: nobody waits
    assert result["return_mean"] >= 0  # episodes ended within the window (nan before the first)


@pytest.mark.parametrize("policy", ["cnn", "lstm:hidden=32"])
def test_seed_on_a_dict_observation_with_a_screen(policy, monkeypatch):
    """toyenvs' dict_image (a 48x64x3 uint8 screen beside 5 floats) under `--policy cnn` and `lstm`: the actors
    share the screen as uint8 and the floats as floats, one array each; the central inference copies each into its
    columns of the network's input; every unit is exactly batch_T x num_envs env steps."""
    monkeypatch.syspath_prepend(str(REPO / "examples"))   # toyenvs; the actors fork
    wl = Workload("toyenvs:make_corridor", 4, parse_policy(policy), seed=0,
                  env_kwargs={"obs": "dict_image", "screen": "48x64", "length": 6, "episode_len": 7})
    session = _open("seed", wl, batch_T=4, workers=2)
    try:
        screen, variables = session.buf["obs_now"]["screen"], session.buf["obs_now"]["vars"]
        assert screen.dtype == np.uint8 and screen.shape == (4, 48, 64, 3)
        assert variables.dtype == np.float32 and variables.shape == (4, 5)
        assert session.traj_obs.shape[-1] == 48 * 64 * 3 + 5
        result = measure(session.step, TINY, session.metrics)
    finally:
        session.close()
    assert result["units"] >= 5 and result["env_steps"] == result["units"] * 4 * 4
    assert screen.any() and variables.any()


def _train(session, adapter, max_updates, target=100.0):
    """Step until the mean return of the last ~100 episodes passes target or the budget is spent;
    returns (first return_mean seen, last, updates made)."""
    first = last = float("nan")
    updates = 0
    while updates < max_updates:
        updates += session.step() // session.info["batch_size"]
        last = session.return_mean()
        if math.isnan(first) and not math.isnan(last):
            first = last
        if last > target:
            break
    return first, last, updates


# seed is deterministic (one process samples every action from a seeded generator; actors are in lockstep)
# a3c is not (Hogwild): its budget leaves room
@pytest.mark.parametrize("adapter, options, max_updates", [
    ("seed", {}, 1500),
    ("a3c", {}, 3000),
])
def test_learns_cartpole(adapter, options, max_updates):
    session = _open(adapter, CARTPOLE, **options)
    try:
        t0 = time.monotonic()
        first, last, updates = _train(session, adapter, max_updates)
        elapsed = time.monotonic() - t0
    finally:
        session.close()
    assert first < 40, f"{adapter} started from a return_mean of {first}"
    assert last > 100, f"{adapter}: return_mean {first:.1f} -> {last:.1f} after {updates} updates ({elapsed:.1f} s)"


@pytest.mark.parametrize("adapter, who, context", [
    ("seed", "actor", "fork"), ("a3c", "worker", "fork"),
    ("seed", "actor", "forkserver"), ("a3c", "worker", "spawn"),  # named semaphores, helper processes
])
def test_a_killed_actor_fails_the_step_and_close_cleans_up(adapter, who, context):
    shm_before = proctree.shm_snapshot()
    session = _open(adapter, Workload("CartPole-v1", 4, SMALL, seed=0), workers=2, batch_T=4, context=context)
    try:
        session.step()
        pid = session.procs[1].pid
        os.kill(pid, signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises(RuntimeError, match=rf"{adapter} {who} 1 \(pid {pid}\) exited with code -9"):
            for _ in range(100_000):  # the kill lands between steps or inside one
                session.step()
        assert time.monotonic() - t0 < 3  # actors are polled once per second at most
    finally:
        session.close()
    assert session.procs == [] and not psutil.pid_exists(pid)
    assert shm_left_since(shm_before) == {}


def test_actors_exit_when_the_cell_process_is_killed(tmp_path):
    """The runner kills a cell's process group anyway; an actor must not depend on that."""
    script = tmp_path / "cell.py"
    script.write_text(
        "import os\n"
        "from rlbench import registry\n"
        "from rlbench.api import PolicySpec, Workload\n"
        "if __name__ == '__main__':\n"
        "    pids = []\n"
        "    for name in ('seed', 'a3c'):\n"
        "        cls = registry.get(name)\n"
        "        s = cls().open(Workload('CartPole-v1', 4, PolicySpec('mlp', hidden=(8,))),\n"
        "                       cls.resolve_options({'batch_T': 4}))\n"
        "        s.step()\n"
        "        pids += [p.pid for p in s.procs]\n"
        "    print(' '.join(map(str, pids)), flush=True)\n"
        "    os.kill(os.getpid(), 9)\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=REPO)
    pids = [int(p) for p in out.stdout.split()]
    assert len(pids) == 4, out.stderr
    gone, alive = psutil.wait_procs([psutil.Process(p) for p in pids if psutil.pid_exists(p)], timeout=10)
    assert not alive, f"actors outlived the cell process: {alive}"


@pytest.mark.parametrize("adapter, workload, options, reason", [
    ("seed", Workload("CartPole-v1", 4), {}, "seed trains the policy: needs policy mlp, cnn, cnn:impala or lstm (got random)"),
    ("a3c", Workload("CartPole-v1", 6, MLP), {"workers": 4}, "a3c splits num_envs over workers: num_envs=6"),
    ("seed", Workload("HalfCheetah-v4", 4, MLP), {}, "seed samples a categorical policy"),
    ("a3c", Workload("CartPole-v1", 4, PolicySpec("mlp", device="cuda")), {},
     "a3c's workers compute gradients on the CPU"),
    ("ddp", Workload("HalfCheetah-v4", 4, MLP), {}, "ddp's A2C samples a categorical policy"),
    ("ddp", Workload("CartPole-v1", 3, MLP), {}, "ddp splits num_envs over ranks"),
])
def test_unsupported_settings_name_the_reason(adapter, workload, options, reason):
    cls = registry.get(adapter)
    assert cls().supports(workload, cls.resolve_options(options)).startswith(reason)


@pytest.mark.parametrize("adapter, options, message", [
    ("a3c", {"updates_per_unit": 0}, "option updates_per_unit=0 must be an integer >= 1"),
    ("seed", {"batch_T": 0}, "option batch_T=0 must be an integer >= 1"),
])
def test_out_of_range_options_are_refused_before_supports(adapter, options, message):
    with pytest.raises(ValueError, match=message):
        registry.get(adapter).resolve_options(options)


def test_ddp_is_rlpyt_sync_under_the_learner_kind():
    cls = registry.get("ddp")
    assert cls.kind == "learner" and "rlpyt-sync" in cls.description
    assert cls.options == registry.get("rlpyt-sync").options
    session = _open("ddp", Workload("CartPole-v1", 4, PolicySpec("mlp", hidden=(16,)), seed=0), ranks=2, batch_T=8)
    try:
        result = measure(session.step, TINY, session.metrics)
    finally:
        session.close()
    assert result["updates_per_s"] > 0 and result["env_steps"] % 32 == 0
    assert result["samples_per_s"] == pytest.approx(result["steps_per_s"])
    assert session.info["policy_lag_hist"] == [result["units"]] and result["policy_lag_max"] == 0
