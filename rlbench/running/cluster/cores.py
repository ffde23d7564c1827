"""Which cores of a node a cell runs on. Ray counts CPUs without choosing them, so on each host every core
is a lock file (flock, through filelock) in one folder: two cells, of this run or of another run on the
same host, never hold the same core, and a lease ends with the process that held it, however it ends."""
import os
import random
import time
from dataclasses import dataclass

from filelock import FileLock, Timeout

LOCK_DIR = os.environ.get("RLBENCH_CORE_LOCKS", "/tmp/rlbench-cores")
NODE_CPUS_VAR = "RLBENCH_NODE_CPUS"   # a node's cores when several nodes share a host (a simulated cluster)


class LeaseTimeout(RuntimeError):
    pass


def node_cores() -> tuple:
    """The cores this node's cells may use: RLBENCH_NODE_CPUS (e.g. "0-3,8") within this process's
    affinity, or the whole affinity."""
    mine = sorted(os.sched_getaffinity(0))
    given = os.environ.get(NODE_CPUS_VAR, "").strip()
    if not given:
        return tuple(mine)
    wanted = set(parse_ranges(given))
    return tuple(c for c in mine if c in wanted)


def parse_ranges(text: str) -> list:
    """'0-3,8' -> [0, 1, 2, 3, 8]"""
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        low, _, high = part.partition("-")
        out += range(int(low), int(high or low) + 1)
    return out


@dataclass
class Lease:
    cores: tuple
    locks: list

    def release(self) -> None:
        for lock in self.locks:
            lock.release(force=True)
        self.locks = []


def lease(count: int, cores: tuple, timeout_s: float, poll_s: float = 0.05) -> Lease:
    """`count` of `cores` that no other lease on this host holds, waiting up to timeout_s for them."""
    if count > len(cores):
        raise LeaseTimeout(f"{count} cores asked of a node with {len(cores)} ({list(cores)})")
    os.makedirs(LOCK_DIR, mode=0o777, exist_ok=True)
    deadline = time.monotonic() + timeout_s
    while True:
        held = []
        for core in cores:
            lock = FileLock(os.path.join(LOCK_DIR, f"core-{core}.lock"), mode=0o666, is_singleton=False)
            try:
                lock.acquire(timeout=0)
            except Timeout:
                continue
            held.append((core, lock))
            if len(held) == count:
                return Lease(tuple(c for c, _ in held), [lk for _, lk in held])
        for _, lock in held:  # all or none: a partial hold could starve a neighbour wanting the rest
            lock.release(force=True)
        if time.monotonic() > deadline:
            raise LeaseTimeout(f"no {count} free cores of {list(cores)} in {timeout_s:g} s "
                               f"(held by other cells on this host: {LOCK_DIR})")
        time.sleep(poll_s * (1 + random.random()))
