"""Faults, one test each: whatever goes wrong in a cell, in the harness or around it, the run yields the
rows it promises and leaves nothing behind.

THE FAULT TABLE (fault -> exit code; rows; what else the run yields -> test)

  cell hangs (test-hang, --timeout 3)
      -> 1; a timeout row "no result after 3s; process tree killed"; its tree, own-session child included,
      killed (the sweep going on after it: test_isolation.py)              test_a_faulty_cell_is_one_row[hang]
  cell raises (test-boom)
      -> 1; an error row "RuntimeError: boom"                              ...[raise]
  cell calls os._exit(3) mid-step (test-exit)
      -> 1; an error row "cell process ended without a result (exit code 3)"   ...[exit]
  cell calls os.abort() mid-step (test-abort)
      -> 1; an error row "... (killed by signal 6)"                        ...[abort]
  cell SIGKILLs one of its own workers (test-kill-worker: gymnasium-async, shared memory, spawn)
      -> 1; an error row "EOFError: worker process N was killed by SIGKILL" (BrokenPipeError when the
      cell writes to the dead worker first, ConnectionResetError when the worker died with a command unread);
      workers, heap segment, semaphores gone
                                                                           ...[kill_worker-spawn]
  ... the same under forkserver (the worker is the forkserver's child, not the cell's)
      -> the same row                                                      ...[kill_worker-forkserver]
  a Ray actor is killed (ray-actors)
      -> 1; an error row naming the actor; no Ray daemon, worker, plasma segment or session folder left
      test_a_killed_ray_actor_leaves_nothing_of_ray (slow); the row alone: test_ray_actors.py::
      test_a_killed_actor_is_an_error_row_and_the_sweep_goes_on
  rlbench gets SIGINT / SIGTERM / SIGHUP mid-cell
      -> 130; the finished rows kept, none for the running repeat; CSV/HTML written; the running cell's
      tree (own-session grandchild included) killed, its segment and TMPDIR removed
      test_an_interrupted_run_keeps_its_rows_and_kills_the_cell[SIGINT|SIGTERM|SIGHUP]
  rlbench tune gets SIGINT / SIGTERM / SIGHUP mid-search
      -> 130; every measured row whole; tune.json, env.json and the page hold a decision on every ok row,
      marked "interrupted after N s (SIGTERM)"            test_an_interrupted_tune_decides_on_what_it_measured[...]
  SIGTERM mid-search, then `rlbench resume DIR` on the tune
      -> 130, then 0; the kept rows first and unchanged, none run twice; the same profile and calibration, the
      budget's clock going on                             test_a_tune_resumed_goes_on_with_the_budget_left
  the disk fills up under a tune (as for a run)
      -> 1; one line "rlbench: error: cannot write .../results.jsonl: ..."; every earlier row whole
      test_a_tune_whose_disk_fills_keeps_its_rows
  rlbench started with SIGHUP ignored (nohup) gets SIGHUP mid-cell, then SIGTERM
      -> the hangup changes nothing (the cell goes on); SIGTERM: 130, the cell's tree killed
      test_a_run_started_under_nohup_rides_out_a_hangup
  rlbench gets SIGKILL mid-cell
      -> -9; the finished rows kept; within seconds the cell is dead (PR_SET_PDEATHSIG) and the reaper has
      killed the rest of its tree (own-session grandchild), removed the segment it held and its TMPDIR,
      and exited; the folder is unlocked (`rlbench report` works)
      test_a_killed_harness_leaves_nothing_behind
  the disk fills up while rows are written (a real 32 MiB tmpfs (room for the report, whose page inlines plotly.js), filled under the running sweep; as
  non-root: the store's writes fail in-process, half a row landing first)
      -> 1; one line "rlbench: error: cannot write .../results.jsonl: No space left on device ..."; every
      earlier row whole; once space is freed `rlbench report` and `rlbench resume` work
      test_disk_full_keeps_every_earlier_row_whole
  other runs beside it: gymnasium-async spawn and forkserver (--num-envs 2 --repeats 3 --duration 1)
  while short sweeps that leak segments and leave daemons run next to them
      -> 0 for all; every row of the two ok with no "removed shm" note; the short sweeps remove only their
      own leaks                                                   test_runs_side_by_side_leave_each_other_alone
  a second command on a folder a live run holds (`resume`, `run --resume`, `report`)
      -> 2, naming the holder's pid; the first run finishes, its rows unmixed
      test_a_second_command_on_a_held_folder_names_the_holder
  ... a plain `run --out DIR` into it
      -> 2, naming the holder's pid
      test_a_second_run_into_a_held_folder_names_the_holder
  SIGTERM mid-sweep, then `rlbench resume DIR`
      -> 130, then 0; exactly one row per (cell, repeat) in the end, the kept rows first, unchanged
      test_resume_after_an_interrupted_run_completes_it
  chaos: two sweeps side by side, 2 cells x 15 repeats each, every repeat's fault drawn from a seed (ok,
  raise, os._exit, hang past --timeout, leak a mapped segment, leave a daemon, kill a worker)
      -> 1; one row per repeat, with the status and message its fault gives          test_chaos (slow)

Invariants every test checks (Scene.assert_clean): every line of results.jsonl is one whole JSON row and
each (cell_id, repeat) has exactly one; no process of the test survives (the pids the fake adapters record
in $RLBENCH_TEST_PIDDIR, every process whose command line names the test's folder or whose environment
carries its $RLBENCH_TEST_PIDDIR - cells, their workers, daemons, reapers - and no new child of pytest);
no /dev/shm segment is left (support.shm_left_since); and a bystander process, started before the run,
still has its shared memory, its spawn-context semaphore and every file it wrote to /dev/shm during the
run (held or not) under the same inode, all working.

The fake adapters are tests/support/fake_adapters.py, installed for the cell processes through a fake
distribution's entry points on PYTHONPATH, so every run here is `python -m rlbench.cli` in a subprocess.
Nothing here looks at global process or /dev/shm state beyond what the test itself started: the tests
pass while another rlbench run goes on beside them.
"""
import collections
import contextlib
import errno
import glob
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest
from support import SUPPORT, TINY, TINY_PROTOCOL, live_children, read_run, run_cli, shm_left_since, write_suite
from support._dist import fake_distribution
from support.fake_adapters import CHAOS, chaos_fault
from support.procs import settle

