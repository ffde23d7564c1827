"""The processes a test may have started, and only those: tests must pass with another `rlbench run` (or another
test worker) going on beside them, so a check for survivors, or a fault a test injects, never looks at the whole
machine. Ray's daemons and actors, rlbench's cells and their workers all descend from the process that started
them; one that outlived its parent was re-parented to init (pid 1) and counts when it was created after `since`."""
import contextlib
import multiprocessing as mp
import os
import time
from concurrent.futures import ProcessPoolExecutor

import psutil


@contextlib.contextmanager
def spawned(initializer=None):
    """call(fn, *args) -> fn(*args) in one spawned interpreter, for what must not run in the test runner (JAX's
    backend: its threads make every later fork of the runner deadlock-prone). Its worker starts here, not inside
    the first test that calls it, whose check for left processes would count it."""
    pool = ProcessPoolExecutor(1, mp_context=mp.get_context("spawn"), initializer=initializer)
    try:
        pool.submit(os.getpid).result(timeout=120)
        yield lambda fn, *args: pool.submit(fn, *args).result(timeout=300)
    finally:
        pool.shutdown()


def ours(since: float = None) -> list:
    """This process's live descendants, and (given `since`, a time.time()) the orphans created after it."""
    me = psutil.Process()
    found = {p.pid: p for p in me.children(recursive=True)}
    if since is not None:
        for p in psutil.process_iter(["ppid", "create_time"]):
            if p.pid not in found and p.info["ppid"] == 1 and (p.info["create_time"] or 0) >= since - 1:
                found[p.pid] = p
                try:
                    found.update((c.pid, c) for c in p.children(recursive=True))
                except psutil.Error:
                    continue
    alive = []
    for p in found.values():
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                alive.append(p)
        except psutil.Error:
            continue
    return alive


def text(p) -> str:
    """Name and command line, '' for a process gone or not ours to read."""
    try:
        return " ".join([p.name()] + p.cmdline())
    except psutil.Error:
        return ""


def matching(needles, since: float = None) -> list:
    """ours(since) whose name or command line holds one of `needles`."""
    return [p for p in ours(since) if any(n in text(p) for n in needles)]


def settle(probe, timeout=10.0):
    """probe() until it finds nothing or `timeout` passes; its last finding (what exits or is cleaned up a
    moment after the run is not a leak; what is still there after `timeout` is)."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)
