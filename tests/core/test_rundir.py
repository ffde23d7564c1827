"""The run folder: where a run may write (a new or empty folder, or a run being resumed), the lock that
keeps it to one run, the plan it keeps (plan.json) and what it is used for: `rlbench resume`, `rlbench run
--resume`, `rlbench rerun`; and the exit codes a run ends with."""
import json
import os
import subprocess
import sys
import time

import pytest
from support import TINY, read_run, run_cli, sweep, write_suite

from rlbench import cli
from rlbench.running import rundir

SERIAL = ["run", "--adapter", "serial", "--env", "CartPole-v1", *TINY]


def _refused(capsys, argv) -> str:
    rc = cli.main([str(a) for a in argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("rlbench: error: "), err
    return err[0]


def test_a_folder_of_other_files_is_refused_and_left_untouched(tmp_path, capsys):
    out = tmp_path / "v"
    (out / "scratch").mkdir(parents=True)
    (out / "scratch" / "keep.txt").write_text("x")
    (out / "index.html").write_text("mine")
    line = _refused(capsys, [*SERIAL, "--out", out])
    assert str(out) in line and "not empty and not an rlbench run" in line
    assert sorted(p.name for p in out.rglob("*")) == ["index.html", "keep.txt", "scratch"]
    assert (out / "index.html").read_text() == "mine"


def test_a_file_as_out_is_refused(tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    assert "is a file, not a folder" in _refused(capsys, [*SERIAL, "--out", tmp_path / "f"])
    assert (tmp_path / "f").read_text() == "x"


def test_an_unwritable_out_is_one_line(tmp_path, capsys, monkeypatch):
    """As root, permissions do not stop a write: the refusal is simulated where mkdir fails."""
    def refuse(path, *a, **k):
        raise PermissionError(13, "Permission denied", str(path))
    monkeypatch.setattr(os, "makedirs", refuse)
    assert "cannot create it (Permission denied)" in _refused(capsys, [*SERIAL, "--out", tmp_path / "ro"])


def test_an_empty_folder_is_a_new_run(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    run = run_cli(SERIAL, tmp_path / "empty", capsys)
    assert run.rc == 0 and len(run.rows) == 1


def _hold_lock(out):
    """A process that holds the run folder's lock, as a running `rlbench run` would."""
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from rlbench.running.rundir import RunLock\n"
        "lock = RunLock(sys.argv[1]).acquire(); print('held', flush=True); time.sleep(60)"), str(out)],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return out, holder


def test_a_second_run_into_a_held_folder_names_the_holder(tmp_path, capsys):
    out, holder = _hold_lock(tmp_path / "held")
    try:
        line = _refused(capsys, [*SERIAL, "--out", out])
        assert f"in use by another rlbench run (pid {holder.pid}" in line
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    assert not (out / "results.jsonl").exists()


def test_the_plan_is_kept_and_rerun_reproduces_it(tmp_path, capsys):
    suite = write_suite(tmp_path, sweep(["serial"], num_envs=[1, 2]))
    first = run_cli(["run", suite, "--repeats", "2", "--only", "*n=2*"], tmp_path / "a", capsys)
    assert first.rc == 0
    plan = json.loads((tmp_path / "a" / "plan.json").read_text())
    assert plan["suite_text"] == suite.read_text() and plan["cells"] == ["serial/CartPole-v1/n=2/random"]
    assert plan["settings"]["repeats"] == 2 and plan["machine"]["python"]
    suite.unlink()  # rerun plans from the suite text the folder kept
    assert cli.main(["rerun", str(tmp_path / "a"), "--out", str(tmp_path / "b")]) == 0
    capsys.readouterr()
    again = read_run(tmp_path / "b")
    assert sorted((r["cell_id"], r["repeat"]) for r in again) == sorted((r["cell_id"], r["repeat"]) for r in first.rows)


def _interrupted_run(tmp_path, capsys) -> tuple:
    """A finished 2 cells x 3 repeats run with three rows removed, as an interrupted run would lack them."""
    suite = write_suite(tmp_path, sweep(["serial"], num_envs=[1, 2]))
    out = tmp_path / "run"
    assert run_cli(["run", suite, "--repeats", "3"], out, capsys).rc == 0
    lines = (out / "results.jsonl").read_text().splitlines()
    (out / "results.jsonl").write_text("\n".join(lines[:3]) + "\n")
    return suite, out, [(r["cell_id"], r["repeat"]) for r in read_run(out)]


def test_resume_runs_only_the_missing_repeats(tmp_path, capsys):
    suite, out, kept = _interrupted_run(tmp_path, capsys)
    assert cli.main(["resume", str(out)]) == 0
    assert "3 rows kept" in capsys.readouterr().err
    rows = read_run(out)
    assert [(r["cell_id"], r["repeat"]) for r in rows[:3]] == kept  # the kept rows are untouched, first
    assert sorted((r["cell_id"], r["repeat"]) for r in rows) == sorted(
        (f"serial/CartPole-v1/n={n}/random", rep) for n in (1, 2) for rep in range(3))
    assert len({r["run_id"] for r in rows}) == 1
    assert json.loads((out / "env.json").read_text())["resumed_at"]


def test_run_with_resume_refuses_another_plan_naming_the_difference(tmp_path, capsys):
    suite, out, _ = _interrupted_run(tmp_path, capsys)
    before = (out / "results.jsonl").read_text()
    line = _refused(capsys, ["run", suite, "--repeats", "5", "--resume", out])
    assert "cannot resume" in line and "settings.repeats: 3 -> 5" in line
    line = _refused(capsys, ["run", suite, "--repeats", "3", "--only", "*n=1*", "--resume", out])
    assert "cells: not planned now: serial/CartPole-v1/n=2/random" in line
    assert (out / "results.jsonl").read_text() == before
    assert cli.main(["run", str(suite), "--repeats", "3", "--resume", str(out)]) == 0  # the same plan: resumed
    assert len(read_run(out)) == 6


def test_resume_refuses_another_machine(tmp_path, capsys):
    _, out, _ = _interrupted_run(tmp_path, capsys)
    plan = json.loads((out / "plan.json").read_text())
    plan["machine"]["cpu_model"] = "Another CPU"
    (out / "plan.json").write_text(json.dumps(plan))
    line = _refused(capsys, ["resume", out])
    assert "machine.cpu_model: \"Another CPU\" ->" in line


def test_resume_of_a_folder_that_is_not_a_run(tmp_path, capsys):
    (tmp_path / "x").mkdir()
    assert "not a resumable rlbench run (no plan.json)" in _refused(capsys, ["resume", tmp_path / "x"])
    assert "not a folder" in _refused(capsys, ["resume", tmp_path / "missing"])


def test_duplicate_cells_run_once_with_a_warning(tmp_path, capsys):
    run = run_cli(["run", "--adapter", "serial", "--adapter", "serial", "--env", "CartPole-v1",
                   "--num-envs", "1,1", *TINY], tmp_path / "out", capsys)
    assert run.rc == 0 and len(run.rows) == 1
    assert "cell serial/CartPole-v1/n=1/random is given more than once; it runs once" in run.stderr


def test_error_rows_exit_1_unless_allowed(tmp_path, capsys, monkeypatch):
    from rlbench.running import runner
    monkeypatch.setattr(runner.Runner, "command", lambda self, job, spec: [sys.executable, "-c", "raise SystemExit(3)"])
    run = run_cli(SERIAL, tmp_path / "a", capsys)
    assert run.rc == 1 and run.rows[0]["status"] == "error" and "exit code 3" in run.rows[0]["error"]
    assert "exit 1 (--allow-errors: exit 0)" in run.stderr and (tmp_path / "a" / "summary.csv").exists()
    assert run_cli([*SERIAL, "--allow-errors"], tmp_path / "b", capsys).rc == 0


def test_report_leaves_out_lines_that_are_not_rows(tmp_path, capsys):
    run = run_cli(SERIAL, tmp_path / "out", capsys)
    with open(tmp_path / "out" / "results.jsonl", "a") as f:
        f.write("{}\n[1, 2]\n")
    assert cli.main(["report", str(run.out)]) == 0
    err = capsys.readouterr().err
    assert "line(s) 2, 3 are not results rows; left out" in err


def test_disk_full_keeps_every_earlier_row_whole(tmp_path, capsys, monkeypatch):
    """A write that fails midway (ENOSPC after part of the line) leaves the file as it was before it."""
    from rlbench.results import store as results
    real_write, calls = os.write, []

    def write(fd, data):
        if not os.readlink(f"/proc/self/fd/{fd}").endswith("results.jsonl"):
            return real_write(fd, data)
        calls.append(len(data))
        if len(calls) == 2:  # the second row: half of it lands, then the disk is full
            real_write(fd, data[:len(data) // 2])
            raise OSError(28, "No space left on device")
        return real_write(fd, data)
    monkeypatch.setattr(results.os, "write", write)
    run = run_cli([*SERIAL, "--num-envs", "1,2,3"], tmp_path / "out", capsys)
    assert run.rc == 1
    assert "cannot write" in run.stderr and "No space left on device" in run.stderr
    lines = (tmp_path / "out" / "results.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["num_envs"] == 1
    assert (tmp_path / "out" / "summary.csv").exists()
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.endswith(".tmp")]


def test_a_failing_report_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    from rlbench.report import writer as report
    target = tmp_path / "index.html"
    target.write_text("old")

    def fail(fd):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(report.os, "fsync", fail)
    with pytest.raises(OSError):
        report.write_atomic(str(target), "new")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["index.html"]


def test_the_lock_is_released_when_the_holder_is_killed(tmp_path):
    out, holder = _hold_lock(tmp_path / "held")
    holder.kill()
    holder.wait()
    holder.stdout.close()
    deadline = time.monotonic() + 10
    while True:
        try:
            rundir.RunLock(str(out)).acquire().release()
            break
        except Exception:
            assert time.monotonic() < deadline
            time.sleep(0.05)
