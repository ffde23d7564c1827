"""A file's page-cache state: put it cold (written back, then evicted) or warm (read through once), and
ask how much of it is resident. Disk figures mean nothing without saying which (limits, disk stores)."""
import ctypes
import mmap
import os

import numpy as np


def set_state(path: str, cache: str) -> None:
    """cache = "cold": fsync, then posix_fadvise(DONTNEED) (pages still mapped by a process are not
    evicted: unmap them first); "warm": read the whole file once."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        if cache == "cold":
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        else:
            while os.read(fd, 16 << 20):
                pass
    finally:
        os.close(fd)


def resident_fraction(path: str):
    fd = os.open(path, os.O_RDONLY)
    try:
        return resident_frac(fd, os.fstat(fd).st_size)
    finally:
        os.close(fd)


def resident_frac(fd: int, size: int):
    """Share of the file's pages in the page cache (mincore(2) on a read-only mapping, which faults
    nothing in); None where that cannot be asked."""
    if size == 0:
        return 0.0
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                              ctypes.c_long)
        libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
        libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
    except (OSError, AttributeError):
        return None
    addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    if addr is None or addr == ctypes.c_void_p(-1).value:
        return None
    try:
        vec = np.zeros(-(-size // mmap.PAGESIZE), np.uint8)
        if libc.mincore(addr, size, vec.ctypes.data) != 0:
            return None
        return float((vec & 1).mean())
    finally:
        libc.munmap(addr, size)


def describe(path: str, cache: str) -> str:
    """'cold (0.0% resident' — the record a store keeps; `after` closes it as the window ends."""
    return f"{cache} ({_pct(resident_fraction(path))} resident"


def after(record: str, path: str) -> str:
    return f"{record}, {_pct(resident_fraction(path))} at the end)"


def _pct(frac) -> str:
    return "?" if frac is None else f"{frac:.1%}"
