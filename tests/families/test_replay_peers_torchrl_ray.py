"""The native replay peers (torchrl's TensorDictReplayBuffer in RAM and on disk, Ray's object store) run
every mode through the shared driver, return what was written, prioritize when asked, clean up their
files and processes, and say why when a combination is not theirs."""
import os

import numpy as np
import pytest
from support import live_children

from rlbench import registry
from rlbench.api import Workload
from rlbench.families.replay.driver import HEADER, PRIORITY_ALPHA, item_ids, make_items
from rlbench.planning.plan import TimingProtocol
from rlbench.running.timing import measure

PROTOCOL = TimingProtocol(warmup_s=0.05, warmup_units=1, duration_s=0.2, min_units=3)
MODES = ("max-sample", "max-both", "target")
TINY = {"item_bytes": 64, "max_mb": 0.1, "max_reuse": -1}   # 1638 items of 64 bytes; these stores have no bound


def _workload(mode, name="IMPALA-Qbert", num_envs=1, **kw):
    return Workload(f"replay/{name}", num_envs, env_kwargs={"mode": mode, **TINY, **kw}, seed=3)


def _open(adapter, workload, **options):
    cls = registry.get(adapter)
    opts = cls.resolve_options(options)
    assert cls().available() is None
    assert cls().supports(workload, opts) is None
    return cls().open(workload, opts)


def _run_and_check(session, mode):
    """Measure one mode, then check a fresh sample holds exactly what the learner wrote."""
    result = measure(session.step, PROTOCOL, session.metrics)
    if mode != "target":
        assert result["sample_items_per_s"] > 0
    if mode == "max-both":
        assert result["add_items_per_s"] > 0
    if mode == "target":
        assert "keeps_up" in result
    spec = session.spec
    batch, _ = session.store.sample(spec.batch_size)
    ids = item_ids(batch)
    written = session._seq  # ids 0.._seq-1 were written in order; the ring keeps the last `capacity`
    assert len(ids) == spec.batch_size
    assert ((ids >= written - spec.capacity) & (ids < written)).all(), (ids, written)
    payloads = make_items(spec, 0)
    for i, row in zip(ids, batch):
        np.testing.assert_array_equal(np.asarray(row)[HEADER:], payloads[i % len(payloads)][HEADER:])
    return result


@pytest.mark.parametrize("mode", MODES)
def test_torchrl_tensor_modes(mode):
    pytest.importorskip("torchrl")
    session = _open("torchrl-tensor", _workload(mode))
    try:
        _run_and_check(session, mode)
    finally:
        session.close()


@pytest.mark.parametrize("cache", ["cold", "warm"])
@pytest.mark.parametrize("mode", MODES)
def test_torchrl_memmap_modes_and_no_files_left(mode, cache, tmp_path, monkeypatch):
    pytest.importorskip("torchrl")
    monkeypatch.setenv("RLBENCH_SCRATCH_DIR", str(tmp_path))
    session = _open("torchrl-memmap", _workload(mode), cache=cache)
    try:
        (folder,) = os.listdir(tmp_path)
        assert folder.startswith("torchrl-replay-") and "obs.memmap" in os.listdir(tmp_path / folder)
        _run_and_check(session, mode)
        page_cache = session.info["page_cache"]  # as the window opened and closed
        assert page_cache.startswith(f"{cache} (") and page_cache.endswith("at the end)"), page_cache
        assert session.info["bound"] == ("disk_random_read_1m" if cache == "cold" else "memcpy_1core")
    finally:
        session.close()
    assert os.listdir(tmp_path) == []


def test_torchrl_memmap_cold_cache_is_cold(tmp_path, monkeypatch):
    pytest.importorskip("torchrl")
    monkeypatch.setenv("RLBENCH_SCRATCH_DIR", str(tmp_path))
    session = _open("torchrl-memmap", _workload("max-sample", max_mb=8.0, item_bytes=4096), cache="cold")
    try:
        session.store.before_window()
        resident = float(session.store.page_cache.split("(")[1].split("%")[0])
        assert resident < 10.0, session.store.page_cache
    finally:
        session.close()
    assert os.listdir(tmp_path) == []


@pytest.mark.slow  # the first run on a machine builds torchrl's C++ segment trees for this torch (~75 s, cached)
def test_torchrl_prioritized_samples_a_high_priority_index_far_more_often():
    pytest.importorskip("torchrl")
    import torch
    session = _open("torchrl-tensor", _workload("max-sample", name="DQN-Qbert"))
    try:
        assert type(session.store.rb.sampler).__name__ == "PrioritizedSampler"
        store, spec = session.store, session.spec
        measure(session.step, PROTOCOL, session.metrics)  # samples and writes priorities back
        store.update_priorities(torch.arange(spec.capacity), np.ones(spec.capacity))
        hot = 7
        store.update_priorities(torch.tensor([hot]), np.array([1e4]))
        idx = np.concatenate([np.asarray(store.sample(spec.batch_size)[1]) for _ in range(50)])
        share = np.mean(idx == hot)
        weight = 1e4 ** PRIORITY_ALPHA  # the sampler draws in proportion to priority ** alpha
        expected = weight / (weight + spec.capacity - 1)   # ~0.13 here; uniform would give 1 / capacity
        assert 0.5 * expected < share < 1.5 * expected, (share, expected)
    finally:
        session.close()


@pytest.mark.slow
@pytest.mark.threaded_runtime
def test_ray_object_store_modes_and_no_processes_left(monkeypatch):
    pytest.importorskip("ray")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    before = live_children()
    for mode in MODES:
        session = _open("ray-object-store", _workload(mode))
        try:
            assert session.info["runtime_init_s"] > 0
            assert live_children() - before, "Ray started no processes?"
            _run_and_check(session, mode)
            batch, _ = session.store.sample(4)
            assert isinstance(batch, list) and not batch[0].flags.writeable  # zero-copy views into plasma
        finally:
            session.close()
        assert live_children() - before == set(), "Ray left processes behind"


def test_unsupported_combinations_say_why():
    one = _workload("max-sample")
    two = _workload("max-sample", num_envs=2)
    prioritized = _workload("max-sample", name="DQN-Qbert")
    for name in ("torchrl-tensor", "torchrl-memmap"):
        cls = registry.get(name)
        assert cls().supports(one, cls.resolve_options({})) is None
        assert "num_envs must be 1" in cls().supports(two, cls.resolve_options({}))
    ray_cls = registry.get("ray-object-store")
    opts = ray_cls.resolve_options({})
    assert ray_cls().supports(one, opts) is None
    assert "num_envs must be 1" in ray_cls().supports(two, opts)
    assert ray_cls().supports(prioritized, opts) == "Ray's object store has no prioritized sampling"
