"""The machine limits replay figures are fractions of, measured in the same run (env.json "limits"): memory copy
on one and on every allowed core, and cold reads from DIR's filesystem (docs/report.md, "Limits in the same
run"), printed as one JSON object. numpy and the stdlib only.

    python -m rlbench.machine.limits --out-dir DIR [--memcpy-mb 256] [--disk-mb 1024] [--repeats 5]
"""
import argparse
import json
import multiprocessing as mp
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np

from rlbench.machine.pagecache import resident_frac

MIB = 1 << 20
READ_BYTES = MIB           # sequential read size
RANDOM_READ_S = 1.5        # each random-read figure's timed seconds, split over the repeats
SEQ_READ_S = 3.0           # no further sequential pass starts after this many seconds of them
WARM_FRAC = 0.05           # more than this resident after a drop: the reads were not cold
DEFAULTS = {"measure": True, "memcpy_mb": 256, "disk_mb": 1024, "repeats": 5}
TIMEOUT_S = 300.0


def memcpy_1core_gbps(memcpy_mb: int, repeats: int) -> list:
    src, dst = _faulted(memcpy_mb * MIB), _faulted(memcpy_mb * MIB)
    np.copyto(dst, src)  # untimed: TLB and any lazily backed page warmed
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        runs.append(src.nbytes / (time.perf_counter() - t0) / 1e9)
    return runs


def memcpy_allcore_gbps(memcpy_mb: int, repeats: int) -> tuple:
    """One process per allowed CPU, pinned there, each copying its own buffers; the copies start
    together on a barrier and a repeat's rate is all bytes over the slowest process's time."""
    cpus = sorted(os.sched_getaffinity(0))
    nbytes = max(64, memcpy_mb // len(cpus)) * MIB
    ctx = mp.get_context("fork")  # this process imports numpy and nothing that minds a fork
    barrier = ctx.Barrier(len(cpus))
    pipes, procs = [], []
    try:
        for cpu in cpus:
            recv, send = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_copy_worker, args=(cpu, nbytes, repeats, barrier, send), daemon=True)
            p.start()
            pipes.append(recv)
            procs.append(p)
        times = []
        for recv in pipes:
            if not recv.poll(TIMEOUT_S / 2):
                raise RuntimeError("a memcpy worker sent nothing")
            got = recv.recv()
            if isinstance(got, str):
                raise RuntimeError(f"memcpy worker: {got}")
            times.append(got)
    finally:
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
    slowest = np.max(np.array(times), axis=0)
    return [len(cpus) * nbytes / float(t) / 1e9 for t in slowest], len(cpus)


def _copy_worker(cpu, nbytes, repeats, barrier, send):
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        os.sched_setaffinity(0, {cpu})
        src, dst = _faulted(nbytes), _faulted(nbytes)
        np.copyto(dst, src)
        times = []
        for _ in range(repeats):
            barrier.wait(TIMEOUT_S / 2)
            t0 = time.perf_counter()
            np.copyto(dst, src)
            times.append(time.perf_counter() - t0)
        send.send(times)
    except BaseException as exc:
        barrier.abort()  # the others stop waiting for this one
        send.send(f"{type(exc).__name__}: {exc}")


def _faulted(nbytes: int) -> np.ndarray:
    buf = np.empty(nbytes, np.uint8)
    buf.fill(1)  # every page written: none faulted in while timed
    return buf


# -- disk ------------------------------------------------------------------------------------------

def temp_path(out_dir: str, pid: int) -> str:
    """The scratch file of the measuring process `pid` (its parent removes it if it was killed)."""
    return os.path.join(out_dir, f".rlbench-limits-{pid}.tmp")


