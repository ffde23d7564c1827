"""GA3C (`ga3c`): a real cell through the measurement protocol reports its queues, its batches and its
policy lag with consistent counts, it learns CartPole, and a dead agent fails the session with nothing
(process, thread or shared-memory entry) outliving close()."""
import math
import os
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest
from support import REPO, live_children, shm_left_since

from rlbench import registry
from rlbench.api import SESSION_METRICS, PolicySpec, Unsupported, Workload
from rlbench.planning.plan import TimingProtocol
from rlbench.running import proctree
from rlbench.running.timing import measure

pytest.importorskip("torch")

MLP = PolicySpec("mlp", hidden=(64, 64))
SMALL = PolicySpec("mlp", hidden=(8,))
TINY = TimingProtocol(warmup_s=0.05, warmup_units=2, duration_s=0.3, min_units=5)
CARTPOLE = Workload("CartPole-v1", 8, MLP, seed=0)
SYNTHETIC = Workload("rlbench/Synthetic-v0", 6, SMALL, seed=0,  # uint8 observations, short episodes
                     env_kwargs={"obs_bytes": 8, "episode_len": 5, "step_cost_us": 0.0})
REPORTED = {"updates_per_s", "samples_per_s", "actor_steps_per_s", "policy_lag_mean", "policy_lag_max",
            "prediction_queue_mean", "training_queue_mean", "predict_batch_mean", "train_batch_mean",
            "queue_wait_ms", "env_frac", "inference_frac", "learn_frac", "wait_frac", "transfer_frac",
            "h2d_mb_per_s", "return_mean"}


def _open(workload, **options):
    cls = registry.get("ga3c")
    resolved = cls.resolve_options(options)
    assert cls().supports(workload, resolved) is None
    return cls().open(workload, resolved), resolved


def _threads():
    return [t for t in threading.enumerate() if t.name.startswith("ga3c-")]


@pytest.mark.parametrize("workload, options", [
    (CARTPOLE, {}),
    (SYNTHETIC, {"agents": 3, "predictors": 2, "trainers": 2, "predict_batch": 2, "train_batch": 3, "t_max": 3,
                 "predict_wait_ms": 0.5, "max_queue": 4}),
], ids=["cartpole", "uint8-2-predictors-2-trainers"])
def test_measure_reports_queues_batches_and_lag_with_consistent_counts(workload, options):
    session, opts = _open(workload, **options)
    try:
        result = measure(session.step, TINY, session.metrics)
        hist = session.info["policy_lag_hist"]
    finally:
        session.close()
    n = workload.num_envs // opts["agents"]
    per_experience = opts["t_max"] * n
    assert session.info["workers"] == opts["agents"]
    assert session.info["batch_size"] == opts["train_batch"] * per_experience  # at most, per update
    assert REPORTED <= set(result) and set(result) & set(SESSION_METRICS) <= REPORTED
    assert result["units"] >= 5 and result["env_steps"] > 0 and result["env_steps"] % per_experience == 0

    # counts: every update consumed train_batch_mean experiences of t_max x n transitions
    updates = result["updates_per_s"] * result["seconds"]
    samples = result["samples_per_s"] * result["seconds"]
    assert updates == pytest.approx(round(updates)) and updates >= 1
    assert samples == pytest.approx(updates * result["train_batch_mean"] * per_experience)
    # one unit is one update (step() hands them out in order; the window may cut a few in flight)
    assert result["units"] == pytest.approx(updates, rel=0.3, abs=5)
    assert result["steps_per_s"] == pytest.approx(result["samples_per_s"], rel=0.3, abs=5 * per_experience)

    # the batches actually formed stay within their caps (a predictor never holds two requests of one agent)
    assert 1 <= result["predict_batch_mean"] <= min(opts["predict_batch"], opts["agents"])
    assert 1 <= result["train_batch_mean"] <= opts["train_batch"]
    assert result["prediction_queue_mean"] >= 0 and result["training_queue_mean"] >= 0
    assert result["training_queue_mean"] <= opts["max_queue"]

    # the lag histogram counts every consumed prediction (one agent's step) once
    assert sum(hist) * n == round(samples) and len(hist) == result["policy_lag_max"] + 1
    assert result["policy_lag_mean"] == pytest.approx(sum(i * h for i, h in enumerate(hist)) / sum(hist))

    fracs = {k: result[k] for k in REPORTED if k.endswith("_frac")}
    assert all(0 <= v <= 1 for v in fracs.values()), fracs
    assert result["env_frac"] > 0 and result["inference_frac"] > 0 and result["learn_frac"] > 0
    assert result["queue_wait_ms"] >= 0 and result["h2d_mb_per_s"] == 0  # on the CPU nothing crosses to a device
    assert result["actor_steps_per_s"] > 0 and result["return_mean"] >= 0
    assert _threads() == []