from rlbench.results.store import ROW_KEYS
from rlbench.running import proctree

pytestmark = [pytest.mark.skipif(not os.path.isdir(proctree.SHM_DIR), reason="no /dev/shm"),
              pytest.mark.exclusive]   # its slow faults want the machine to themselves

MODULE = "rlbench_test_faults"
FAKES = {"hang": "Hang", "boom": "Boom", "leaky": "Leaky", "shm_leak": "ShmLeak", "exit": "ExitMidStep",
         "abort": "AbortMidStep", "hold": "Hold", "kill_worker": "KillWorker", "chaos": "Chaos", "gate": "Gate"}
TIMEOUT_S = 3         # the hanging cell's: it ends the test
FAULT_TIMEOUT_S = 60  # the others end in an error first; 3 s was too short for two spawned gymnasium workers to
                      # start on a loaded 2-core CI machine (a timeout row where the killed worker's error was due)
CARTPOLE = ["--env", "CartPole-v1"]

# A process that is not the run's: it holds a shared-memory segment and a spawn-context semaphore from
# before the run, and writes (and closes: nobody holds them) a new /dev/shm file every 0.2 s while the run
# goes on. Told to check, it reports whatever of it was removed, replaced (another inode) or broken.
BYSTANDER = r"""
import json, multiprocessing, os, sys, threading
from multiprocessing import shared_memory

SHM = "/dev/shm"


def key(name):
    st = os.stat(os.path.join(SHM, name), follow_symlinks=False)
    return [st.st_dev, st.st_ino]


shm = shared_memory.SharedMemory(create=True, size=4096)
shm.buf[:8] = b"bystand!"
lock = multiprocessing.get_context("spawn").Lock()
sem = "sem." + lock._semlock.name.lstrip("/")
held = {shm.name: key(shm.name), sem: key(sem)}
loose, stop = {}, threading.Event()


def churn():
    i = 0
    while not stop.wait(0.2) and i < 600:
        name = f"rlbenchtest_bystander_{os.getpid()}_{i}"
        with open(os.path.join(SHM, name), "wb") as f:
            f.write(b"x" * 64)
        loose[name] = key(name)
        i += 1


thread = threading.Thread(target=churn)
thread.start()
print(json.dumps(sorted(held)), flush=True)
sys.stdin.readline()
stop.set()
thread.join()
problems = []
for name, k in {**held, **loose}.items():
    try:
        if key(name) != k:
            problems.append(f"{name} replaced")
    except FileNotFoundError:
        problems.append(f"{name} removed")
if bytes(shm.buf[:8]) != b"bystand!":
    problems.append("the segment's content changed")
if lock.acquire(timeout=5):
    lock.release()
else:
    problems.append("the semaphore cannot be acquired")
for name in loose:
    try:
        os.unlink(os.path.join(SHM, name))
    except FileNotFoundError:
        pass
print(json.dumps({"problems": problems, "loose": len(loose)}), flush=True)
shm.close()
shm.unlink()
"""


class Bystander:
    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, "-c", BYSTANDER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.held = json.loads(self.proc.stdout.readline())
        self.report = None

    def check(self) -> dict:
        """Stop it; what it found (problems: [] when nothing of it was touched)."""
        if self.report is None:
            helpers = psutil.Process(self.proc.pid).children(recursive=True)  # its resource tracker
            out, _ = self.proc.communicate("check\n", timeout=30)
            psutil.wait_procs(helpers, timeout=10)
            self.report = json.loads(out.strip().splitlines()[-1])
        return self.report

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                self.check()
            except Exception:
                self.proc.kill()
                self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(Exception):
                f.close()


def rows_of(out: Path, pairs=None) -> list:
    """Every line of results.jsonl is one whole row; each (cell_id, repeat) has exactly one; `pairs`: the
    (cell_id, repeat) the rows must be, exactly."""
    path = Path(out) / "results.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    rows = []
    for number, line in enumerate(lines, 1):
        row = json.loads(line)  # a cut line fails here
        assert isinstance(row, dict) and all(k in row for k in ROW_KEYS), f"line {number} is not a row: {line}"
        rows.append(row)
    counts = collections.Counter((r["cell_id"], r["repeat"]) for r in rows)
    assert all(n == 1 for n in counts.values()), f"repeats with more than one row: {counts}"
    if pairs is not None:
        assert set(counts) == set(pairs), f"rows {sorted(counts)} != planned {sorted(pairs)}"
    return rows


