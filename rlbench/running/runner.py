"""Runs one job (cell x repeat) in a fresh interpreter with a wall-clock timeout, then makes sure
nothing it started survives: its process tree (group, re-parented orphans), the shared-memory segments
that tree held and its temp folder are removed, whatever way the job ended. Nothing else is touched:
another run's processes and segments on the same machine are not the job's."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone

import psutil

from rlbench.planning.plan import Job, Settings
from rlbench.running import proctree
from rlbench.running.treewatch import TreeWatch

GRACE_S = 2.0          # what a cell that ended left behind gets to exit by itself
PARENT_VAR = "RLBENCH_HARNESS_PID"
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")
# what a Ray worker has that would make a Ray inside the cell join the cluster instead of its own cores
RAY_WORKER_VARS = ("RAY_ADDRESS", "RAY_JOB_ID", "RAY_RAYLET_PID", "RAY_CLIENT_MODE", "RAY_LD_PRELOAD_ON_WORKERS")


class Runner:
    def __init__(self, settings: Settings, out_dir: str, python: str = sys.executable, pythons: dict = None,
                 reaper=None):
        self.settings = settings
        self.out_dir = out_dir
        self.python = python
        self.pythons = pythons or {}   # adapter -> the interpreter of its own environment
        os.makedirs(os.path.join(out_dir, "logs"), exist_ok=True)
        self.subreaper = proctree.become_subreaper()
        self.reaper = reaper

    def interpreter(self, job: Job) -> str:
        return self.pythons.get(job.cell.adapter, self.python)

    def command(self, job: Job, spec: dict) -> list:
        cmd = [self.interpreter(job), "-m", "rlbench.running.child", json.dumps(spec)]
        if job.profile:
            pyspy = shutil.which("py-spy", path=os.path.dirname(self.interpreter(job))) or shutil.which("py-spy")
            if pyspy is None:
                raise FileNotFoundError("py-spy not installed (make install)")
            cmd = [pyspy, "record", "--format", "speedscope", "--subprocesses", "--nonblocking",
                   "--rate", "100", "-o", self.profile_path(job), "--", *cmd]
        return cmd

    def profile_path(self, job: Job) -> str:
        return os.path.join(self.out_dir, "profiles", f"{_slug(job.cell.cell_id)}.speedscope.json")

    def scratch_dir(self, job: Job) -> str:
        return os.path.join(self.out_dir, "scratch", f"{_slug(job.cell.cell_id)}-r{job.repeat}")

    def child_env(self, job: Job, temp: str, cores: tuple = None) -> dict:
        """`cores`: the cores a cluster node leased the cell (rlbench.running.cluster): its threads are set
        explicitly (Ray's worker has OMP_NUM_THREADS of its own), and a Ray the cell starts is a local one on
        those cores, never the cluster's."""
        env = dict(os.environ)
        env["TMPDIR"] = temp  # what the tree leaves in temp files (Ray's session folders) goes with it
        env[PARENT_VAR] = str(os.getpid())  # the cell dies with the harness (rlbench.running.child)
        threads = self.threads(job, cores)
        if cores:
            for var in RAY_WORKER_VARS:
                env.pop(var, None)
        if threads:
            env.update({v: str(threads) for v in THREAD_VARS})
        env["PYTHONUNBUFFERED"] = "1"
        env["RLBENCH_SCRATCH_DIR"] = self.scratch_dir(job)  # on-disk stores live on the run's disk
        if self.interpreter(job) != self.python:  # the adapter's own environment, as if activated
            venv = os.path.dirname(os.path.dirname(self.interpreter(job)))
            env.update(VIRTUAL_ENV=venv, PATH=os.path.join(venv, "bin") + os.pathsep + env.get("PATH", ""))
        if self.settings.ray_address and not cores:  # Ray reads it in ray.init(): the core needs no Ray of its own
            env["RAY_ADDRESS"] = self.settings.ray_address
        return env

    def threads(self, job: Job, cores: tuple = None) -> int:
        """The cell's thread count (0: the libraries' own default); on leased cores, as many as there are."""
        return job.cell.threads(self.settings) or (len(cores) if cores else 0)

    def run(self, job: Job, index: int, cores: tuple = None) -> dict:
        spec = job.cell.spec(self.settings, job.repeat)
        if cores:
            spec["affinity"] = list(cores)
        log_path = os.path.join(self.out_dir, "logs", f"{index:05d}-{_slug(job.cell.cell_id)}-r{job.repeat}.log")
        started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        shm_before = proctree.shm_snapshot()
        ours_before = proctree.descendants(os.getpid())
        t0 = time.perf_counter()
        result, proc, watch, timed_out = {}, None, None, False
        settings = job.cell.settings(self.settings)
        timeout_s = settings.timeout_s
        temp = tempfile.mkdtemp(prefix=temp_prefix())  # the tree's TMPDIR (Ray's sessions)
        scratch = self.scratch_dir(job)
        try:
            if job.profile:
                os.makedirs(os.path.dirname(self.profile_path(job)), exist_ok=True)
            os.makedirs(scratch)
            with open(log_path, "wb") as log:
                watch = TreeWatch(f"{index}", ours_before, self.reaper, temp)
                watch.start()
                proc = subprocess.Popen(self.command(job, spec), stdout=subprocess.PIPE, stderr=log,
                                        env=self.child_env(job, temp, cores), start_new_session=True)
                try:
                    out, _ = proc.communicate(timeout=timeout_s)
                    result = _last_result(out) or {"status": "error", "error": _no_result(proc.returncode, log_path)}
                except subprocess.TimeoutExpired:
                    timed_out = True
                    result = {"status": "timeout", "error": f"no result after {timeout_s:g}s; "
                                                           "process tree killed"}
        except OSError as exc:
            result = {"status": "error", "error": f"cannot start cell process: {exc}"}
        finally:
            held_at_end = [tuple(k) for k in result.pop("shm_held", [])]
            leaked = self._cleanup(proc, watch, held_at_end)
            new_shm = {k: n for k, n in proctree.shm_snapshot().items() if k not in shm_before}
            removed = proctree.remove_shm({k: n for k, n in new_shm.items() if watch and k in watch.shm})
            shutil.rmtree(scratch, ignore_errors=True)
            try:
                os.rmdir(os.path.dirname(scratch))  # the run's scratch folder, once no repeat uses it
            except OSError:
                pass
            shutil.rmtree(temp, ignore_errors=True)
            if self.reaper is not None and watch is not None:
                self.reaper.forget(watch.key)
        if timed_out:   # the tree is gone: what the cell said before it is all there is
            result["error"] += stood_at(_events(_rest_of(proc)), settings)
        wall_s = time.perf_counter() - t0
        if leaked and result.get("status") == "ok":
            result["error"] = f"{leaked} leftover process(es) killed after the cell"
        if removed:
            result["error"] = "; ".join(filter(None, [result.get("error"), f"removed shm: {', '.join(removed)}"]))
        result.pop("event", None)
        result.update(wall_s=wall_s, started_at=started, log=os.path.relpath(log_path, self.out_dir))
        if job.profile and os.path.exists(self.profile_path(job)):
            result["profile"] = os.path.relpath(self.profile_path(job), self.out_dir)
        return result

    def _cleanup(self, proc, watch, held_at_end) -> int:
        """End the repeat's tree: a cell that is still running (timeout, interrupt) is killed with its tree at
        once; after a cell that ended, what it left gets GRACE_S to exit by itself (multiprocessing's
        forkserver and resource tracker leave when the cell's pipes close; the tracker unlinks what the
        cell leaked), and the rest is killed and counted as leftovers."""
        if watch is None:
            return 0
        watch.stop(held_at_end)
        if proc is None:
            return 0
        leftovers = 0
        if proc.poll() is not None:
            rest = [p for p in watch.alive() if p.pid != proc.pid]
            if rest:
                _, rest = psutil.wait_procs(rest, timeout=GRACE_S)
                leftovers = sum(proctree.alive(p) for p in rest)
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the cell's group: members not sampled yet included
        except (ProcessLookupError, PermissionError):
            pass
        proctree.kill_tree(watch.alive())
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        return leftovers


def temp_prefix(pid: int = None) -> str:
    """A repeat's temp folder is named after the run's process, so that the run's end finds what an interrupt
    cut short of a repeat's own cleanup, and nothing of another process."""
    return f"rlbench-cell-{pid or os.getpid()}-"


def remove_temp_folders() -> None:
    """This process's repeats' temp folders: an interrupt that lands inside a repeat's cleanup leaves its own."""
    import glob
    for folder in glob.glob(os.path.join(tempfile.gettempdir(), glob.escape(temp_prefix()) + "*")):
        shutil.rmtree(folder, ignore_errors=True)


def _events(stdout: bytes) -> list:
    """The cell's JSON-line events (rlbench.running.child.emit), in order."""
    events = []
    for line in stdout.decode(errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and "event" in event:
            events.append(event)
    return events


def _last_result(stdout: bytes):
    return next((e for e in reversed(_events(stdout)) if e["event"] == "result"), None)


def _rest_of(proc) -> bytes:
    """What a killed cell wrote to its results channel before it died (communicate keeps what it read before
    the timeout); b"" where nothing could be read (a process outside the tree still holding the pipe)."""
    if proc is None:
        return b""
    try:
        return proc.communicate(timeout=5)[0] or b""
    except (subprocess.TimeoutExpired, ValueError, OSError):
        return b""


def stood_at(events: list, settings) -> str:
    """Where a cell that ran out of time stood, from its events, and what would let it finish: the reason a
    timeout row gives beyond its limit."""
    seen = {e["event"]: e for e in events}
    hint = "; --timeout longer, or fewer env steps a unit (the adapter's options)"
    if "warmed" in seen:
        units, seconds = seen["warmed"]["units"], seen["warmed"]["seconds"]
        unit_s = seconds / max(units, 1)
        window_s = max(settings.min_units * unit_s, settings.duration_s)
        return (f"; warm-up: {units} unit(s) in {seconds:.3g} s ({unit_s:.3g} s a unit), then the timed window "
                f"(at least {settings.min_units} units and {settings.duration_s:g} s: ~{window_s:.3g} s) did not "
                f"close{hint}")
    if "opened" in seen:
        return (f"; the session opened in {seen['opened']['setup_s']:.3g} s, then the warm-up "
                f"({settings.warmup_units} unit(s)) did not finish{hint}")
    if "start" in seen:
        return "; the adapter was still opening its session (building envs, starting workers, compiling)"
    return "; the cell's interpreter had not started"


def _no_result(returncode: int, log_path: str) -> str:
    how = f"killed by signal {-returncode}" if returncode < 0 else f"exit code {returncode}"
    with open(log_path, "rb") as f:
        lines = [ln.strip() for ln in f.read().decode(errors="replace").splitlines() if ln.strip()]
    return f"cell process ended without a result ({how})" + (f": {lines[-1][:300]}" if lines else "")


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_=." else "_" for c in text)[:150]
