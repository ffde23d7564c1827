"""Shared memory: a gymnasium-async run with shared_memory=true leaves nothing in /dev/shm; the runner
removes what a cell leaked, and nothing another live process holds."""
import mmap
import os
import subprocess
import sys
import time

import pytest

from conftest import TINY
from rlbench import proctree

pytestmark = pytest.mark.skipif(not os.path.isdir(proctree.SHM_DIR), reason="no /dev/shm")


@pytest.mark.parametrize("context", ["fork", "forkserver"])
def test_async_shared_memory_run_leaves_no_segment(cli_run, context):
    before = proctree.shm_entries()
    run = cli_run(["run", "--adapter", "gymnasium-async", "--opt", "shared_memory=true", "--opt",
                   f"context={context}", "--env", "CartPole-v1", "--num-envs", "3", *TINY])
    assert run.rc == 0
    [row] = run.rows
    assert row["status"] == "ok", row.get("error")
    assert proctree.shm_entries() - before == set()
    # gymnasium released its segments itself: the runner had nothing to remove
    assert "removed shm" not in (row.get("error") or "")


def test_shm_entries_sees_only_known_prefixes(tmp_path, monkeypatch):
    for name in ("psm_abc", "sem.mp-1", "torch_1", "unrelated", "wnsm_x", "envpool_1"):
        (tmp_path / name).write_bytes(b"")
    monkeypatch.setattr(proctree, "SHM_DIR", str(tmp_path))
    assert proctree.shm_entries() == {"psm_abc", "sem.mp-1", "torch_1", "wnsm_x", "envpool_1"}
    assert proctree.remove_shm(["psm_abc", "missing"]) == ["psm_abc"]
    assert not (tmp_path / "psm_abc").exists() and (tmp_path / "unrelated").exists()


def test_a_segment_another_process_holds_is_not_removed(tmp_path, monkeypatch):
    """A new entry that a live process still maps or has open is another run's, not a leak of the cell."""
    for name in ("psm_mapped", "psm_open", "psm_free"):
        (tmp_path / name).write_bytes(b"\0" * 4096)
    monkeypatch.setattr(proctree, "SHM_DIR", str(tmp_path))
    holder = subprocess.Popen([sys.executable, "-c", "import sys; f = open(sys.argv[1]); sys.stdin.read()",
                               str(tmp_path / "psm_open")], stdin=subprocess.PIPE)
    with open(tmp_path / "psm_mapped", "r+b") as f:
        mapped = mmap.mmap(f.fileno(), 4096)
    try:
        deadline = time.time() + 10
        while "psm_open" not in proctree.shm_in_use() and time.time() < deadline:
            time.sleep(0.01)
        assert proctree.remove_shm(["psm_mapped", "psm_open", "psm_free"]) == ["psm_free"]
        assert (tmp_path / "psm_mapped").exists() and (tmp_path / "psm_open").exists()
    finally:
        mapped.close()
        holder.communicate(b"")
    assert proctree.remove_shm(["psm_mapped", "psm_open"]) == ["psm_mapped", "psm_open"]