class Scene:
    """One test's world: the fake adapters on PYTHONPATH, pid folders, a bystander, the rlbench processes
    it started, and what /dev/shm and pytest's children were before."""

    def __init__(self, root: Path):
        self.root = root
        self.markers = set()
        self.procs = []
        self.plugin = root / "plugin"
        self.plugin.mkdir()
        fake_distribution(self.plugin, MODULE, {n: f"{MODULE}:{c}" for n, c in FAKES.items()},
                          {MODULE: (SUPPORT / "fake_adapters.py").read_text()})
        self.env = self.env_for("pids")
        self.pid_dir = Path(self.env["RLBENCH_TEST_PIDDIR"])
        self.children_before = live_children()
        self.bystander = Bystander()
        self.shm_before = proctree.shm_snapshot()

    def env_for(self, name: str, **extra) -> dict:
        """An environment for rlbench processes with a pid folder of their own; everything they start
        inherits $RLBENCH_TEST_PIDDIR, which is how the test knows its processes."""
        pid_dir = self.root / name
        pid_dir.mkdir()
        self.markers.add(str(pid_dir))
        env = dict(os.environ)
        env.pop("RAY_ADDRESS", None)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(self.plugin), env.get("PYTHONPATH")]))
        return {**env, "RLBENCH_TEST_PIDDIR": str(pid_dir), **extra}

    # -- rlbench in a subprocess ----------------------------------------------------------------------

    def start(self, name: str, args, env=None, ignoring=()) -> subprocess.Popen:
        """`python -m rlbench.cli ARGS`, its output to files (runs side by side never block on a pipe); `ignoring`:
        signals it starts with ignored, as nohup starts a program (set just before the exec)."""
        cmd = [sys.executable, "-m", "rlbench.cli", *map(str, args)]
        if ignoring:
            cmd = [sys.executable, "-c", NOHUP, ",".join(ignoring), *cmd]
        with open(self.root / f"{name}.stdout", "w") as out, open(self.root / f"{name}.stderr", "w") as err:
            proc = subprocess.Popen(cmd, env=env or self.env, cwd=self.root, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=err, preexec_fn=_hangup_at_its_default)
        proc.name = name
        self.procs.append(proc)
        return proc

    def wait(self, proc, timeout=240) -> tuple:
        """(exit code, stdout, stderr). A harness still running at the timeout: the error carries where each of
        its threads was (py-spy) and what it printed, so a hang seen once in CI says where it hung."""
        hung = stacks = None
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            hung, spy = exc, Path(sys.executable).with_name("py-spy")
            if spy.exists():
                stacks = subprocess.run([str(spy), "dump", "--pid", str(proc.pid)], capture_output=True,
                                        text=True, timeout=30)
        proc.stdout_text = (self.root / f"{proc.name}.stdout").read_text()
        proc.stderr_text = (self.root / f"{proc.name}.stderr").read_text()
        if hung:
            raise AssertionError(f"{proc.name} still running after {timeout} s; its threads:\n"
                                 f"{stacks.stdout + stacks.stderr if stacks else '(no py-spy)'}\n"
                                 f"its stderr (an 'Exception ignored' line would say where a signal was lost):"
                                 f"\n{proc.stderr_text[-4000:]}") from hung
        return rc, proc.stdout_text, proc.stderr_text

    def rlbench(self, name, args, env=None, timeout=240) -> tuple:
        return self.wait(self.start(name, args, env), timeout)

    def wait_for(self, path: Path, proc, timeout=60) -> None:
        deadline = time.monotonic() + timeout
        while not path.exists():
            assert proc.poll() is None, f"{proc.name} ended ({proc.returncode}) before {path.name} appeared: " \
                                        f"{(self.root / f'{proc.name}.stderr').read_text()}"
            assert time.monotonic() < deadline, f"{path.name} never appeared"
            time.sleep(0.05)

    def recorded(self) -> dict:
        """'pid folder/what' -> pid, of every pid the fake adapters recorded."""
        return {what: pid for what, (pid, _) in self._recorded().items()}

    def _recorded(self) -> dict:
        out = {}
        for marker in self.markers:
            for p in Path(marker).glob("*.pid"):
                with contextlib.suppress(OSError, ValueError):
                    out[f"{Path(marker).name}/{p.stem}"] = int(p.read_text()), p.stat().st_mtime
        return out

    # -- what the test left ----------------------------------------------------------------------------

    def survivors(self) -> list:
        """Live processes of this test: recorded pids, any process naming the test's folder on its command
        line or carrying one of its pid folders in its environment (cells, workers, daemons, reapers, Ray's
        daemons), and any rlbench.running.child one of its rlbench processes started."""
        found, me = {}, os.getpid()
        recorded = {pid: when for pid, when in self._recorded().values()}
        harnesses = {str(proc.pid) for proc in self.procs}
        for p in psutil.process_iter():
            if p.pid == me:
                continue
            try:
                if p.status() == psutil.STATUS_ZOMBIE:
                    continue
                cmdline = " ".join(p.cmdline())
                # a recorded pid is the recorded process if it was there when its pid was written down
                # (pids wrap around: pid_max may be 32768)
                ours = (p.pid in recorded and p.create_time() <= recorded[p.pid] + 1) or str(self.root) in cmdline
                if not ours:
                    with contextlib.suppress(psutil.Error):
                        env = p.environ()
                        ours = (env.get("RLBENCH_TEST_PIDDIR") in self.markers or
                                ("rlbench.running.child" in cmdline and env.get("RLBENCH_HARNESS_PID") in harnesses))
                if ours:
                    found[p.pid] = cmdline[:160]
            except psutil.Error:
                continue
        return sorted(found.items())

    def temp_folders(self) -> list:
        """The per-repeat TMPDIRs of this test's rlbench processes."""
        return [f for proc in self.procs for f in glob.glob(os.path.join(tempfile.gettempdir(),
                                                                         f"rlbench-cell-{proc.pid}-*"))]

    def assert_clean(self) -> None:
        """No process, segment or temp folder of the test is left; the bystander was not touched."""
        for proc in self.procs:
            assert proc.poll() is not None, f"{proc.name} still runs"
        left = settle(self.survivors)
        assert not left, f"processes of this test survived: {left}"
        assert not settle(self.temp_folders), f"per-repeat temp folders left: {self.temp_folders()}"
        report = self.bystander.check()
        assert report["problems"] == [], f"the bystander's segments were touched: {report}"
        assert report["loose"] > 0
        left = shm_left_since(self.shm_before)
        assert left == {}, f"segments left in /dev/shm: {left}"
        new_children = settle(lambda: live_children() - self.children_before)
        assert not new_children, f"new children of pytest: {new_children}"

    def close(self) -> None:
        """Teardown: whatever a failed test left is killed and removed, so that it fails alone."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.bystander.stop()
        proctree.kill_tree([psutil.Process(pid) for pid, _ in self.survivors() if psutil.pid_exists(pid)])
        for marker in self.markers:  # segments the fake adapters made
            for f in [*Path(marker).glob("*.name"), *Path(marker).glob("*.shm")]:
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(proctree.SHM_DIR, f.read_text()))


@pytest.fixture
def scene(tmp_path):
    s = Scene(tmp_path)
    try:
        yield s
    finally:
        s.close()


def _alive(p: psutil.Process) -> bool:
    """Still running, and still the process it was (not a new one under its pid)."""
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _reaper_of(proc, timeout=30):
    """The rlbench.running.reaper process a running rlbench process started."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(proc.pid).children():
                with contextlib.suppress(psutil.Error):
                    if "rlbench.running.reaper" in " ".join(child.cmdline()):
                        return child
        time.sleep(0.05)
    raise AssertionError("no reaper process found")


