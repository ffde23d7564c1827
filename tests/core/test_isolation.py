"""A cell that hangs, raises or leaves processes and shared memory behind is contained: a `timeout` or
`error` row, the sweep goes on, and nothing it started survives it.

The misbehaving adapters live in tests/support/fake_adapters.py and reach the cell processes through a fake
distribution's `rlbench.adapters` entry points on PYTHONPATH, so the CLI runs in a fresh interpreter.
"""
import os
import subprocess
import sys
import time

import psutil
import pytest
from support import (
    alive,
    live_children,
    misbehaving_adapters_env,
    read_run,
    run_cli,
    run_cli_subprocess,
    sweep,
    write_suite,
)

TIMEOUT_S = 3
OTHERS_TIMEOUT_S = 60
ADAPTERS = ["test-hang", "test-boom", "test-leaky", "test-shm-leak", "serial"]


@pytest.fixture(scope="module")
def isolated(tmp_path_factory):
    """One sweep over every misbehaving adapter, then a well-behaved one."""
    base = tmp_path_factory.mktemp("isolation")
    pid_dir = base / "pids"
    pid_dir.mkdir()
    env = misbehaving_adapters_env(base / "plugin", pid_dir)
    # the hanging cell's timeout is short, the others' long: a loaded machine may take seconds to start a cell
    suite = write_suite(base, sweep(ADAPTERS[:1], num_envs=[2]) + f"protocol = {{ timeout_s = {TIMEOUT_S} }}\n"
                        + sweep(ADAPTERS[1:], num_envs=[2]) + f"protocol = {{ timeout_s = {OTHERS_TIMEOUT_S} }}\n")
    children_before = live_children()
    run = run_cli_subprocess(["run", str(suite)], base / "out", env=env, cwd=base)
    run.pids = {p.stem: int(p.read_text()) for p in pid_dir.glob("*.pid") if p.stem != "shm"}
    run.shm = (pid_dir / "shm.pid").read_text() if (pid_dir / "shm.pid").exists() else None
    run.children_before = children_before
    run.children_after = live_children()
    return run


def test_sweep_finishes_with_one_row_per_cell_in_order(isolated):
    assert isolated.rc == 1, isolated.stderr  # error and timeout rows: exit 1, the report still written
    assert [r["adapter"] for r in isolated.rows] == ADAPTERS
    assert (isolated.out / "results.csv").exists() and (isolated.out / "index.html").exists()


def test_hanging_cell_is_a_timeout(isolated):
    row = isolated.row("test-hang")
    assert row["status"] == "timeout"
    assert f"no result after {TIMEOUT_S}s" in row["error"]
    # it hangs in its first step: the reason says the session opened and the warm-up never finished
    assert "; the session opened in " in row["error"] and ", then the warm-up (" in row["error"]
    assert TIMEOUT_S <= row["wall_s"] < TIMEOUT_S + 30
    assert row.get("env_steps") is None


def test_hanging_cell_process_tree_is_killed(isolated):
    for what in ("hang-cell", "hang-child", "hang-own-session"):
        assert what in isolated.pids, f"the hanging adapter never recorded {what}: {isolated.stderr}"
        assert not alive(isolated.pids[what]), f"{what} (pid {isolated.pids[what]}) survived the timeout"


def test_raising_adapter_is_an_error_with_the_message(isolated):
    row = isolated.row("test-boom")
    assert row["status"] == "error"
    assert row["error"] == "RuntimeError: boom"
    log = (isolated.out / row["log"]).read_text()
    assert "Traceback" in log and "boom" in log


def test_sweep_continues_after_the_failures(isolated):
    row = isolated.row("serial")
    assert row["status"] == "ok" and not row.get("error")
    assert row["env_steps"] > 0


def test_leftover_daemons_of_a_finished_cell_are_killed(isolated):
    row = isolated.row("test-leaky")
    assert row["status"] == "ok"  # the measurement itself is fine; the leak is reported
    assert row["error"] == "2 leftover process(es) killed after the cell"
    for what in ("leaky-own-session", "leaky-double-fork"):
        assert what in isolated.pids, isolated.stderr
        assert not alive(isolated.pids[what]), f"{what} (pid {isolated.pids[what]}) survived the cell"


