"""Runs one job (cell x repeat) in a fresh interpreter with a wall-clock timeout, then makes sure
nothing it started survives: the process group, re-parented orphans and new shared-memory
segments are all removed, whatever way the job ended."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone

import psutil

from rlbench import proctree
from rlbench.plan import Job, Settings

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")


class Runner:
    def __init__(self, settings: Settings, out_dir: str, python: str = sys.executable, pythons: dict = None):
        self.settings = settings
        self.out_dir = out_dir
        self.python = python
        self.pythons = pythons or {}   # adapter -> the interpreter of its own environment
        os.makedirs(os.path.join(out_dir, "logs"), exist_ok=True)
        self.subreaper = proctree.become_subreaper()

    def interpreter(self, job: Job) -> str:
        return self.pythons.get(job.cell.adapter, self.python)

    def command(self, job: Job, spec: dict) -> list:
        cmd = [self.interpreter(job), "-m", "rlbench.cell", json.dumps(spec)]
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

    def child_env(self, job: Job) -> dict:
        env = dict(os.environ)
        threads = job.cell.threads(self.settings)
        if threads:
            env.update({v: str(threads) for v in THREAD_VARS})
        env["PYTHONUNBUFFERED"] = "1"
        env["RLBENCH_SCRATCH_DIR"] = self.scratch_dir(job)  # on-disk stores live on the run's disk
        if self.interpreter(job) != self.python:  # the adapter's own environment, as if activated
            venv = os.path.dirname(os.path.dirname(self.interpreter(job)))
            env.update(VIRTUAL_ENV=venv, PATH=os.path.join(venv, "bin") + os.pathsep + env.get("PATH", ""))
        if self.settings.ray_address:  # Ray reads it in ray.init(): the core needs no Ray of its own
            env["RAY_ADDRESS"] = self.settings.ray_address
        return env

    def run(self, job: Job, index: int) -> dict:
        spec = job.cell.spec(self.settings, job.repeat)
        log_path = os.path.join(self.out_dir, "logs", f"{index:05d}-{_slug(job.cell.cell_id)}-r{job.repeat}.log")
        started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        shm_before = proctree.shm_entries()
        ours_before = {p.pid for p in psutil.Process().children(recursive=True)}
        t0 = time.perf_counter()
        result, proc = {}, None
        timeout_s = job.cell.settings(self.settings).timeout_s
        try:
            if job.profile:
                os.makedirs(os.path.dirname(self.profile_path(job)), exist_ok=True)
            os.makedirs(self.scratch_dir(job))
            with open(log_path, "wb") as log:
                proc = subprocess.Popen(self.command(job, spec), stdout=subprocess.PIPE, stderr=log,
                                        env=self.child_env(job), start_new_session=True)
                try:
                    out, _ = proc.communicate(timeout=timeout_s)
                    result = _last_result(out) or {"status": "error", "error": _no_result(proc.returncode, log_path)}
                except subprocess.TimeoutExpired:
                    result = {"status": "timeout", "error": f"no result after {timeout_s:g}s; "
                                                           "process tree killed"}
        except OSError as exc:
            result = {"status": "error", "error": f"cannot start cell process: {exc}"}
        finally:
            leaked = self._cleanup(proc, ours_before)
            removed = proctree.remove_shm(proctree.shm_entries() - shm_before)
            shutil.rmtree(os.path.join(self.out_dir, "scratch"), ignore_errors=True)
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

    def _cleanup(self, proc, ours_before) -> int:
        """Kill the job's process tree, its process group and any orphan re-parented to us."""
        if proc is None:
            return 0
        victims = {p.pid: p for p in proctree.tree(psutil.Process(proc.pid))} if proc.poll() is None else {}
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for p in psutil.Process().children(recursive=True):
            if p.pid not in ours_before:
                victims.setdefault(p.pid, p)
        victims.pop(proc.pid, None)
        alive = [p for p in victims.values() if proctree.alive(p)]  # zombies already exited: reap, not count
        proctree.kill_tree(list(victims.values()))
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        return len(alive)


def _last_result(stdout: bytes):
    result = None
    for line in stdout.decode(errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("event") == "result":
            result = event
    return result


def _no_result(returncode: int, log_path: str) -> str:
    how = f"killed by signal {-returncode}" if returncode < 0 else f"exit code {returncode}"
    with open(log_path, "rb") as f:
        lines = [ln.strip() for ln in f.read().decode(errors="replace").splitlines() if ln.strip()]
    return f"cell process ended without a result ({how})" + (f": {lines[-1][:300]}" if lines else "")


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_=." else "_" for c in text)[:150]