# -- a cell that misbehaves ------------------------------------------------------------------------------

# the pipe to a killed worker is found closed as the cell reads (EOFError, ConnectionResetError with a command
# unread) or writes to it (BrokenPipeError)
KILLED_WORKER = (r"(EOFError: |BrokenPipeError: \[Errno 32\] Broken pipe \(|"
                 r"ConnectionResetError: \[Errno 104\] Connection reset by peer \()"
                 r"worker process {killed} was killed by SIGKILL\)?")
CELL_FAULTS = {
    # fault: (adapter, extra flags, status, the error (a regular expression), recorded pids that must be dead)
    "hang": ("test-hang", [], "timeout", f"no result after {TIMEOUT_S}s; process tree killed; the session opened "
             r"in [0-9.e+-]+ s, then the warm-up \(\d+ unit\(s\)\) did not finish; --timeout longer, or fewer env "
             r"steps a unit \(the adapter's options\)",
             ("hang-cell", "hang-child", "hang-own-session")),
    "raise": ("test-boom", [], "error", "RuntimeError: boom", ()),
    "exit": ("test-exit", [], "error", r"cell process ended without a result \(exit code 3\)", ("exit-cell",)),
    "abort": ("test-abort", [], "error", r"cell process ended without a result \(killed by signal 6\)",
              ("abort-cell",)),
    "kill_worker-spawn": ("test-kill-worker", ["--opt", "context=spawn"], "error", KILLED_WORKER,
                          ("kill-worker-cell", "worker-0", "worker-1")),
    "kill_worker-forkserver": ("test-kill-worker", ["--opt", "context=forkserver"], "error", KILLED_WORKER,
                               ("kill-worker-cell", "worker-0", "worker-1")),
}


@pytest.mark.parametrize("fault", list(CELL_FAULTS))
def test_a_faulty_cell_is_one_row(scene, fault):
    """The faulty cell is one row with its status and message (the sweep going on after it:
    test_isolation.py), and nothing of it is left."""
    adapter, flags, status, message, pids = CELL_FAULTS[fault]
    out = scene.root / "out"
    rc, _, err = scene.rlbench("run", ["run", "--adapter", adapter, *flags, *CARTPOLE, "--num-envs", "2", *TINY,
                                       "--timeout", TIMEOUT_S if status == "timeout" else FAULT_TIMEOUT_S,
                                       "--out", out])
    assert rc == 1, err
    assert "Traceback" not in err
    [row] = rows_of(out, [(f"{adapter}/CartPole-v1/n=2/random{_opts(flags)}", 0)])
    recorded = {k.split("/", 1)[1]: v for k, v in scene.recorded().items()}
    assert row["status"] == status
    assert (out / "results.csv").exists() and (out / "index.html").exists()
    for what in pids:
        assert what in recorded, f"the adapter never recorded {what}: {err}"
    scene.assert_clean()
    assert re.fullmatch(message.replace("{killed}", str(recorded.get("killed-worker"))), row["error"]), row["error"]


def _opts(flags) -> str:
    given = [f for f in flags if f != "--opt"]
    return f"/{','.join(sorted(given))}" if given else ""


# -- the harness is interrupted or killed -------------------------------------------------------------------