@pytest.mark.slow
def test_learns_cartpole():
    """Asynchronous (the lag varies run to run), so the budget leaves room: ~1500-4000 updates usually."""
    session, _ = _open(CARTPOLE)
    first = last = float("nan")
    updates = 0
    t0 = time.monotonic()
    try:
        while updates < 8000:
            session.step()
            updates += 1
            last = session.return_mean()
            if math.isnan(first) and not math.isnan(last):
                first = last
            if last > 100:
                break
    finally:
        session.close()
    elapsed = time.monotonic() - t0
    assert first < 40, f"ga3c started from a return_mean of {first}"
    assert last > 100, f"ga3c: return_mean {first:.1f} -> {last:.1f} after {updates} updates ({elapsed:.1f} s)"


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_a_killed_agent_fails_the_step_and_close_leaves_nothing(context):
    shm_before, children_before = proctree.shm_snapshot(), live_children()
    session, _ = _open(Workload("CartPole-v1", 4, SMALL, seed=0), t_max=4, context=context)
    try:
        session.step()
        agents = [p.pid for p in session.procs]
        assert live_children() - children_before >= set(agents)
        pid = agents[1]
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(RuntimeError, match=rf"ga3c agent 1 \(pid {pid}\) exited with code -9"):
            for _ in range(100_000):  # the kill lands between steps or inside one
                session.step()
    finally:
        session.close()
    assert session.procs == [] and not any(psutil.pid_exists(p) for p in agents)
    assert live_children() - children_before == set()
    assert _threads() == []
    assert shm_left_since(shm_before) == {}


def test_agents_exit_when_the_cell_process_is_killed(tmp_path):
    """The runner kills a cell's process group anyway; an agent must not depend on that."""
    script = tmp_path / "cell.py"
    script.write_text(
        "import os\n"
        "from rlbench import registry\n"
        "from rlbench.api import PolicySpec, Workload\n"
        "if __name__ == '__main__':\n"
        "    cls = registry.get('ga3c')\n"
        "    s = cls().open(Workload('CartPole-v1', 4, PolicySpec('mlp', hidden=(8,))),\n"
        "                   cls.resolve_options({'t_max': 4}))\n"
        "    s.step()\n"
        "    print(' '.join(str(p.pid) for p in s.procs), flush=True)\n"
        "    os.kill(os.getpid(), 9)\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=REPO)
    pids = [int(p) for p in out.stdout.split()]
    assert len(pids) == 2, out.stderr
    _, alive = psutil.wait_procs([psutil.Process(p) for p in pids if psutil.pid_exists(p)], timeout=10)
    assert not alive, f"agents outlived the cell process: {alive}"


@pytest.mark.parametrize("workload, options, reason", [
    (Workload("CartPole-v1", 4), {}, "ga3c trains the policy: needs policy mlp, cnn or cnn:impala (got random)"),
    (Workload("CartPole-v1", 6, MLP), {"agents": 4}, "ga3c splits num_envs over agents: num_envs=6"),
    (Workload("HalfCheetah-v4", 4, MLP), {}, "ga3c samples a categorical policy"),
])
def test_unsupported_settings_name_the_reason(workload, options, reason):
    cls = registry.get("ga3c")
    assert cls().supports(workload, cls.resolve_options(options)).startswith(reason)


def test_cuda_without_a_device_is_unsupported_before_any_agent_starts():
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    cls = registry.get("ga3c")
    workload, before = Workload("CartPole-v1", 4, PolicySpec("mlp", device="cuda")), live_children()
    assert cls().supports(workload, cls.resolve_options({})) is None  # a machine's reason: the row says it
    with pytest.raises(Unsupported, match="^no CUDA device$"):
        cls().open(workload, cls.resolve_options({}))
    assert live_children() == before


@pytest.mark.parametrize("option", ["agents", "predictors", "trainers", "predict_batch", "train_batch", "t_max",
                                    "max_queue"])
def test_counts_below_one_are_refused_before_supports(option):
    with pytest.raises(ValueError, match=rf"option {option}=0 must be an integer >= 1"):
        registry.get("ga3c").resolve_options({option: 0})
