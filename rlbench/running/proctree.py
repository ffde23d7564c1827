"""A process and all its descendants: CPU time, peak memory, and killing them all."""
import contextlib
import os
import signal
import stat

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


def become_subreaper(adopt: bool = True) -> bool:
    """Orphans of a cell re-parent to us (not init), so none escapes the cleanup; `adopt=False` undoes it.
    Linux only."""
    return _prctl(36, int(adopt))   # PR_SET_CHILD_SUBREAPER


def is_subreaper() -> bool:
    import ctypes
    flag = ctypes.c_int(0)
    return _prctl(37, ctypes.byref(flag)) and flag.value == 1   # PR_GET_CHILD_SUBREAPER


def _prctl(option: int, arg) -> bool:
    try:
        import ctypes
        return ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


@contextlib.contextmanager
def orphans_to_init():
    """Inside, an orphan of this process's tree goes to init, not to us (if we adopt them)."""
    adopting = is_subreaper()
    if adopting:
        become_subreaper(False)
    try:
        yield
    finally:
        if adopting:
            become_subreaper(True)


SHM_DIR = "/dev/shm"


def shm_snapshot() -> dict:
    """(device, inode) -> name of every file in /dev/shm now. An inode, not a name, says which segment
    an entry is: a name can be taken again by another process, and glibc maps a new semaphore under a
    temporary name before linking it under its own."""
    out = {}
    try:
        with os.scandir(SHM_DIR) as entries:
            for e in entries:
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    out[(st.st_dev, st.st_ino)] = e.name
    except OSError:
        pass
    return out


def _shm_dev():
    try:
        return os.stat(SHM_DIR).st_dev
    except OSError:
        return None


def held_shm(pids) -> set:
    """(device, inode) of every /dev/shm file the given processes map or hold open (/proc/PID/maps and
    fd), deleted or renamed ones included."""
    dev = _shm_dev()
    if dev is None:
        return set()
    maps_dev = f"{os.major(dev):02x}:{os.minor(dev):02x}"
    held = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps") as f:
                for line in f:
                    parts = line.split(None, 5)
                    if len(parts) == 6 and parts[3] == maps_dev:
                        held.add((dev, int(parts[4])))
            fd_dir = f"/proc/{pid}/fd"
            for fd in os.listdir(fd_dir):
                try:
                    if os.readlink(os.path.join(fd_dir, fd)).startswith(SHM_DIR + "/"):
                        st = os.stat(os.path.join(fd_dir, fd))
                        held.add((st.st_dev, st.st_ino))
                except OSError:
                    continue
        except (OSError, ValueError):  # gone, or another user's
            continue
    return held


def all_pids() -> list:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def remove_shm(candidates: dict) -> list:
    """Unlink the candidates ((device, inode) -> name) that are still that file and that no live process
    holds. Only ever called with segments the caller's own process tree held: another process's
    segment is never a candidate, and a candidate still held is in use, not leaked."""
    if not candidates:
        return []
    held = held_shm(all_pids())
    removed = []
    for key, name in sorted(candidates.items(), key=lambda kv: kv[1]):
        path = os.path.join(SHM_DIR, name)
        try:
            st = os.stat(path, follow_symlinks=False)
            if (st.st_dev, st.st_ino) != key or key in held:
                continue
            os.unlink(path)
            removed.append(name)
        except OSError:
            pass
    return removed


def descendants(root: int) -> set:
    """Pids below `root` now, from one pass over /proc (cheaper than psutil's walk per process)."""
    children = {}
    for pid in all_pids():
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(pid)
    out, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out