def _hangup_at_its_default():
    """A harness here starts as from a terminal, with SIGHUP at its default, even when these tests run under
    `nohup` (an ignored signal is inherited across exec, and rlbench keeps a signal it was started ignoring)."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


NOHUP = ("import os, signal, sys\n"
         "for name in sys.argv[1].split(','): signal.signal(getattr(signal, name), signal.SIG_IGN)\n"
         "os.execv(sys.argv[2], sys.argv[2:])")
HOLD_RUN = ["run", "--adapter", "serial", "--adapter", "test-hold", *CARTPOLE, *TINY, "--timeout", "120"]
SERIAL_ROW = [("serial/CartPole-v1/n=1/random", 0)]


def _hold(scene, proc) -> dict:
    """Wait until the holding cell has its child, its own-session grandchild and its segment."""
    scene.wait_for(scene.pid_dir / "hold-ready-r0.pid", proc)
    pids = {what: psutil.Process(int((scene.pid_dir / f"hold-{what}-r0.pid").read_text()))
            for what in ("cell", "child", "grandchild")}
    segment = (scene.pid_dir / "hold-shm-r0.name").read_text()
    assert all(_alive(p) for p in pids.values()) and os.path.exists(os.path.join(proctree.SHM_DIR, segment))
    return {"pids": pids, "segment": segment}


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_an_interrupted_run_keeps_its_rows_and_kills_the_cell(scene, sig):
    out = scene.root / "out"
    proc = scene.start("run", [*HOLD_RUN, "--out", out])
    held = _hold(scene, proc)
    proc.send_signal(getattr(signal, sig))
    rc, _, err = scene.wait(proc, timeout=60)
    assert rc == 130, err
    assert "interrupted" in err and "Traceback" not in err
    [row] = rows_of(out, SERIAL_ROW)
    assert row["status"] == "ok"
    assert all((out / f).exists() for f in ("results.csv", "summary.csv", "index.html"))
    assert "ended_at" in json.loads((out / "env.json").read_text())
    assert not [what for what, pid in held["pids"].items() if _alive(pid)], "the cell's tree survived"
    assert not os.path.exists(os.path.join(proctree.SHM_DIR, held["segment"]))
    scene.assert_clean()


def test_a_run_started_under_nohup_rides_out_a_hangup(scene):
    """nohup starts a program with SIGHUP ignored, so that a long suite outlives its terminal: the run keeps it
    ignored (the cell goes on) and still stops on SIGTERM."""
    out = scene.root / "out"
    proc = scene.start("run", [*HOLD_RUN, "--out", out], ignoring=("SIGHUP",))
    held = _hold(scene, proc)
    proc.send_signal(signal.SIGHUP)
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=2)   # an interrupted run exits within a second (the test above)
    assert all(_alive(p) for p in held["pids"].values()), "the hangup reached the cell"
    proc.send_signal(signal.SIGTERM)
    rc, _, err = scene.wait(proc, timeout=60)
    assert rc == 130, err
    assert not [what for what, pid in held["pids"].items() if _alive(pid)], "the cell's tree survived"
    scene.assert_clean()


@pytest.mark.slow
def test_a_killed_harness_leaves_nothing_behind(scene):
    """SIGKILL: the cell dies with the harness (PR_SET_PDEATHSIG), the reaper kills the rest of its tree,
    removes the segment it held and its TMPDIR, and exits. The reaper knows only what the tree watch has
    sampled (every 0.05 s at first, doubling to every 2 s): the harness is killed once the tree has been
    complete for longer than that."""
    out = scene.root / "out"
    proc = scene.start("run", [*HOLD_RUN, "--out", out])
    reaper = _reaper_of(proc)
    held = _hold(scene, proc)
    assert scene.temp_folders()
    time.sleep(3)
    proc.kill()
    proc.wait()
    gone = settle(lambda: [what for what, pid in held["pids"].items() if _alive(pid)] +
                  (["reaper"] if _alive(reaper) else []) +
                  (["segment"] if os.path.exists(os.path.join(proctree.SHM_DIR, held["segment"])) else []) +
                  scene.temp_folders(), timeout=15)
    assert not gone, f"left after the harness was killed: {gone}"
    [row] = rows_of(out, SERIAL_ROW)
    assert row["status"] == "ok"
    rc, _, err = scene.rlbench("report", ["report", out])  # the lock died with its holder
    assert rc == 0, err
    scene.assert_clean()


# -- the disk fills up ------------------------------------------------------------------------------------

@contextlib.contextmanager
def small_tmpfs(path: Path):
    """A 32 MiB tmpfs mounted at `path`, or None where mounting one is not allowed."""
    path.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(path)],
                                           capture_output=True).returncode != 0:
        yield None
        return
    try:
        yield path
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)


def _fill(folder: Path) -> Path:
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * (1 << 20) if os.fstat(fd).st_size < (30 << 20) else b"\0" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC, exc
    finally:
        os.close(fd)
    return filler


def _short_writes(monkeypatch) -> None:
    """As a full disk does to a process that is not root (no tmpfs of its own): from the third row on, the store's
    writes to results.jsonl land half a row (the rest did not fit)."""
    from rlbench.results import store as results
    real_write, calls = os.write, []

    def write(fd, data):
        if not os.readlink(f"/proc/self/fd/{fd}").endswith("results.jsonl"):
            return real_write(fd, data)
        calls.append(len(data))
        return real_write(fd, data if len(calls) < 3 else data[:len(data) // 2])
    monkeypatch.setattr(results.os, "write", write)


def _one_disk_error(rc, err, out) -> None:
    """Exit 1 and one line naming the write that failed, no traceback."""
    assert rc == 1, err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if f"{out}/results.jsonl" in ln]
    assert len(lines) == 1 and lines[0].startswith(f"rlbench: error: cannot write {out}/results.jsonl: "
                                                   "No space left on device"), err


@pytest.mark.slow
def test_disk_full_keeps_every_earlier_row_whole(scene, monkeypatch, capsys):
    repeats = 8
    cell = "serial/CartPole-v1/n=1/random"
    args = ["run", "--adapter", "serial", *CARTPOLE, "--repeats", repeats, "--duration", "0.05"]
    with small_tmpfs(scene.root / "small") as disk:
        if disk is None:  # not root: the store's own writes fail, half a row landing first
            out = scene.root / "small" / "run"
            _short_writes(monkeypatch)
            run = run_cli(args, out, capsys)
            rc, err = run.rc, run.stderr
            monkeypatch.undo()
            filler = None
        else:  # a real full disk: filled up under the running sweep once two rows are in
            out = disk / "run"
            proc = scene.start("run", [*args, "--out", out])
            deadline = time.monotonic() + 60
            while len(read_run(out)) < 2:
                assert proc.poll() is None and time.monotonic() < deadline, "the sweep never wrote two rows"
                time.sleep(0.01)
            filler = _fill(disk)
            rc, _, err = scene.wait(proc, timeout=120)
        _one_disk_error(rc, err, out)
        kept = rows_of(out)
        assert 2 <= len(kept) < repeats
        assert [(r["cell_id"], r["repeat"]) for r in kept] == [(cell, i) for i in range(len(kept))]
        assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]
        if filler is not None:
            filler.unlink()
        rc, _, err = scene.rlbench("report", ["report", out])
        assert rc == 0, err
        assert len((out / "results.csv").read_text().splitlines()) == 1 + len(kept)
        rc, _, err = scene.rlbench("resume", ["resume", out])
        assert rc == 0, err
        rows = rows_of(out, [(cell, i) for i in range(repeats)])
        assert rows[:len(kept)] == kept
    scene.assert_clean()


# -- other runs beside it ----------------------------------------------------------------------------------

SHORT_SWEEP = """
[[sweep]]
adapters = ["serial", "test-shm-leak", "test-leaky"]
envs = ["CartPole-v1"]
num_envs = [2]

