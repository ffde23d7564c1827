"""Adapters that misbehave on purpose (not a test module).

support.misbehaving_adapters_env installs this file with a fake dist-info, so the cell processes load these
adapters through the `rlbench.adapters` entry points. Every pid a cell starts is written to
$RLBENCH_TEST_PIDDIR/<what>.pid so the test can check afterwards that it is gone.
"""
import mmap
import os
import subprocess
import sys
import time

from rlbench.api import Adapter

SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]
QUIET = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}

# Double fork: the middle process writes the grandchild's pid and exits, so the grandchild is an
# orphan in its own session before the cell itself ends; given a second argument, it maps that file.
DOUBLE_FORK = """
import mmap, os, sys, time
mid = os.fork()
if mid == 0:
    os.setsid()
    grandchild = os.fork()
    if grandchild == 0:
        if len(sys.argv) > 2:
            with open(sys.argv[2], "r+b") as f:
                held = mmap.mmap(f.fileno(), 4096)
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
    """Works, but leaves a shared-memory segment in /dev/shm: one it maps while it runs and never unlinks,
    under a name no library uses (the runner knows its segments by inode, not by prefix)."""
    name = "test-shm-leak"

    def open(self, workload, options):
        name = f"rlbenchtest_leak_{os.getpid()}"
        with open(os.path.join("/dev/shm", name), "w+b") as f:
            f.write(b"\0" * 4096)
            f.flush()
            session = CountingSession(workload.num_envs)
            session.segment = mmap.mmap(f.fileno(), 4096)  # held until the process exits
        record("shm", name)
        return session


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


# -- the faults of tests/e2e/test_faults.py ---------------------------------------------------------------

from rlbench.api import Option  # noqa: E402


def this_repeat() -> tuple:
    """(cell_id, repeat) of the job this cell process runs: its spec is rlbench.running.child's last argument."""
    import json
    spec = json.loads(sys.argv[-1])
    return spec["cell_id"], spec["repeat"]


class FaultSession(CountingSession):
    """Counts steps like CountingSession; on step number `after` (inside warm-up or the timed window,
    whichever it is) it calls `fault()`."""

    def __init__(self, n, fault, after=20):
        super().__init__(n)
        self.fault, self.after, self.steps = fault, after, 0

    def step(self) -> int:
        self.steps += 1
        if self.steps == self.after:
            self.fault()
        return self.n


class ExitMidStep(Adapter):
    """Ends its process with os._exit(3) in the middle of a step: no traceback, no result line."""
    name = "test-exit"

    def open(self, workload, options):
        record("exit-cell", os.getpid())
        return FaultSession(workload.num_envs, lambda: os._exit(3))


def _abort():
    import resource
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file in the test's folder
    os.abort()


class AbortMidStep(Adapter):
    """Dies of SIGABRT (os.abort()) in the middle of a step."""
    name = "test-abort"

    def open(self, workload, options):
        record("abort-cell", os.getpid())
        return FaultSession(workload.num_envs, _abort)


class Hold(Adapter):
    """Maps a /dev/shm segment under a name no library uses, leaves a double-forked grandchild in a session
    of its own that maps it too, starts a plain child, then hangs in step(): what a harness that is killed
    or interrupted mid-cell must clean up. Records hold-ready.pid last, once all of it is in place."""
    name = "test-hold"

    def open(self, workload, options):
        cell_id, repeat = this_repeat()
        name = f"rlbenchtest_hold_{os.getpid()}"
        path = os.path.join("/dev/shm", name)
        with open(path, "w+b") as f:
            f.write(b"\0" * 4096)
            f.flush()
            session = HangSession(workload.num_envs)
            session.segment = mmap.mmap(f.fileno(), 4096)
        piddir = os.environ["RLBENCH_TEST_PIDDIR"]
        with open(os.path.join(piddir, f"hold-shm-r{repeat}.name"), "w") as f:
            f.write(name)
        record(f"hold-cell-r{repeat}", os.getpid())
        record(f"hold-child-r{repeat}", subprocess.Popen(SLEEPER, **QUIET).pid)
        subprocess.run([sys.executable, "-c", DOUBLE_FORK, os.path.join(piddir, f"hold-grandchild-r{repeat}.pid"), path],
                       check=True, **QUIET)
        record(f"hold-ready-r{repeat}", os.getpid())
        return session


