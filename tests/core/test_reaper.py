"""The watchdog (rlbench/running/reaper.py) cleans up after a process that dies without cleaning, even where the
process adopts orphans and whatever kills it kills its children too (a Ray worker whose task is cancelled)."""
import json
import subprocess
import sys
import time

import psutil
from support.procs import settle

# A process like a Ray worker running a node job: it adopts orphans (its Runner made it a subreaper), starts a
# detached watchdog, tracks a folder with it, says the pids and waits to be killed.
NODE_JOB = """
import json, sys, time
from rlbench.running import proctree
from rlbench.running.reaper import Reaper
proctree.become_subreaper()
reaper = Reaper(detached=sys.argv[2] == "detached")
reaper.track("job", folder=sys.argv[1])
print(json.dumps({"reaper": reaper.pid, "adopts": proctree.is_subreaper()}), flush=True)
time.sleep(120)
"""


def _start(folder, mode):
    proc = subprocess.Popen([sys.executable, "-c", NODE_JOB, str(folder), mode], stdout=subprocess.PIPE, text=True)
    said = json.loads(proc.stdout.readline())
    return proc, said


def _kill_with_its_children(proc):
    """As Ray kills a cancelled task's worker: its direct children first, then it."""
    for child in psutil.Process(proc.pid).children():
        child.kill()
    proc.kill()
    proc.wait()


def _exited(pid) -> bool:
    """Gone, or a zombie its new parent has not collected yet."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _gone(folder, pid, timeout=15) -> bool:
    return not settle(lambda: folder.exists() or not _exited(pid), timeout=timeout)


def test_a_detached_watchdog_is_no_child_of_an_adopting_process_and_cleans_up_when_it_is_killed(tmp_path):
    folder = tmp_path / "job"
    folder.mkdir()
    proc, said = _start(folder, "detached")
    try:
        assert said["adopts"]   # the process adopts orphans still: only the watchdog's launch went to init
        assert psutil.Process(said["reaper"]).ppid() != proc.pid
        _kill_with_its_children(proc)
        assert _gone(folder, said["reaper"]), "the watchdog did not remove the killed job's folder and exit"
    finally:
        proc.kill()


def test_a_watchdog_the_killer_reaches_cleans_nothing(tmp_path):
    """Why `detached` exists: a watchdog that is the process's child dies with it, and the folder stays."""
    folder = tmp_path / "job"
    folder.mkdir()
    proc, said = _start(folder, "child")
    try:
        assert psutil.Process(said["reaper"]).ppid() == proc.pid
        _kill_with_its_children(proc)
        time.sleep(1)
        assert folder.exists()
    finally:
        proc.kill()


def test_a_watchdog_closed_normally_cleans_what_is_still_tracked_and_exits(tmp_path):
    from rlbench.running.reaper import Reaper
    for detached in (False, True):
        folder = tmp_path / f"job-{detached}"
        folder.mkdir()
        reaper = Reaper(detached=detached)
        reaper.track("job", folder=str(folder))
        reaper.close()
        assert not folder.exists() and _exited(reaper.pid)