def disk_figures(out_dir: str, disk_mb: int, repeats: int, random_read_s: float = RANDOM_READ_S) -> dict:
    """Cold reads of a scratch file written in out_dir, which is removed whatever happens."""
    free = os.statvfs(out_dir)
    if free.f_bavail * free.f_frsize < disk_mb * MIB * 1.1:
        raise RuntimeError(f"{out_dir}: less than {disk_mb * 1.1:.0f} MiB free for the disk read test "
                           f"(smaller: --disk-mb)")
    path = temp_path(out_dir, os.getpid())
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        size = _write(fd, disk_mb)
        resident = [_drop(fd, size)]
        seq, spent = [], 0.0
        while len(seq) < repeats and (not seq or spent < SEQ_READ_S):
            if seq:
                resident.append(_drop(fd, size))
            rate, seconds = _seq_read(fd, size)
            seq.append(rate)
            spent += seconds
        out = {"disk_seq_read_gbps": seq}
        for label, block in (("4k", 4096), ("1m", MIB)):
            runs, iops = [], []
            for _ in range(repeats):
                resident.append(_drop(fd, size))
                rate, ops = _random_read(fd, size, block, random_read_s / repeats)
                runs.append(rate)
                iops.append(ops)
            out[f"disk_random_read_{label}_gbps"] = runs
            if label == "4k":
                out["disk_random_read_4k_iops"] = float(np.median(iops))
    finally:
        os.close(fd)
        os.unlink(path)
    known = [r for r in resident if r is not None]
    frac = max(known) if known else None
    out["page_cache_resident_frac"] = frac
    out["page_cache"] = ("unknown (posix_fadvise DONTNEED; mincore unavailable)" if frac is None else
                         f"{'cold' if frac <= WARM_FRAC else 'warm'} (posix_fadvise DONTNEED; "
                         f"{frac:.1%} resident after drop)")
    return out


def _write(fd: int, disk_mb: int) -> int:
    """disk_mb MiB of random bytes, every 4 KiB page different (nothing compresses or dedups), fsynced."""
    block = np.random.default_rng(0).integers(0, 256, MIB, dtype=np.uint8)
    stamps = block.view(np.uint64)[::512]  # the first 8 bytes of each page
    pages = np.arange(len(stamps), dtype=np.uint64)
    for i in range(disk_mb):
        stamps[:] = pages + np.uint64(i * len(stamps))
        view = memoryview(block)
        while view:
            view = view[os.write(fd, view):]
    os.fsync(fd)
    return disk_mb * MIB


def _drop(fd: int, size: int):
    """Evict the file from the page cache; returns the share still resident (None: unknown)."""
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    return resident_frac(fd, size)


def _seq_read(fd: int, size: int) -> tuple:
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
    buf = bytearray(READ_BYTES)
    t0 = time.perf_counter()
    offset = 0
    while offset < size:
        n = os.preadv(fd, [buf], offset)
        if n <= 0:
            raise RuntimeError(f"short read at {offset} of {size} bytes")
        offset += n
    seconds = time.perf_counter() - t0
    return offset / seconds / 1e9, seconds


def _random_read(fd: int, size: int, block: int, seconds: float) -> tuple:
    """Aligned blocks in random order, each at most once (a second read would hit the cache),
    readahead off, for `seconds`; returns (GB/s, reads/s)."""
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
    offsets = (np.random.default_rng().permutation(size // block) * block).tolist()
    buf = bytearray(block)
    clock = time.perf_counter
    t0 = clock()
    deadline = t0 + seconds
    reads = 0
    for offset in offsets:
        os.preadv(fd, [buf], offset)
        reads += 1
        if clock() >= deadline:
            break
    elapsed = clock() - t0
    return reads * block / elapsed / 1e9, reads / elapsed


def fs_type(path: str):
    """The type of the filesystem holding path (the longest mount point above it in /proc/mounts)."""
    path = os.path.realpath(path)
    best, kind = "", None
    try:
        with open("/proc/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) < 3:
                    continue
                point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), parts[1])  # \040: space
                inside = path == point or path.startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best):
                    best, kind = point, parts[2]
    except OSError:
        return None
    return kind


# -- all of it -------------------------------------------------------------------------------------

def measure(out_dir: str, memcpy_mb: int = DEFAULTS["memcpy_mb"], disk_mb: int = DEFAULTS["disk_mb"],
            repeats: int = DEFAULTS["repeats"], random_read_s: float = RANDOM_READ_S) -> dict:
    t0 = time.perf_counter()
    one = memcpy_1core_gbps(memcpy_mb, repeats)
    every, processes = memcpy_allcore_gbps(memcpy_mb, repeats)
    disk = disk_figures(out_dir, disk_mb, repeats, random_read_s)
    out = {"memcpy_1core_gbps": _figure(one), "memcpy_allcore_gbps": _figure(every)}
    for key in ("disk_seq_read_gbps", "disk_random_read_4k_gbps", "disk_random_read_1m_gbps"):
        out[key] = _figure(disk.pop(key))
    out.update(disk, processes=processes, memcpy_mb=memcpy_mb, disk_mb=disk_mb, repeats=repeats,
               disk_path=os.path.abspath(out_dir), fs_type=fs_type(out_dir),
               seconds=round(time.perf_counter() - t0, 3))
    return out


