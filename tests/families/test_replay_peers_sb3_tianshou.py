"""stable-baselines3's and tianshou's replay buffers as replay stores (`sb3-replay`, `tianshou-replay`):
every mode runs through the shared driver, what they return is what was written (obs and the next
obs both), tianshou's prioritized buffer follows the priorities the driver writes back, the cases
they cannot host say why, and close() lets the storage go."""
import gc
import weakref

import numpy as np
import pytest

from rlbench import registry
from rlbench.families.replay.driver import item_ids, replay_spec
from rlbench.planning.plan import TimingProtocol
from rlbench.running.timing import measure
from rlbench.workload import Workload

QUICK = TimingProtocol(warmup_s=0.05, warmup_units=1, duration_s=0.2, min_units=3)
LIBRARY = {"sb3-replay": "stable_baselines3", "tianshou-replay": "tianshou"}
# the option that changes how each stores the next observation, off its default
OTHER_LAYOUT = {"sb3-replay": {"optimize_memory_usage": False}, "tianshou-replay": {"ignore_obs_next": False}}


def workload(name="SAC-Hopper", mode="max-sample", actors=1, **kw):
    env_kwargs = {"mode": mode, "item_bytes": 64, "max_mb": 0.125, **kw}   # 2048 items of 64 bytes
    return Workload(f"replay/{name}", actors, env_kwargs=env_kwargs)


def adapter(name):
    pytest.importorskip(LIBRARY[name])
    return registry.get(name)


def open_session(name, wl, **options):
    cls = adapter(name)
    assert cls().supports(wl, cls.resolve_options(options)) is None
    return cls().open(wl, cls.resolve_options(options))


def held(store) -> int:
    """Transitions the library's buffer says it can sample from."""
    return store.buffer.size() if hasattr(store.buffer, "size") else len(store.buffer)


def check_sample(session, layout_default=True):
    """One sample straight from the store: obs and next obs, both [n, item_bytes] of items still held."""
    spec, n = session.spec, 16
    parts, indices = session.store.sample(n)
    assert len(parts) == 2
    for part in parts:
        assert isinstance(part, np.ndarray) and part.shape == (n, spec.item_bytes) and part.dtype == np.uint8
    obs, nxt = item_ids(parts[0]), item_ids(parts[1])
    written = spec.capacity + session.total_added()   # ids 0 .. written-1 went in; the store holds the newest
    assert ((obs >> 40) == 0).all() and ((nxt >> 40) == 0).all()
    assert ((obs >= written - spec.capacity) & (obs < written)).all()
    assert ((nxt >= written - spec.capacity) & (nxt < written)).all()
    if layout_default:   # next obs from the following slot: the next item written (itself for the newest)
        assert ((nxt == obs + 1) | ((nxt == obs) & (obs == written - 1))).all()
    else:                # next obs stored with each add: the driver's item itself
        assert (nxt == obs).all()
    return obs, indices


@pytest.mark.parametrize("name", ["sb3-replay", "tianshou-replay"])
@pytest.mark.parametrize("mode,wl_name,kw,default_layout", [
    ("max-sample", "SAC-Hopper", {}, True),
    ("max-sample", "PPO-Qbert", {}, True),                   # reuse: sampled uniformly
    ("max-both", "SAC-Hopper", {}, True),
    ("max-both", "SAC-Hopper", {}, False),                   # next obs stored in its own array
    ("target", "SAC-Hopper", {"batch_size": 4}, True),       # a batch due every 29 ms, an add every 14 ms
])
def test_peer_runs_each_mode_and_returns_items_written(name, mode, wl_name, kw, default_layout):
    wl = workload(wl_name, mode, **kw)
    spec = replay_spec(wl)
    session = open_session(name, wl, **({} if default_layout else OTHER_LAYOUT[name]))
    try:
        assert session.info["capacity_items"] == spec.capacity and session.info["item_bytes"] == 64
        assert session.info["bound"] == "memcpy_1core"
        assert held(session.store) == spec.capacity      # filled to capacity before timing
        r = measure(session.step, QUICK, session.metrics)
        assert r["sample_items_per_s"] > 0 and r["env_steps"] % spec.batch_size == 0
        assert r["sample_latency_p99_ms"] >= r["sample_latency_p50_ms"] > 0
        if mode == "max-sample":
            assert r["add_items_per_s"] == 0
        else:
            assert r["add_items_per_s"] > 0 and session.total_added() > 0
        if mode == "target":
            assert r["keeps_up"] == 1.0
        check_sample(session, default_layout)
    finally:
        session.close()


