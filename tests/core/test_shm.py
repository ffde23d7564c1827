"""Shared memory: a gymnasium-async run with shared_memory=true leaves nothing in /dev/shm; the runner
removes what a cell leaked, and nothing another live process holds."""
import mmap
import os
import subprocess
import sys
import time

import pytest
from support import TINY, shm_left_since

from rlbench.running import proctree

pytestmark = pytest.mark.skipif(not os.path.isdir(proctree.SHM_DIR), reason="no /dev/shm")
MULTIPROCESSING_SHM = ("pym-", "sem.mp-", "psm_")


@pytest.mark.parametrize("context", ["fork", "forkserver"])
def test_async_shared_memory_run_leaves_no_segment(cli_run, context):
    before = proctree.shm_snapshot()
    run = cli_run(["run", "--adapter", "gymnasium-async", "--opt", "shared_memory=true", "--opt",
                   f"context={context}", "--env", "CartPole-v1", "--num-envs", "3", *TINY])
    assert run.rc == 0
    [row] = run.rows
    assert row["status"] == "ok", row.get("error")
    # of what multiprocessing makes for gymnasium (heap arenas, semaphores, SharedMemory): files of other names
    # are other processes' (a run beside this test may leak its own, on purpose in tests/e2e/test_faults.py)
    left = shm_left_since(before)
    assert {k: n for k, n in left.items() if n.startswith(MULTIPROCESSING_SHM)} == {}
    # gymnasium released its segments itself: the runner had nothing to remove, and nothing else to say
    assert not row.get("error")


def _files(tmp_path, monkeypatch, *names) -> dict:
    for name in names:
        (tmp_path / name).write_bytes(b"\0" * 4096)
    monkeypatch.setattr(proctree, "SHM_DIR", str(tmp_path))
    return {k: n for k, n in proctree.shm_snapshot().items() if n in names}


def test_snapshot_keys_every_file_by_inode_whatever_its_name(tmp_path, monkeypatch):
    segments = _files(tmp_path, monkeypatch, "psm_abc", "sem.mp-1", "unrelated")
    assert sorted(segments.values()) == ["psm_abc", "sem.mp-1", "unrelated"]
    assert all(k == (os.stat(tmp_path / n).st_dev, os.stat(tmp_path / n).st_ino) for k, n in segments.items())


def test_remove_shm_checks_the_inode_before_unlinking(tmp_path, monkeypatch):
    """A candidate whose name now names another file (the segment was removed and the name taken again
    by someone else) is left alone."""
    segments = _files(tmp_path, monkeypatch, "mine", "reused")
    key = next(k for k, n in segments.items() if n == "reused")
    (tmp_path / "reused").rename(tmp_path / "moved")  # kept, so that its inode is not free for the new file
    (tmp_path / "reused").write_bytes(b"other")
    assert proctree.remove_shm(segments) == ["mine"]
    assert (tmp_path / "reused").read_bytes() == b"other"
    assert proctree.remove_shm({key: "missing"}) == []


def test_a_segment_another_process_holds_is_not_removed(tmp_path, monkeypatch):
    """A candidate that a live process still maps or has open is in use, not leaked: even when it is mapped
    under another name (glibc maps a new semaphore under a temporary name, then links its real one)."""
    segments = _files(tmp_path, monkeypatch, "psm_mapped", "psm_open", "psm_free", "tmp_name")
    os.link(tmp_path / "tmp_name", tmp_path / "sem.linked")
    segments = {k: ("sem.linked" if n == "tmp_name" else n) for k, n in segments.items()}
    holder = subprocess.Popen([sys.executable, "-c", "import sys; f = open(sys.argv[1]); sys.stdin.read()",
                               str(tmp_path / "psm_open")], stdin=subprocess.PIPE)
    with open(tmp_path / "psm_mapped", "r+b") as f:
        mapped = mmap.mmap(f.fileno(), 4096)
    with open(tmp_path / "tmp_name", "r+b") as f:
        linked = mmap.mmap(f.fileno(), 4096)
    (tmp_path / "tmp_name").unlink()  # mapped under a name that is gone, reachable under another
    try:
        deadline = time.time() + 10
        open_key = next(k for k, n in segments.items() if n == "psm_open")
        while open_key not in proctree.held_shm([holder.pid]) and time.time() < deadline:
            time.sleep(0.01)
        assert proctree.remove_shm(segments) == ["psm_free"]
        assert all((tmp_path / n).exists() for n in ("psm_mapped", "psm_open", "sem.linked"))
    finally:
        mapped.close()
        linked.close()
        holder.communicate(b"")
    assert proctree.remove_shm(segments) == ["psm_mapped", "psm_open", "sem.linked"]


def test_held_shm_sees_a_semaphore_another_process_just_created():
    """The bug a concurrent run hit: a multiprocessing semaphore is held by its creator from the moment its
    name exists, so nothing may take it for a leak."""
    import multiprocessing
    before = proctree.shm_snapshot()
    lock = multiprocessing.get_context("spawn").Lock()
    try:
        new = {k: n for k, n in proctree.shm_snapshot().items() if k not in before}
        ours = "sem." + (lock._semlock.name or "").lstrip("/")   # not another test's, made at the same moment
        sems = {k: n for k, n in new.items() if n == ours}
        if not sems:
            pytest.skip("this platform's semaphores are not files in /dev/shm")
        assert set(sems) <= proctree.held_shm([os.getpid()])
        assert proctree.remove_shm(sems) == []
    finally:
        del lock