[[sweep]]
adapters = ["gymnasium-async"]
envs = ["CartPole-v1"]
num_envs = [2]
options.gymnasium-async = { context = ["spawn"] }
"""


@pytest.mark.slow
def test_runs_side_by_side_leave_each_other_alone(scene):
    """Two gymnasium-async runs (spawn, forkserver: semaphores and shared memory their workers hold) while
    short sweeps beside them leak segments and daemons that their runner removes and kills."""
    long_runs = {}
    for context in ("spawn", "forkserver"):
        out = scene.root / f"long-{context}"
        long_runs[context] = (out, scene.start(f"long-{context}", [
            "run", "--adapter", "gymnasium-async", *CARTPOLE, "--opt", f"context={context}", "--num-envs", "2",
            "--repeats", "3", "--duration", "1", "--out", out], env=scene.env_for(f"pids-{context}")))
    suite = write_suite(scene.root, SHORT_SWEEP, protocol=TINY_PROTOCOL.replace("repeats = 1", "repeats = 2"))
    short = []
    while not short or (len(short) < 4 and any(p.poll() is None for _, p in long_runs.values())):
        out = scene.root / f"short-{len(short)}"
        short.append((out, *scene.rlbench(f"short-{len(short)}", ["run", suite, "--out", out])))
    for context, (out, proc) in long_runs.items():
        rc, _, err = scene.wait(proc)
        assert rc == 0, err
        rows = rows_of(out, [(f"gymnasium-async/CartPole-v1/n=2/random/context={context}", r) for r in range(3)])
        for row in rows:
            assert row["status"] == "ok" and "removed shm" not in (row.get("error") or ""), row.get("error")
    for out, rc, _, err in short:
        assert rc == 0, err
        rows = rows_of(out)
        assert len(rows) == 8
        for row in rows:
            assert row["status"] == "ok", row.get("error")
            removed = (row.get("error") or "").partition("removed shm: ")[2]
            if row["adapter"] == "test-shm-leak":  # its own leak, nothing else
                assert removed.startswith("rlbenchtest_leak_") and "," not in removed, row["error"]
            elif row["adapter"] == "test-leaky":
                assert row["error"] == "2 leftover process(es) killed after the cell"
            else:
                assert not row.get("error"), row["error"]
    scene.assert_clean()


# -- two runs into one folder ----------------------------------------------------------------------------

GATE_RUN = ["run", "--adapter", "test-gate", *CARTPOLE, "--repeats", "2", "--duration", "0.05"]
GATE_PAIRS = [("test-gate/CartPole-v1/n=1/random", r) for r in range(2)]


def _first_run(scene):
    """A run held open (test-gate) until the test opens its gate: it holds its folder, has its plan written
    and a cell running."""
    out = scene.root / "out"
    first = scene.start("first", [*GATE_RUN, "--out", out])
    scene.wait_for(scene.pid_dir / "gate-waiting-r0.pid", first)
    assert (out / "plan.json").exists()
    return out, first


def _first_run_finishes_alone(scene, out, first):
    assert first.poll() is None
    (scene.pid_dir / "gate.open").touch()
    rc, _, err = scene.wait(first)
    assert rc == 0, err
    rows = rows_of(out, GATE_PAIRS)
    run_id = json.loads((out / "plan.json").read_text())["run_id"]
    assert {r["run_id"] for r in rows} == {run_id} and all(r["status"] == "ok" for r in rows)
    env = json.loads((out / "env.json").read_text())
    assert env["run_id"] == run_id and "resumed_at" not in env
    assert len(list((out / "logs").iterdir())) == len(GATE_PAIRS)


def test_a_second_command_on_a_held_folder_names_the_holder(scene):
    out, first = _first_run(scene)
    second = {name: scene.start(name, argv) for name, argv in (
        ("resume", ["resume", out]), ("run-resume", [*GATE_RUN, "--resume", out]), ("report", ["report", out]))}
    for name, proc in second.items():
        rc, _, err = scene.wait(proc, timeout=60)
        lines = err.strip().splitlines()
        assert rc == 2 and len(lines) == 1, f"{name}: {rc} {err}"
        assert f"is in use by another rlbench run (pid {first.pid} " in lines[0], f"{name}: {lines[0]}"
    _first_run_finishes_alone(scene, out, first)
    scene.assert_clean()


def test_a_second_run_into_a_held_folder_names_the_holder(scene):
    out, first = _first_run(scene)
    rc, _, err = scene.rlbench("second", [*GATE_RUN, "--out", out], timeout=60)
    _first_run_finishes_alone(scene, out, first)
    scene.assert_clean()
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1, err
    assert f"is in use by another rlbench run (pid {first.pid} " in lines[0], lines[0]


# -- resume after an interrupted run -----------------------------------------------------------------------

@pytest.mark.slow
def test_resume_after_an_interrupted_run_completes_it(scene):
    out = scene.root / "out"
    pairs = [(f"serial/CartPole-v1/n={n}/random", r) for r in range(3) for n in (1, 2)]
    proc = scene.start("run", ["run", "--adapter", "serial", *CARTPOLE, "--num-envs", "1,2", "--repeats", "3",
                               "--duration", "0.3", "--out", out])
    deadline = time.monotonic() + 60
    while len(read_run(out)) < 2:
        assert proc.poll() is None and time.monotonic() < deadline, "the sweep never wrote two rows"
        time.sleep(0.02)
    proc.terminate()
    rc, _, err = scene.wait(proc, timeout=60)
    assert rc == 130, err
    kept = rows_of(out)
    assert 2 <= len(kept) < len(pairs)
    rc, _, err = scene.rlbench("resume", ["resume", out])
    assert rc == 0, err
    assert f"{len(kept)} rows kept" in err
    rows = rows_of(out, pairs)
    assert rows[:len(kept)] == kept and all(r["status"] == "ok" for r in rows)
    assert len({r["run_id"] for r in rows}) == 1
    scene.assert_clean()


# -- Ray ----------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_a_killed_ray_actor_leaves_nothing_of_ray(scene):
    """The row of a killed actor is test_ray_actors.py's; here: nothing of Ray survives the cell (raylet,
    gcs_server, workers, the plasma store's /dev/shm segments, the session folder in the cell's TMPDIR)."""
    pytest.importorskip("ray")
    suite = write_suite(scene.root, """