def _figure(runs) -> dict:
    return {"median": float(np.median(runs)), "runs": [float(f"{r:.4g}") for r in runs]}


def summary_line(limits: dict) -> str:
    """One line of the figures, for the console."""
    if "error" in limits:
        return f"not measured: {limits['error']}"
    med = {k: v["median"] for k, v in limits.items() if isinstance(v, dict) and "median" in v}
    return (f"memcpy {med['memcpy_1core_gbps']:.1f} GB/s on 1 core, {med['memcpy_allcore_gbps']:.1f} on "
            f"{limits['processes']}; disk {limits['disk_path']} ({limits['fs_type'] or 'fs unknown'}, "
            f"{limits['page_cache']}): seq {med['disk_seq_read_gbps']:.2f} GB/s, random 4 KiB "
            f"{med['disk_random_read_4k_gbps']:.3f} GB/s ({limits['disk_random_read_4k_iops']:.0f} IOPS), "
            f"random 1 MiB {med['disk_random_read_1m_gbps']:.2f} GB/s ({limits['seconds']:.0f} s)")


def measure_in_subprocess(out_dir: str, memcpy_mb: int = DEFAULTS["memcpy_mb"], disk_mb: int = DEFAULTS["disk_mb"],
                          repeats: int = DEFAULTS["repeats"], timeout_s: float = TIMEOUT_S) -> dict:
    """`python -m rlbench.machine.limits` in a fresh interpreter (numpy only, so forking its workers is safe);
    a failure comes back as {"error": "..."} and never raises, so a sweep still runs without it."""
    out_dir = os.path.abspath(out_dir)
    cmd = [sys.executable, "-m", "rlbench.machine.limits", "--out-dir", out_dir, "--memcpy-mb", str(memcpy_mb),
           "--disk-mb", str(disk_mb), "--repeats", str(repeats)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except BaseException as exc:  # timeout or interrupt: SIGTERM lets it remove its file
        proc.terminate()
        try:
            proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
        if os.path.exists(temp_path(out_dir, proc.pid)):
            os.unlink(temp_path(out_dir, proc.pid))
        if isinstance(exc, subprocess.TimeoutExpired):
            return {"error": f"no result after {timeout_s:g} s"}
        raise
    if proc.returncode != 0:
        lines = err.strip().splitlines()
        return {"error": lines[-1] if lines else f"exit code {proc.returncode}"}
    try:
        return json.loads(out)
    except ValueError:
        return {"error": f"not JSON: {out[:200]!r}"}


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive integer")
    return value


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m rlbench.machine.limits", description=__doc__.split("\n")[0])
    p.add_argument("--out-dir", required=True, help="directory on the filesystem whose reads are measured")
    p.add_argument("--memcpy-mb", type=positive_int, default=DEFAULTS["memcpy_mb"], help="MiB per copy buffer")
    p.add_argument("--disk-mb", type=positive_int, default=DEFAULTS["disk_mb"], help="MiB of the scratch file")
    p.add_argument("--repeats", type=positive_int, default=DEFAULTS["repeats"], help="runs per figure (median)")
    p.add_argument("--random-read-s", type=float, default=RANDOM_READ_S,
                   help="timed seconds of each random-read figure, over all its repeats")
    args = p.parse_args(argv)
    if not os.path.isdir(args.out_dir):
        p.error(f"--out-dir {args.out_dir}: not a directory")
    signal.signal(signal.SIGTERM, _interrupt)  # killed by a timeout: the scratch file still goes
    try:
        result = measure(args.out_dir, args.memcpy_mb, args.disk_mb, args.repeats, args.random_read_s)
    except (OSError, RuntimeError) as exc:
        print(f"rlbench.machine.limits: error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result))
    return 0


def _interrupt(signum, frame):
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
