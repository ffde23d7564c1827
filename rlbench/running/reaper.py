"""The run's watchdog: if `rlbench` itself dies (SIGKILL, OOM killer, a lost terminal), nothing its cells started
may run on under init. How it learns what to clean: docs/architecture.md, "The watchdog (running/reaper.py)".

    python -m rlbench.running.reaper   (stdin: the pipe; one JSON message per line)
"""
import json
import os
import shutil
import signal
import subprocess
import sys

import psutil

from rlbench.running import proctree


class Reaper:
    """The run's end of the pipe."""

    def __init__(self):
        read, self._write = os.pipe()  # not inherited by cells: Python makes new fds close-on-exec
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", "rlbench.running.reaper"], stdin=read,
                                         stdout=subprocess.DEVNULL, start_new_session=True)
        finally:
            os.close(read)

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

    def close(self) -> None:
        if self._write is not None:
            os.close(self._write)
            self._write = None
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


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


def main() -> int:
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
    sys.exit(main())
