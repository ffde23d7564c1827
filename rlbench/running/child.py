"""One (cell, repeat) in a fresh interpreter: `python -m rlbench.running.child SPEC_JSON`, JSON lines out.

The protocol is a command line in and JSON lines on stdout, so a cell can run under any
interpreter that has rlbench installed (per-adapter environments). Everything else the process
prints, including C libraries writing to fd 1, is redirected to stderr.
"""
import json
import os
import signal
import sys
import time
import traceback
from time import perf_counter

from rlbench.errors import Unsupported
from rlbench.running import gpu_memory


def _results_channel():
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return out


def emit(out, **event):
    out.write(json.dumps(event) + "\n")
    out.flush()


def run_cell(spec: dict, progress) -> dict:
    """Open the adapter's session, run the protocol, close. Returns the measured fields + status.
    `progress(**event)` hears where the cell stands, outside the timed window (a timeout's reason tells it)."""
    from rlbench import registry
    from rlbench.planning.plan import TimingProtocol
    from rlbench.running.timing import measure
    from rlbench.workload import Workload

    if spec.get("affinity"):
        os.sched_setaffinity(0, spec["affinity"])
    adapter_cls = registry.get(spec["adapter"])
    adapter = adapter_cls()
    workload = Workload.from_dict(spec["workload"])
    options = adapter_cls.resolve_options(spec.get("options", {}))
    # supports() was asked while planning and again by the sweep; asked here it would build the user's env
    # before open() sets the process up (a JAX env would start JAX's backend before the adapter's settings)
    reason = adapter.available()
    if reason:
        return {"status": "unsupported", "error": reason}
    t0 = perf_counter()
    try:
        session = adapter.open(workload, options)
    except Unsupported as exc:
        return {"status": "unsupported", "error": str(exc)}
    setup_s = perf_counter() - t0
    progress(event="opened", setup_s=setup_s)
    try:
        protocol = TimingProtocol(**spec["protocol"])
        result = measure(session.step, protocol, getattr(session, "metrics", None), getattr(session, "drain", None),
                         warmed=lambda units, seconds: progress(event="warmed", units=units, seconds=seconds),
                         reached=getattr(session, "reached", None) if protocol.until_target else None)
    except Exception as exc:
        try:
            # before close() reaps and joins them; a pipe that closed under the cell: its worker may not be
            # a zombie yet
            exc.dead_children = dead_children(DEATH_WAIT_S if isinstance(exc, PIPE_ERRORS) else 0.0)
        except AttributeError:
            pass
        raise
    finally:
        HELD.update(held_now())  # before close(): what the session holds, whether close() releases it or not
        t1 = perf_counter()
        session.close()
        close_s = perf_counter() - t1
    info = getattr(session, "info", {}) or {}
    return {"status": "ok", "setup_s": setup_s, "close_s": close_s, **result,
            "cpus": len(os.sched_getaffinity(0)), "torch_threads": _torch_threads(),
            "gpu_mem_peak_mb": gpu_memory.peak_mb(),
            **{k: info[k] for k in info_keys() if info.get(k) is not None}}


# What a session's `info` may tell about how it ran, kept in its results row.
COMMON_INFO = (
    "workers", "batch_size",
    "runtime_init_s",   # starting or joining a framework runtime (Ray), inside setup_s, never in a rate
    "placement",        # where each worker ran: [{node_id, hostname, pid}, ...]
    "cluster",          # the cluster the cell ran on (nodes, resources); the run's env.json gets it
    "device",           # where the work ran when the adapter decides it (e.g. JAX's default backend)
)


def info_keys() -> tuple:
    """COMMON_INFO and what each family's sessions may add (compile_s, replay store facts, lag histogram)."""
    from rlbench import registry
    return COMMON_INFO + tuple(k for f in registry.families() for k in f.info_keys)


def _torch_threads():
    """torch's intra-op threads as the cell ran, if the cell used torch at all."""
    torch = sys.modules.get("torch")
    return torch.get_num_threads() if torch is not None else None


