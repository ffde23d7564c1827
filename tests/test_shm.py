"""Shared memory: a gymnasium-async run with shared_memory=true leaves nothing in /dev/shm."""
import os

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
