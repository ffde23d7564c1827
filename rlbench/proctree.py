"""A process and all its descendants: CPU time, peak memory, and killing them all."""
import os
import signal

import psutil


def tree(root: psutil.Process) -> list:
    try:
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def cpu_seconds(root: psutil.Process) -> dict:
    """pid -> user+system CPU seconds, for the tree as it is now."""
    out = {}
    for p in tree(root):
        try:
            t = p.cpu_times()
            out[p.pid] = t.user + t.system
        except psutil.Error:
            pass
    return out


def cpu_util(before: dict, after: dict, wall_s: float) -> float:
    """Average busy cores over the window (1.0 = one core fully busy)."""
    busy = sum(after[pid] - before.get(pid, 0.0) for pid in after)
    return busy / wall_s if wall_s > 0 else float("nan")


def peak_rss_mb(root: psutil.Process) -> float:
    """Sum of every live process's peak resident set (VmHWM): an upper bound of the tree's peak."""
    total = 0
    for p in tree(root):
        try:
            with open(f"/proc/{p.pid}/status") as f:
                hwm = next((line for line in f if line.startswith("VmHWM:")), None)
            total += int(hwm.split()[1]) * 1024 if hwm else p.memory_info().rss
        except (OSError, psutil.Error, StopIteration):
            pass
    return total / 2**20


def alive(p: psutil.Process) -> bool:
    """Running, as opposed to exited (gone, or a zombie waiting to be reaped)."""
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def kill_tree(procs) -> None:
    """SIGKILL every process given and reap the ones that are our children."""
    procs = [p for p in procs if p.pid != os.getpid()]
    for p in procs:
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.Error:
            pass
    psutil.wait_procs(procs, timeout=5)


def become_subreaper() -> bool:
    """Orphans of a cell re-parent to us (not init), so none escapes the cleanup. Linux only."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


SHM_DIR = "/dev/shm"
SHM_PREFIXES = ("psm_", "sem.mp-", "mp-", "torch_", "wnsm_", "envpool")


def shm_entries() -> set:
    try:
        return {n for n in os.listdir(SHM_DIR) if n.startswith(SHM_PREFIXES)}
    except OSError:
        return set()


def shm_in_use() -> set:
    """Names under /dev/shm that some live process has open or mapped (/proc/PID/fd and maps)."""
    held = set()
    prefix = SHM_DIR + "/"
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/maps") as f:
                held.update(line.split(prefix, 1)[1].split(" (deleted)")[0].strip() for line in f if prefix in line)
            fd_dir = f"/proc/{pid}/fd"
            for fd in os.listdir(fd_dir):
                target = os.readlink(os.path.join(fd_dir, fd))
                if target.startswith(prefix):
                    held.add(target[len(prefix):])
        except OSError:  # gone, or another user's
            pass
    return held


def remove_shm(names) -> list:
    """Unlink the names that no live process holds: after a cell's tree is killed, a new entry still held
    belongs to someone else (another run on this machine), not to the cell."""
    names = set(names)
    if names:
        names -= shm_in_use()
    removed = []
    for name in sorted(names):
        try:
            os.unlink(os.path.join(SHM_DIR, name))
            removed.append(name)
        except OSError:
            pass
    return removed