def die_with_harness() -> None:
    """SIGKILL this process when the harness that started it dies, however it dies (Linux's parent-death
    signal; the run's reaper kills the rest of the tree)."""
    harness = os.environ.get("RLBENCH_HARNESS_PID")
    if not harness:
        return
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if int(harness) not in _ancestors():  # it died before the signal was armed
        os._exit(1)


def _ancestors() -> set:
    """This process's parent, its parent, ... (a profiled cell's parent is py-spy, the harness above it)."""
    found, pid = set(), os.getppid()
    while pid > 1 and pid not in found:
        found.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return found


HELD = set()  # (device, inode) of the /dev/shm segments the cell's tree held as its session closed


def held_now() -> set:
    from rlbench.running import proctree
    return proctree.held_shm([os.getpid(), *proctree.descendants(os.getpid())])


def held_at_end() -> list:
    """The /dev/shm segments this tree held as its session closed or holds now: the harness removes those that
    are left, and no longer held, once the tree is gone (it knows them by inode, not by name)."""
    return [list(k) for k in HELD | held_now()]


def describe(exc: BaseException) -> str:
    """`Type: message`, and for an exception that says nothing (a worker's pipe closing under it: EOFError,
    BrokenPipeError), which child processes of the cell had died and how."""
    text = f"{type(exc).__name__}: {exc}".strip()
    dead = getattr(exc, "dead_children", None) or dead_children()
    if not dead and isinstance(exc, PIPE_ERRORS):
        dead = dead_children(wait_s=DEATH_WAIT_S)
    if dead:
        text += f" ({'; '.join(dead)})" if str(exc).strip() else f" {'; '.join(dead)}"
    elif not str(exc).strip():
        text += f" {exc!r} with no message"
    return text


DEATH_WAIT_S = 0.5   # a killed worker's pipe closes before it is a zombie: how long the cell looks for it
PIPE_ERRORS = (EOFError, ConnectionError)   # what a worker's pipe raises when the worker is gone


def dead_children(wait_s: float = 0.0) -> list:
    """Worker processes of this cell that ended abnormally, e.g. a vector env's worker killed by a signal:
    multiprocessing's own (under fork, spawn or forkserver, whose workers are the server's children, reaped
    by it: only their Process objects know how they ended), and any other child not reaped yet, its status
    peeked at (WNOWAIT) so that whoever owns it still reaps it."""
    deadline = time.monotonic() + wait_s
    while True:
        found = _ended_children()
        if found or time.monotonic() >= deadline:
            return found
        time.sleep(0.02)


def _ended_children() -> list:
    import multiprocessing.process

    import psutil
    ended = {}
    for proc in list(getattr(multiprocessing.process, "_children", ())):  # started here and not joined yet
        code = proc.exitcode
        if code:
            ended[proc.pid] = -code if code < 0 else None, code if code > 0 else None
    for child in psutil.Process().children():
        if child.pid in ended:
            continue
        try:
            info = os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except (ChildProcessError, OSError):
            continue
        if info is not None and info.si_code in (os.CLD_KILLED, os.CLD_DUMPED):
            ended[child.pid] = info.si_status, None
        elif info is not None and info.si_code == os.CLD_EXITED and info.si_status:
            ended[child.pid] = None, info.si_status
    return [f"worker process {pid} was killed by {signal.Signals(sig).name}" if sig else
            f"worker process {pid} exited with code {code}" for pid, (sig, code) in sorted(ended.items())]


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    die_with_harness()
    out = _results_channel()
    spec = json.loads(argv[0])
    from rlbench.envs import in_cell
    in_cell()
    emit(out, event="start", pid=os.getpid())
    try:
        result = run_cell(spec, lambda **event: emit(out, **event))
    except Exception as exc:
        traceback.print_exc()
        emit(out, event="result", status="error", error=describe(exc), shm_held=held_at_end())
        return 1
    emit(out, event="result", **result, shm_held=held_at_end())
    return 0


if __name__ == "__main__":
    sys.exit(main())