def test_tianshou_prioritized_follows_the_priorities_written_back():
    wl = workload("DQN-Qbert", "max-both")
    spec = replay_spec(wl)
    session = open_session("tianshou-replay", wl)
    try:
        buf = session.store.buffer
        assert type(buf).__name__ == "PrioritizedReplayBuffer"
        r = measure(session.step, QUICK, session.metrics)   # every sample writes priorities back
        assert r["sample_items_per_s"] > 0 and r["add_items_per_s"] > 0
        assert len(np.unique(buf.weight[np.arange(spec.capacity)])) > 1   # no longer all the initial one
        _, indices = check_sample(session)
        assert indices.shape == (16,)

        everything = np.arange(spec.capacity)
        session.store.update_priorities(everything, np.ones(spec.capacity))
        session.store.update_priorities(np.array([7]), np.array([1e4]))   # 1e4 ** 0.6 = 251x the others
        draws, hits, ids_at_7 = 0, 0, set()
        for _ in range(100):
            parts, idx = session.store.sample(spec.batch_size)
            draws += len(idx)
            hits += int((idx == 7).sum())
            ids_at_7 |= set(item_ids(parts[0][idx == 7]).tolist())
        uniform = draws / spec.capacity
        assert hits > 50 * uniform            # expected share 251 / (251 + 2047): ~11%, uniform 0.05%
        assert len(ids_at_7) == 1             # the same item every time: the one in slot 7
    finally:
        session.close()


@pytest.mark.parametrize("wl_name,ignore_obs_next", [("SAC-Hopper", True), ("SAC-Hopper", False),
                                                     ("DQN-Qbert", True)])   # DQN: prioritized
def test_tianshou_chunked_fill_stores_what_one_add_per_item_stores(wl_name, ignore_obs_next):
    """The fill's update(from_data(chunk)) leaves the buffer as tianshou's one-add-per-item path would: the
    same arrays (obs_next only where it is stored), pointers, priorities and samples for the same seed."""
    from rlbench.families.replay.driver import make_items, stamp
    adapter("tianshou-replay")
    from adapters.tianshou import TianshouReplayStore
    spec = replay_spec(workload(wl_name))
    items = np.stack([stamp(make_items(spec, 0)[i % 4].copy(), 0, i) for i in range(spec.capacity + 50)])
    per_item, chunked = (TianshouReplayStore(spec, ignore_obs_next) for _ in range(2))
    for item in items:
        per_item.add(item)
    for start in range(0, len(items), 700):        # a ring that wraps: the last chunk overwrites the oldest
        chunked.add_many(items[start:start + 700])
    a, b = per_item.buffer, chunked.buffer
    keys = set(a._meta.get_keys()) - {"info"}      # the per-item path also keeps an empty info Batch
    assert keys == set(b._meta.get_keys()) and ("obs_next" in keys) == (not ignore_obs_next)
    for key in keys:
        np.testing.assert_array_equal(a._meta[key], b._meta[key], err_msg=key)
    assert (len(a), a._insertion_idx, a.last_index.tolist()) == (len(b), b._insertion_idx, b.last_index.tolist())
    if spec.prioritized:
        np.testing.assert_array_equal(a.weight[np.arange(spec.capacity)], b.weight[np.arange(spec.capacity)])
    np.random.seed(0)   # tianshou draws prioritized indices from numpy's global generator
    (obs_a, next_a), idx_a = per_item.sample(32)
    np.random.seed(0)
    (obs_b, next_b), idx_b = chunked.sample(32)
    np.testing.assert_array_equal(idx_a, idx_b)
    np.testing.assert_array_equal(obs_a, obs_b)
    np.testing.assert_array_equal(next_a, next_b)


@pytest.mark.parametrize("wl_name", ["DQN-Qbert", "R2D2-Qbert", "DQN-GoBigger"])
def test_sb3_refuses_prioritized_workloads(wl_name):
    cls = adapter("sb3-replay")
    reason = cls().supports(workload(wl_name), cls.resolve_options({}))
    assert reason == "stable-baselines3 has no prioritized replay buffer"


@pytest.mark.parametrize("name", ["sb3-replay", "tianshou-replay"])
def test_peers_refuse_actor_processes(name):
    cls = adapter(name)
    assert "num_envs must be 1" in cls().supports(workload(actors=2), cls.resolve_options({}))


@pytest.mark.parametrize("name", ["sb3-replay", "tianshou-replay"])
def test_close_lets_the_storage_go(name):
    session = open_session(name, workload("QMIX-3s5z"))
    buf = session.store.buffer
    storage = weakref.ref(buf.observations if name == "sb3-replay" else buf.obs)
    del buf
    session.step()
    session.close()
    gc.collect()
    assert session.store.buffer is None and storage() is None
