"""The `reverb` replay adapter. In the main environment (no reverb, no TensorFlow): its module imports
without them, declares its environment, options and what it supports. In its own environment
(adapters/envs/reverb.txt; these tests skip elsewhere): every mode runs through the shared driver with
actor processes writing, sampled items are items the fill or the actors wrote, prioritized sampling
follows the priorities written back, and nothing outlives close()."""
import subprocess
import sys

import numpy as np
import pytest
from support import REPO

from rlbench import registry
from rlbench.api import Workload
from rlbench.families.replay.driver import HEADER, PRIORITY_ALPHA, item_ids, make_items
from rlbench.planning.plan import TimingProtocol
from rlbench.running.timing import measure

PROTOCOL = TimingProtocol(warmup_s=0.05, warmup_units=1, duration_s=0.3, min_units=3)
TINY = {"item_bytes": 256, "max_mb": 0.25}   # 1024 items of 256 bytes


def _workload(mode, name="SAC-Hopper", num_envs=1, **kw):
    return Workload(f"replay/{name}", num_envs, env_kwargs={"mode": mode, **TINY, **kw}, seed=3)


def _opts(**given):
    return registry.get("reverb").resolve_options(given)


# -- main environment: declared, importable without its framework ---------------------------------------

def test_module_imports_without_reverb_or_tensorflow():
    code = ("import sys; from rlbench import registry; cls = registry.get('reverb'); "
            "print(cls.kind, cls.environment, cls.requires, "
            "[m for m in ('reverb', 'tensorflow') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[0] == "replay reverb ('reverb',) []"


def test_declares_its_environment_file_fully_pinned():
    cls = registry.get("reverb")
    lines = [line.strip() for line in (REPO / "adapters" / "envs" / f"{cls.environment}.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert all("==" in line for line in lines), [line for line in lines if "==" not in line]
    pins = {line.split("==")[0].lower().replace("_", "-"): line.split("==")[1] for line in lines}
    assert {"numpy", "psutil", "gymnasium", "dm-reverb"} <= set(pins)
    assert pins["numpy"].startswith("1.26.") and pins["dm-reverb"] == "0.14.0"
    assert pins.get("tensorflow-cpu", pins.get("tensorflow", "")).startswith("2.15.")
    assert "torch" not in pins or pins["torch"] == "2.13.0"
    assert "rlbench" not in pins


def test_options_and_supports_say_why():
    cls = registry.get("reverb")
    opts = _opts()
    assert opts == {"rate_limiter": "min-size", "sampler": "dataset", "max_in_flight": 0}
    for mode in ("max-sample", "max-add", "max-both", "target"):
        for n in (1, 2):
            assert cls().supports(_workload(mode, num_envs=n), opts) is None
            assert cls().supports(_workload(mode, name="DQN-Qbert", num_envs=n), opts) is None
    limited = _opts(rate_limiter="sample-to-insert")
    assert "sample-to-insert" in cls().supports(_workload("max-sample"), limited)
    assert "sample-to-insert" in cls().supports(_workload("max-add"), limited)
    assert cls().supports(_workload("max-both"), limited) is None
    assert cls().supports(_workload("target"), limited) is None
    with pytest.raises(ValueError, match="option max_in_flight=-1 must be an integer >= 0"):
        _opts(max_in_flight=-1)
    with pytest.raises(ValueError):
        _opts(sampler="tf.data")


# -- its own environment ------------------------------------------------------------------------------------

def _open(workload, **options):
    pytest.importorskip("reverb")
    cls = registry.get("reverb")
    opts = _opts(**options)
    assert cls().available() is None and cls().supports(workload, opts) is None
    return cls().open(workload, opts)


def _check_written(session):
    """A fresh sample holds only items the fill (actor 0's first ids) or an actor process wrote."""
    spec, store = session.spec, session.store
    batch, _ = store.sample(spec.batch_size)
    ids = item_ids(batch)
    actor, seq = ids >> 40, ids & ((1 << 40) - 1)
    written = np.zeros(max(spec.actors, 1), dtype=np.int64)
    written[0] = store.filled
    if session.actors is not None:
        written[:spec.actors] += session.actors.added
    assert ((actor >= 0) & (actor < spec.actors)).all(), ids
    assert (seq < written[actor]).all(), (ids, written)
    for a, i, row in zip(actor, ids, batch):
        payloads = make_items(spec, int(a))
        np.testing.assert_array_equal(np.asarray(row)[HEADER:], payloads[int(i & 0xFFFFFFFFFF) % len(payloads)][HEADER:])


@pytest.mark.parametrize("sampler", ["dataset", "client"])
@pytest.mark.parametrize("mode,num_envs", [("max-sample", 1), ("max-add", 2), ("max-both", 1), ("target", 2)])
def test_modes_return_what_was_written(mode, num_envs, sampler, tmp_path, monkeypatch):
    monkeypatch.setenv("RLBENCH_SCRATCH_DIR", str(tmp_path))
    session = _open(_workload(mode, name="DQN-Qbert", num_envs=num_envs), sampler=sampler)
    try:
        result = measure(session.step, PROTOCOL, session.metrics)
        if mode in ("max-sample", "max-both"):
            assert result["sample_items_per_s"] > 0
        if mode in ("max-add", "max-both"):
            assert result["add_items_per_s"] > 0
        if mode == "target":
            assert "keeps_up" in result
        _check_written(session)
    finally:
        session.close()
    assert session.store.server is None
    assert list(tmp_path.iterdir()) == []   # its checkpoint folder went with it


def test_sample_to_insert_limits_the_ratio():
    session = _open(_workload("max-both"), rate_limiter="sample-to-insert")
    try:
        result = measure(session.step, PROTOCOL, session.metrics)
        spi = session.spec.sample_per_s / session.spec.add_per_s
        ratio = result["sample_items_per_s"] / result["add_items_per_s"]
        assert 0.5 * spi < ratio < 2 * spi, (ratio, spi)   # bounded by the limiter, whatever each side could do
        _check_written(session)
    finally:
        session.close()


def test_prioritized_samples_a_high_priority_item_far_more_often():
    session = _open(_workload("max-sample", name="DQN-Qbert", max_mb=0.0625), sampler="client")
    try:
        store, spec = session.store, session.spec
        measure(session.step, PROTOCOL, session.metrics)  # samples and writes priorities back (256 items)
        keys = set()
        while len(keys) < spec.capacity:   # every key in the table, all at priority 1
            keys.update(np.asarray(store.sample(spec.batch_size)[1]).tolist())
            store.update_priorities(list(keys), np.ones(len(keys)))
        hot = next(iter(keys))
        store.update_priorities([hot], [1e4])
        idx = np.concatenate([np.asarray(store.sample(spec.batch_size)[1]) for _ in range(50)])
        share = np.mean(idx == hot)
        weight = 1e4 ** PRIORITY_ALPHA
        expected = weight / (weight + spec.capacity - 1)
        assert 0.5 * expected < share < 1.5 * expected, (share, expected)
    finally:
        session.close()


def test_a_bounded_workload_serves_no_item_more_than_its_bound(tmp_path, monkeypatch):
    """Reverb removes an item on its max_times_sampled-th sample: PPO's items, bounded to 2 here, with actor
    processes adding while the learner samples."""
    monkeypatch.setenv("RLBENCH_SCRATCH_DIR", str(tmp_path))
    session = _open(_workload("max-both", name="PPO-Qbert", num_envs=1, max_reuse=2), sampler="client")
    try:
        result = measure(session.step, PROTOCOL, session.metrics)
    finally:
        session.close()
    assert session.info["max_reuse"] == 2 and result["reuse_max"] <= 2 and result["sample_items_per_s"] > 0