def test_leftover_shared_memory_is_removed(isolated):
    row = isolated.row("test-shm-leak")
    assert row["status"] == "ok"
    assert isolated.shm and isolated.shm.startswith("rlbenchtest_leak_")
    assert f"removed shm: {isolated.shm}" in row["error"]
    assert not os.path.exists(os.path.join("/dev/shm", isolated.shm))


def test_no_process_survives_the_sweep(isolated):
    assert isolated.children_after <= isolated.children_before
    assert not [pid for pid in isolated.pids.values() if alive(pid)]


def test_summary_reports_each_status(isolated):
    summary = (isolated.out / "summary.csv").read_text()
    assert "timeout" in summary and "RuntimeError: boom" in summary


def test_runner_leaves_other_processes_of_its_host_alone(tmp_path, capsys):
    """Run in-process, the runner must not kill processes that were running before the cell started,
    grandchildren included (e.g. the workers of some pool the host program owns)."""
    script = ("import subprocess, sys, time\n"
              "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
              "print(p.pid, flush=True)\n"
              "time.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        grandchild = int(parent.stdout.readline())
        run = run_cli(["run", "--adapter", "serial", "--env", "CartPole-v1", "--num-envs", "1",
                       "--repeats", "1", "--duration", "0.05"], tmp_path / "out", capsys)
        assert run.rc == 0
        row = run.rows[0]
        assert row["status"] == "ok" and not row.get("error"), row.get("error")
        assert alive(parent.pid) and alive(grandchild)
    finally:
        for p in psutil.Process(parent.pid).children(recursive=True):
            p.kill()
        parent.kill()
        parent.wait()
        parent.stdout.close()
        psutil.wait_procs([p for p in psutil.Process().children() if p.pid == grandchild], timeout=3)


def test_sigterm_mid_cell_kills_the_cell_and_keeps_finished_rows(tmp_path):
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    env = misbehaving_adapters_env(tmp_path / "plugin", pid_dir)
    suite = write_suite(tmp_path, sweep(["serial", "test-hang"], num_envs=[1, 2]))  # serial n=1, n=2, then hang
    out = tmp_path / "out"
    cli = subprocess.Popen([sys.executable, "-m", "rlbench.cli", "run", str(suite), "--out", str(out)], env=env,
                           cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (pid_dir / "hang-own-session.pid").exists():  # the hanging cell is running
            assert cli.poll() is None and time.monotonic() < deadline, "the hanging cell never started"
            time.sleep(0.05)
        cli.terminate()
        _, err = cli.communicate(timeout=60)
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
    assert cli.returncode == 130, err
    assert "interrupted" in err
    rows = read_run(out)
    assert [(r["adapter"], r["num_envs"], r["status"]) for r in rows] == [("serial", 1, "ok"), ("serial", 2, "ok")]
    assert (out / "summary.csv").exists() and "ended_at" in (out / "env.json").read_text()
    pids = {p.stem: int(p.read_text()) for p in pid_dir.glob("hang-*.pid")}
    assert len(pids) == 3 and not [what for what, pid in pids.items() if alive(pid)]


def test_an_interrupt_removes_what_it_cut_short_of_the_runs_temp_folders_and_no_others(tmp_path, monkeypatch, capsys):
    """A signal landing inside a repeat's cleanup skips the rest of it; the run's end removes that repeat's temp
    folder (named after the run's pid), never one of another process (a pid with the same leading digits)."""
    import tempfile

    from rlbench.running.runner import temp_prefix
    from rlbench.running.session import Outcome, stops_early
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    ours = tmp_path / f"{temp_prefix()}cut"
    theirs = tmp_path / f"{temp_prefix(os.getpid() * 10 + 1)}running"
    for folder in (ours, theirs):
        (folder / "session").mkdir(parents=True)
    outcome = Outcome()
    with stops_early(outcome, str(tmp_path / "out")):
        raise KeyboardInterrupt
    assert outcome.interrupted == "SIGINT" and "interrupted" in capsys.readouterr().err
    assert not ours.exists() and (theirs / "session").is_dir()
