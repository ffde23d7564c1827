"""What one repeat's process tree is and holds, learnt while it runs: its processes (orphans re-parented to the
harness included) and the /dev/shm segments they held, known by inode, so cleanup touches only what the repeat
itself started. Every finding is passed on to the run's reaper (docs/architecture.md, "The watchdog
(running/reaper.py)").
"""
import os
import threading

import psutil

from rlbench.running import proctree

FIRST_S, MAX_S = 0.05, 2.0   # sampling interval: doubles from FIRST_S up to MAX_S


class TreeWatch:
    def __init__(self, key: str, exclude: set, reaper=None, folder: str = None):
        """exclude: pids below the harness that are not the repeat's (there before it started)."""
        self.key, self.exclude, self.reaper, self.folder = key, set(exclude), reaper, folder
        self.procs = {}   # pid -> psutil.Process, every member ever seen
        self.shm = set()  # (device, inode) of every segment a member ever held
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"treewatch {key}", daemon=True)

    def start(self) -> "TreeWatch":
        if self.reaper is not None and self.folder:
            self.reaper.track(self.key, folder=self.folder)
        self._thread.start()
        return self

    def _loop(self) -> None:
        interval = FIRST_S
        while not self._stop.wait(interval):
            self.sample()
            interval = min(interval * 2, MAX_S)

    def sample(self, extra_shm=()) -> None:
        with self._lock:
            pids = proctree.descendants(os.getpid()) - self.exclude
            new = []
            for pid in pids - set(self.procs):
                try:
                    p = psutil.Process(pid)
                    p.create_time()
                except psutil.Error:
                    continue
                self.procs[pid] = p
                new.append(p)
            held = proctree.held_shm(pids) | set(extra_shm)
            fresh = held - self.shm
            self.shm |= fresh
            if (new or fresh) and self.reaper is not None:
                self.reaper.track(self.key, new, fresh)

    def stop(self, extra_shm=()) -> None:
        """Stop sampling; one last sample (`extra_shm`: what the cell said it held as it ended)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.sample(extra_shm)

    def alive(self) -> list:
        return [p for p in self.procs.values() if proctree.alive(p)]