[[sweep]]
adapters = ["ray-actors"]
envs = ["CartPole-v1"]
num_envs = [2]
""", protocol=TINY_PROTOCOL.replace("duration_s = 0.05", "duration_s = 5"))
    killed = []

    def kill_an_actor():
        deadline = time.monotonic() + 120
        while not killed and time.monotonic() < deadline:
            for pid, cmdline in scene.survivors():
                if "ray::EnvActor" in cmdline:
                    time.sleep(0.5)  # let the cell start measuring
                    with contextlib.suppress(psutil.Error):
                        psutil.Process(pid).kill()
                        killed.append(pid)
                        return
            time.sleep(0.1)

    killer = threading.Thread(target=kill_an_actor)
    killer.start()
    try:
        rc, _, err = scene.rlbench("run", ["run", suite, "--out", scene.root / "out"])
    finally:
        killed.append(None)
        killer.join()
    assert killed[0] is not None, "no Ray actor process was found to kill"
    assert rc == 1, err
    [row] = rows_of(scene.root / "out", [("ray-actors/CartPole-v1/n=2/random", 0)])
    assert row["status"] == "error" and "Actor" in row["error"], row
    scene.assert_clean()


# -- chaos ----------------------------------------------------------------------------------------------------

CHAOS_TIMEOUT_S = 6
CHAOS_REPEATS = 15
CHAOS_SIZES = (1, 2)
CHAOS_SEED = os.environ.get("RLBENCH_TEST_CHAOS_SEED", "20240611")


def _chaos_expectation(fault: str, row: dict, pid_dir: Path) -> None:
    tag = f"chaos-n{row['num_envs']}-r{row['repeat']}"
    error = row.get("error") or ""
    where = f"{row['cell_id']} r{row['repeat']} ({fault}): {row['status']} {error}"
    if fault == "ok":
        assert row["status"] == "ok" and not error, where
    elif fault == "raise":
        assert row["status"] == "error" and error == "RuntimeError: boom", where
    elif fault == "exit":
        assert row["status"] == "error" and error == "cell process ended without a result (exit code 3)", where
    elif fault == "hang":
        assert row["status"] == "timeout" and error.startswith(f"no result after {CHAOS_TIMEOUT_S}s"), where
    elif fault == "leak_shm":
        name = (pid_dir / f"{tag}.shm").read_text()
        assert row["status"] == "ok" and error == f"removed shm: {name}", where
    elif fault == "daemon":
        assert row["status"] == "ok" and error == "1 leftover process(es) killed after the cell", where
    elif fault == "kill_worker":
        # the pipe to the dead worker: closed as the cell reads (EOFError, ConnectionResetError) or writes
        # (BrokenPipeError)
        assert row["status"] == "error" and error.startswith(("EOFError", "ConnectionResetError",
                                                              "BrokenPipeError")), where
        killed = [int(p.read_text()) for p in pid_dir.glob(f"{tag}-worker-*.pid")]  # spawn or forkserver
        assert any(f"worker process {pid} was killed by SIGKILL" in error for pid in killed), where


@pytest.mark.slow
def test_chaos(scene):
    """Two sweeps side by side, each 2 cells x 15 repeats of test-chaos, which misbehaves in a way its seed,
    cell and repeat pick ($RLBENCH_TEST_CHAOS_SEED to replay another draw)."""
    suite = write_suite(scene.root, f"""
