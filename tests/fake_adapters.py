"""Adapters that misbehave on purpose (not a test module).

conftest.misbehaving_adapters_env installs this file with a fake dist-info, so the cell processes load these
adapters through the `rlbench.adapters` entry points. Every pid a cell starts is written to
$RLBENCH_TEST_PIDDIR/<what>.pid so the test can check afterwards that it is gone.
"""
import os
import subprocess
import sys
import time

from rlbench.api import Adapter

SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]
QUIET = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}

# Double fork: the middle process writes the grandchild's pid and exits, so the grandchild is an
# orphan in its own session before the cell itself ends.
DOUBLE_FORK = """
import os, sys, time
mid = os.fork()
if mid == 0:
    os.setsid()
    grandchild = os.fork()
    if grandchild == 0:
        time.sleep(600)
        os._exit(0)
    with open(sys.argv[1], "w") as f:
        f.write(str(grandchild))
    os._exit(0)
os.waitpid(mid, 0)
"""


def record(what: str, value) -> None:
    with open(os.path.join(os.environ["RLBENCH_TEST_PIDDIR"], f"{what}.pid"), "w") as f:
        f.write(f"{value}")


class CountingSession:
    info = {"workers": 1}

    def __init__(self, n):
        self.n = n

    def step(self) -> int:
        return self.n

    def close(self):
        pass


class HangSession(CountingSession):
    def step(self) -> int:
        while True:
            time.sleep(1)


class Hang(Adapter):
    """Starts a child in its process group and one in a session of its own, then never returns."""
    name = "test-hang"

    def open(self, workload, options):
        record("hang-cell", os.getpid())
        record("hang-child", subprocess.Popen(SLEEPER, **QUIET).pid)
        record("hang-own-session", subprocess.Popen(SLEEPER, start_new_session=True, **QUIET).pid)
        return HangSession(workload.num_envs)


class BoomSession(CountingSession):
    def step(self) -> int:
        raise RuntimeError("boom")


class Boom(Adapter):
    name = "test-boom"

    def open(self, workload, options):
        return BoomSession(workload.num_envs)


class Leaky(Adapter):
    """Works, but leaves two daemons behind: one in a new session, one double-forked orphan."""
    name = "test-leaky"

    def open(self, workload, options):
        record("leaky-own-session", subprocess.Popen(SLEEPER, start_new_session=True, **QUIET).pid)
        pid_file = os.path.join(os.environ["RLBENCH_TEST_PIDDIR"], "leaky-double-fork.pid")
        subprocess.run([sys.executable, "-c", DOUBLE_FORK, pid_file], check=True, **QUIET)
        return CountingSession(workload.num_envs)


class ShmLeak(Adapter):
    """Works, but leaves a shared-memory segment in /dev/shm."""
    name = "test-shm-leak"

    def open(self, workload, options):
        name = f"psm_rlbenchtest_{os.getpid()}"
        with open(os.path.join("/dev/shm", name), "wb") as f:
            f.write(b"\0" * 64)
        record("shm", name)
        return CountingSession(workload.num_envs)


class OwnEnv(Adapter):
    """Runs in its own environment, pinned by envs/test-core.txt beside this module; records its sys.prefix."""
    name = "test-own-env"
    environment = "test-core"

    def open(self, workload, options):
        record("own-env-prefix", sys.prefix)
        return CountingSession(workload.num_envs)


class BrokenEnv(OwnEnv):
    """Its environment pins a package no registry has: the build fails."""
    name = "test-broken-env"
    environment = "test-broken"


class MissingEnv(OwnEnv):
    """Names an environment with no requirements file."""
    name = "test-missing-env"
    environment = "test-missing"