class KillWorkerSession:
    """gymnasium's AsyncVectorEnv whose first worker this session SIGKILLs on step number `after`."""

    def __init__(self, inner, after):
        self.inner, self.after, self.steps = inner, after, 0
        self.info = inner.info

    def step(self) -> int:
        self.steps += 1
        if self.steps == self.after:
            import signal
            worker = self.inner.envs.processes[0].pid
            record("killed-worker", worker)
            os.kill(worker, signal.SIGKILL)
        return self.inner.step()

    def close(self):
        self.inner.close()


class KillWorker(Adapter):
    """gymnasium-async (shared memory: a heap segment and semaphores its workers hold) whose step kills one
    of its own worker processes with SIGKILL after a few steps."""
    name = "test-kill-worker"
    requires = ("gymnasium",)
    options = (
        Option("context", str, "spawn", "multiprocessing start method", ("fork", "forkserver", "spawn")),
        Option("after", int, 10, "the step that kills the first worker"),
    )

    def open(self, workload, options):
        from rlbench import registry
        base = registry.get("gymnasium-async")
        inner = base().open(workload, base.resolve_options({"context": options["context"]}))
        for i, p in enumerate(inner.envs.processes):
            record(f"worker-{i}", p.pid)
        record("kill-worker-cell", os.getpid())
        return KillWorkerSession(inner, options["after"])


# What a chaos repeat may do; the fault of a repeat is fixed by $RLBENCH_TEST_CHAOS_SEED, its cell and repeat.
CHAOS = ("ok", "raise", "exit", "hang", "leak_shm", "daemon", "kill_worker")


def chaos_fault(seed: str, cell_id: str, repeat: int) -> str:
    import random
    return random.Random(f"{seed}|{cell_id}|{repeat}").choice(CHAOS)


class Chaos(Adapter):
    """Misbehaves in a way picked per repeat (chaos_fault); records every pid it starts and the fault."""
    name = "test-chaos"
    requires = ("gymnasium",)

    def open(self, workload, options):
        cell_id, repeat = this_repeat()
        fault = chaos_fault(os.environ["RLBENCH_TEST_CHAOS_SEED"], cell_id, repeat)
        tag = f"chaos-n{workload.num_envs}-r{repeat}"
        record(f"{tag}-cell", os.getpid())
        if fault == "raise":
            return BoomSession(workload.num_envs)
        if fault == "exit":
            return FaultSession(workload.num_envs, lambda: os._exit(3), after=5)
        if fault == "hang":
            record(f"{tag}-hang-child", subprocess.Popen(SLEEPER, start_new_session=True, **QUIET).pid)
            return HangSession(workload.num_envs)
        if fault == "leak_shm":
            session = ShmLeak().open(workload, options)
            os.replace(os.path.join(os.environ["RLBENCH_TEST_PIDDIR"], "shm.pid"),
                       os.path.join(os.environ["RLBENCH_TEST_PIDDIR"], f"{tag}.shm"))
            return session
        if fault == "daemon":
            record(f"{tag}-daemon", subprocess.Popen(SLEEPER, start_new_session=True, **QUIET).pid)
            return CountingSession(workload.num_envs)
        if fault == "kill_worker":
            from rlbench import registry
            base = registry.get("gymnasium-async")
            context = "spawn" if repeat % 2 == 0 else "forkserver"  # workers: the cell's children, or not
            inner = base().open(workload, base.resolve_options({"context": context}))
            for i, p in enumerate(inner.envs.processes):
                record(f"{tag}-worker-{i}", p.pid)
            return KillWorkerSession(inner, after=5)
        return CountingSession(workload.num_envs)


class GateSession(CountingSession):
    def __init__(self, n, gate):
        super().__init__(n)
        self.gate = gate

    def step(self) -> int:
        while not os.path.exists(self.gate):
            time.sleep(0.02)
        return self.n


class Gate(Adapter):
    """Works like a well-behaved adapter, but its steps wait until $RLBENCH_TEST_PIDDIR/gate.open exists:
    a run the test holds open as long as it needs, then lets finish normally."""
    name = "test-gate"

    def open(self, workload, options):
        cell_id, repeat = this_repeat()
        record(f"gate-waiting-r{repeat}", os.getpid())
        return GateSession(workload.num_envs, os.path.join(os.environ["RLBENCH_TEST_PIDDIR"], "gate.open"))