[[sweep]]
adapters = ["test-chaos"]
envs = ["CartPole-v1"]
num_envs = {list(CHAOS_SIZES)}
""", protocol=TINY_PROTOCOL.replace("repeats = 1", f"repeats = {CHAOS_REPEATS}"))
    sweeps = {}
    for side in ("a", "b"):
        seed = f"{CHAOS_SEED}-{side}"
        env = scene.env_for(f"pids-{side}", RLBENCH_TEST_CHAOS_SEED=seed)
        out = scene.root / f"out-{side}"
        sweeps[side] = (seed, out, Path(env["RLBENCH_TEST_PIDDIR"]),
                        scene.start(side, ["run", suite, "--timeout", CHAOS_TIMEOUT_S, "--out", out], env=env))
    drawn = collections.Counter()
    for seed, out, pid_dir, proc in sweeps.values():
        rc, _, err = scene.wait(proc, timeout=170)
        faults = {(cell, r): chaos_fault(seed, cell, r) for r in range(CHAOS_REPEATS) for cell in
                  (f"test-chaos/CartPole-v1/n={n}/random" for n in CHAOS_SIZES)}
        drawn.update(faults.values())
        rows = rows_of(out, faults)
        for row in rows:
            _chaos_expectation(faults[(row["cell_id"], row["repeat"])], row, pid_dir)
        failing = any(f in ("raise", "exit", "hang", "kill_worker") for f in faults.values())
        assert rc == (1 if failing else 0), err
        assert "Traceback" not in err
    assert len(drawn) >= 5, f"the seed drew too few kinds of fault: {drawn} of {CHAOS}"
    scene.assert_clean()


# -- a tune under the same faults ---------------------------------------------------------------------------

# a tune that searches for ~30 s: the serial loop and a vector env on the zero-cost synthetic env, small sizes
TUNE = ["tune", "--env", "rlbench/Synthetic-v0", "--adapters", "serial,gymnasium-sync", "--max-envs", "4",
        "--budget", "30s"]


def _tune_json(out: Path) -> dict:
    return json.loads((out / "tune.json").read_text())


def _searching(scene, proc, out: Path, rows: int = 2) -> None:
    """Wait until the search has measured `rows` rows (the calibration, in its own folder, is behind it)."""
    deadline = time.monotonic() + 120
    while len(read_run(out)) < rows:
        assert proc.poll() is None and time.monotonic() < deadline, \
            f"the search never wrote {rows} rows: {(scene.root / f'{proc.name}.stderr').read_text()[-2000:]}"
        time.sleep(0.02)


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_an_interrupted_tune_decides_on_what_it_measured(scene, sig):
    """A signal mid-search: every row whole, and a decision on them in tune.json, env.json and the page, marked
    with the signal; the exit code a run gives."""
    out = scene.root / "tune"
    proc = scene.start("tune", [*TUNE, "--out", out])
    _searching(scene, proc, out)
    proc.send_signal(getattr(signal, sig))
    rc, stdout, err = scene.wait(proc, timeout=60)
    assert rc == 130, err
    assert "interrupted" in err and "Traceback" not in err
    rows = rows_of(out)
    record = _tune_json(out)
    decision = record["decision"]
    assert re.fullmatch(rf"interrupted after \d+ s \({sig}\)", decision["interrupted"]), decision["interrupted"]
    assert decision["stop_reason"] == decision["interrupted"] == record["stop_reason"]
    measured = {c["cell_id"]: c for c in record["candidates"]}
    ok = [r for r in rows if r["status"] == "ok"]
    assert ok and all(r["cell_id"] in measured for r in rows)
    assert sum(c["ok_repeats"] for c in measured.values()) == len(ok)   # the decision covers every row measured
    assert decision["winner"] is None or decision["winner"]["cell_id"] in {r["cell_id"] for r in ok}
    assert json.loads((out / "env.json").read_text())["tune"]["interrupted"] == decision["interrupted"]
    assert "The search was cut short" in (out / "index.html").read_text()
    scene.assert_clean()


@pytest.mark.slow
def test_a_tune_resumed_goes_on_with_the_budget_left(scene):
    out = scene.root / "tune"
    proc = scene.start("tune", [*TUNE, "--out", out])
    _searching(scene, proc, out)
    proc.terminate()
    rc, _, err = scene.wait(proc, timeout=60)
    assert rc == 130, err
    kept, first = rows_of(out), _tune_json(out)
    rc, stdout, err = scene.rlbench("resume", ["resume", out], timeout=120)
    assert rc == 0, err
    rows, record = rows_of(out), _tune_json(out)
    assert rows[:len(kept)] == kept and len(rows) >= len(kept)   # the kept rows first, unchanged, none repeated
    assert {r["run_id"] for r in rows} == {kept[0]["run_id"]}
    decision = record["decision"]
    assert not decision["interrupted"] and decision["winner"] and "Fastest for rlbench/Synthetic-v0" in stdout
    # the search retraced what was measured (no kept row run again) and went on; its clock went on too
    assert first["decision"]["used_s"] <= decision["used_s"] <= record["budget_s"] + 5
    assert record["profile"] == first["profile"] and record["calibration"] == first["calibration"]
    assert len(json.loads((out / "env.json").read_text())["resumed_at"]) == 1
    scene.assert_clean()


@pytest.mark.slow
def test_a_tune_whose_disk_fills_keeps_its_rows(scene, monkeypatch, capsys):
    """The store's writes fail mid-search (a real 32 MiB tmpfs filled under it, or, not root, a short write):
    exit 1, one line naming the write, every earlier row whole."""
    with small_tmpfs(scene.root / "small") as disk:
        if disk is None:
            out = scene.root / "small" / "tune"
            _short_writes(monkeypatch)
            run = run_cli(TUNE, out, capsys)
            rc, err = run.rc, run.stderr
            monkeypatch.undo()
        else:
            out = disk / "tune"
            proc = scene.start("tune", [*TUNE, "--out", out])
            _searching(scene, proc, out)
            _fill(disk)
            rc, _, err = scene.wait(proc, timeout=120)
        _one_disk_error(rc, err, out)
        assert len(rows_of(out)) >= 2
        assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]
    scene.assert_clean()
