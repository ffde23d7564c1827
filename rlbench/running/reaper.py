"""The run's watchdog: if `rlbench` itself dies (SIGKILL, OOM killer, a lost terminal), nothing its cells started
may run on under init. How it learns what to clean: docs/architecture.md, "The watchdog (running/reaper.py)".

    python -m rlbench.running.reaper DONE_FD child|detached   (stdin: the pipe; one JSON message per line)
"""
import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time

import psutil

from rlbench.running import proctree


class Reaper:
    """The run's end of the pipe. `detached`: the watchdog forks away from the process that starts it and goes
    to init (even if that process adopts orphans), so that what kills that process's children with it (Ray,
    when it kills a cancelled task's worker) leaves it to clean up; the run waits for its end on a second pipe,
    which closes when the watchdog exits."""

    def __init__(self, detached: bool = False):
        read, self._write = os.pipe()  # not inherited by cells: Python makes new fds close-on-exec
        done, done_write = os.pipe()
        try:
            with proctree.orphans_to_init() if detached else contextlib.nullcontext():
                self.proc = subprocess.Popen([sys.executable, "-m", "rlbench.running.reaper", str(done_write),
                                              "detached" if detached else "child"], stdin=read,
                                             pass_fds=(done_write,), stdout=subprocess.DEVNULL,
                                             start_new_session=True)
                if detached:   # the launcher exits once it has forked the watchdog, which goes to init
                    self.proc.wait()
        finally:
            os.close(read)
            os.close(done_write)
        self._done = done
        self.pid = _first_line(done) if detached else self.proc.pid   # the watchdog's
        self._watchdog = _process(self.pid) if detached else None   # not our child; with its start time

    def _send(self, **message) -> None:
        if self._write is None:
            return
        try:
            os.write(self._write, (json.dumps(message) + "\n").encode())
        except OSError:  # the reaper is gone: the runner's own cleanup still runs
            pass

    def track(self, key: str, procs=(), shm=(), folder: str = None) -> None:
        """procs: psutil.Process objects of the tree `key`; shm: (device, inode) pairs it holds."""
        procs = [(p.pid, p.create_time()) for p in procs if _created(p)]
        self._send(op="track", key=key, procs=procs, shm=[list(k) for k in shm], folder=folder)

    def forget(self, key: str) -> None:
        self._send(op="forget", key=key)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        if self._write is not None:
            os.close(self._write)
            self._write = None
        if self._done is not None:
            if not _closed_within(self._done, timeout=10) and self.pid:
                with contextlib.suppress(OSError):   # it holds the pipe's end: the pid is still its own
                    os.kill(self.pid, signal.SIGKILL)
            os.close(self._done)
            self._done = None
        self.proc.wait()   # the watchdog (child) has ended; a detached one's launcher was waited for at start
        if self._watchdog is not None:   # its pipe closes as it exits, a moment before it has
            _wait_exited(self._watchdog, timeout=5)
            self._watchdog = None


def _first_line(fd: int):
    """The pid the watchdog writes first (None if it died before)."""
    line = b""
    while not line.endswith(b"\n"):
        chunk = os.read(fd, 1)
        if not chunk:
            return None
        line += chunk
    return int(line)


def _process(pid):
    try:
        return psutil.Process(pid) if pid else None
    except psutil.NoSuchProcess:
        return None


def _wait_exited(p: psutil.Process, timeout: float) -> None:
    """Until `p`, not our child (no wait() of ours collects it), is gone or a zombie for its parent to collect."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if not p.is_running() or p.status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.001)


def _closed_within(fd: int, timeout: float) -> bool:
    """Whether every writer closed the pipe within `timeout` seconds (what else comes is read and dropped)."""
    deadline = time.monotonic() + timeout
    while True:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return False
        if not os.read(fd, 4096):
            return True


def _created(p) -> bool:
    try:
        p.create_time()
        return True
    except psutil.Error:
        return False


def reap(tree: dict) -> None:
    """Kill a tracked tree (only processes whose pid still has the tracked start time), then remove the
    segments it held that nobody holds any more, and its temp folder."""
    victims = []
    for pid, created in tree["procs"].items():
        try:
            p = psutil.Process(pid)
            if abs(p.create_time() - created) < 0.01:
                victims.append(p)
        except psutil.Error:
            continue
    for p in victims:
        try:
            if os.getpgid(p.pid) == p.pid:  # a group leader (the cell): its whole process group
                os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
    proctree.kill_tree(victims)
    on_disk = proctree.shm_snapshot()
    proctree.remove_shm({k: on_disk[k] for k in tree["shm"] if k in on_disk})
    if tree["folder"]:
        shutil.rmtree(tree["folder"], ignore_errors=True)


def main(done: int, mode: str) -> int:
    """`done`: the pipe whose end closes when this process exits; it first says the pid."""
    if mode == "detached" and os.fork():
        os._exit(0)   # the launcher: the watchdog goes on as nobody's child
    os.write(done, f"{os.getpid()}\n".encode())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal's Ctrl-C is the run's to handle
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    trees = {}
    for line in sys.stdin.buffer:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if message["op"] == "forget":
            trees.pop(message["key"], None)
            continue
        tree = trees.setdefault(message["key"], {"procs": {}, "shm": set(), "folder": None})
        tree["procs"].update({pid: created for pid, created in message["procs"]})
        tree["shm"].update(tuple(k) for k in message["shm"])
        tree["folder"] = message["folder"] or tree["folder"]
    for tree in trees.values():  # the run died without cleaning these
        reap(tree)
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), sys.argv[2]))
