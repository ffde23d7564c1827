"""Our replay stores and the driver they share: sampling is right (uniform, sum tree), every byte is
read, what actors write is what the learner samples (also across fork), pages are faulted before
timing, the page cache is in the state asked for, the schedule tells keeping up from falling behind,
and nothing outlives a session."""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import psutil
import pytest
from support import shm_left_since, sweep, write_suite

from adapters.replay_stores import NumpyRing, SumTree
from rlbench import registry
from rlbench.errors import UsageError
from rlbench.families.replay.driver import ReplaySession, consume, item_ids, replay_spec, stamp
from rlbench.machine.pagecache import resident_fraction
from rlbench.planning.plan import TimingProtocol
from rlbench.running import proctree
from rlbench.running.timing import measure
from rlbench.workload import Workload

QUICK = TimingProtocol(warmup_s=0.05, warmup_units=1, duration_s=0.2, min_units=3)


def workload(name="SAC-Hopper", mode="max-sample", actors=1, **kw):
    env_kwargs = {"mode": mode, "item_bytes": 256, "max_mb": 1.0, **kw}
    return Workload(f"replay/{name}", actors, env_kwargs=env_kwargs)


def open_session(adapter, wl, **options):
    cls = registry.get(adapter)
    return cls().open(wl, cls.resolve_options(options))


def run(adapter, wl, protocol=QUICK, **options):
    session = open_session(adapter, wl, **options)
    try:
        result = measure(session.step, protocol, session.metrics)
    finally:
        session.close()
    return session, result


def test_sum_tree_samples_in_proportion_to_priority():
    tree = SumTree(5)
    tree.update([0, 1, 2, 3, 4], [1.0, 2.0, 3.0, 4.0, 0.0])
    rng = np.random.default_rng(0)
    counts = np.zeros(5)
    for _ in range(200):
        idx, weights = tree.sample(500, rng)
        counts += np.bincount(idx, minlength=5)
        assert weights.max() == 1.0 and (weights > 0).all()
    share = counts / counts.sum()
    assert np.allclose(share, [0.1, 0.2, 0.3, 0.4, 0.0], atol=0.01)


def test_sum_tree_partial_sums_stay_exact_under_repeated_and_single_updates():
    tree = SumTree(1000)
    rng = np.random.default_rng(1)
    leaves = np.zeros(1000)
    for _ in range(50):
        idx = rng.integers(0, 1000, 64)        # duplicates included: the last write wins, as in numpy
        p = rng.random(64)
        tree.update(idx, p)
        leaves[idx] = p
        one = int(rng.integers(0, 1000))
        tree.set_one(one, 0.5)
        leaves[one] = 0.5
    assert tree.total == pytest.approx(leaves.sum())
    internal = tree.tree[1:tree.size]
    children = tree.tree[2:2 * tree.size].reshape(-1, 2).sum(axis=1)
    assert np.allclose(internal, children)


def test_consume_reads_every_byte():
    batch = np.zeros((4, 1001), dtype=np.uint8)
    base = consume(batch)
    for pos in [(0, 0), (3, 1000), (2, 999), (1, 500)]:   # the tail past the last 8-byte word counts too
        b = batch.copy()
        b[pos] = 7
        assert consume(b) != base
    assert consume([batch[0], batch[1]]) == consume(batch[:2])


def test_capacity_is_scaled_to_the_memory_budget_and_recorded():
    spec = replay_spec(workload("DQN-Qbert", item_bytes=0, max_mb=64.0))
    assert spec.item_bytes == 110_000 and spec.capacity == 64 * 2**20 // 110_000
    assert spec.scale == pytest.approx(spec.capacity / 400_000)
    with pytest.raises(ValueError, match="max_mb=1 holds only 9 items of 110000 bytes"):
        replay_spec(workload("DQN-Qbert", item_bytes=0, max_mb=1.0))


@pytest.mark.parametrize("adapter,options", [("numpy-ring", {}), ("shm-ring", {}), ("memmap", {"cache": "warm"})])
@pytest.mark.parametrize("mode", ["max-sample", "max-add", "max-both", "target"])
def test_every_store_runs_every_mode(adapter, options, mode, tmp_path, monkeypatch):
    monkeypatch.setenv("RLBENCH_SCRATCH_DIR", str(tmp_path))
    wl = workload("DQN-Qbert", mode)           # prioritized: the sum tree is on the path
    session, r = run(adapter, wl, **options)
    spec = replay_spec(wl)
    assert session.info["capacity_items"] == spec.capacity and session.info["item_bytes"] == 256
    if mode == "max-add":
        assert r["add_items_per_s"] > 0 and r["sample_items_per_s"] == 0
    else:
        assert r["sample_items_per_s"] > 0 and r["env_steps"] % spec.batch_size == 0
        assert r["sample_latency_p99_ms"] >= r["sample_latency_p50_ms"] > 0
    if mode in ("max-both", "target"):
        assert r["add_items_per_s"] > 0
    if mode == "target":   # 1650 items/s in batches of 32 is easy for any of them at 256 bytes
        assert r["keeps_up"] == 1.0
        assert r["sample_items_per_s"] == pytest.approx(1650, rel=0.5)
    assert os.listdir(tmp_path) == []   # the memmap file is gone


@pytest.mark.parametrize("adapter,options", [("numpy-ring", {}), ("memmap", {"cache": "warm"}),
                                             ("memmap", {"cache": "cold"})])
def test_sampled_items_are_items_written(adapter, options, tmp_path, monkeypatch):
    """memmap fills its file with pwrite, not through the mapping: the mapping reads what was written."""
    monkeypatch.setenv("RLBENCH_SCRATCH_DIR", str(tmp_path))
    wl = workload("SAC-Hopper", "max-sample")
    session = open_session(adapter, wl, **options)
    try:
        if hasattr(session.store, "before_window"):
            session.store.before_window()   # remapped over the file, the cache dropped (cold) or read (warm)
        everything = np.arange(session.spec.capacity)
        np.testing.assert_array_equal(item_ids(session.store.data[everything]), everything)
        batch, idx = session.store.sample(64)
        ids = item_ids(batch)
        assert ((ids >> 40) == 0).all() and (ids < session.spec.capacity + 2).all()
        assert (ids == idx).all()           # filled in order from slot 0: item k sits in slot k
        session.store.add_many(np.stack([stamp(batch[0].copy(), 0, 10**6 + k) for k in range(3)]))
        np.testing.assert_array_equal(item_ids(session.store.data[:3]), 10**6 + np.arange(3))  # wrapped to slot 0
        last = session.spec.capacity - 1
        session.store.next = last             # a chunk across the ring's end: the last slot, then slots 0, 1
        session.store.add_many(np.stack([stamp(batch[0].copy(), 0, 2 * 10**6 + k) for k in range(3)]))
        np.testing.assert_array_equal(item_ids(session.store.data[[last, 0, 1]]), 2 * 10**6 + np.arange(3))
        assert session.store.next == 2
    finally:
        session.close()


@pytest.mark.parametrize("context", ["fork", "forkserver", "spawn"])
def test_actor_processes_write_what_the_learner_samples(context):
    """Storage is shared memory: an actor's writes are the learner's reads, also under fork, where a
    private numpy array would be copied on write and silently never seen; and under forkserver, whose
    actors' parent is the server, not the cell."""
    wl = workload("SAC-Hopper", "max-both", actors=2)
    session = open_session("shm-ring", wl, context=context)
    try:
        per = session.store.capacity // 2
        deadline = time.time() + 60
        # each actor owns half the ring: wait on each one's own count (fill + a full lap), not on the
        # total, which a fast actor can reach alone while a starved one has not lapped its half yet
        while (session.store.count < 2 * per).any() and time.time() < deadline:
            session.step()
        assert (session.store.count >= 2 * per).all()   # every slot rewritten by its actor
        batch, _ = session.store.sample(256)
        ids = item_ids(batch)
        assert set(ids >> 40) == {0, 1}
        assert ((ids & ((1 << 40) - 1)) >= per).all()   # none left from the fill: actors overwrote them all
    finally:
        session.close()


def test_prioritized_shm_ring_takes_in_actor_writes_at_max_priority():
    wl = workload("DQN-Qbert", "max-both", actors=2)
    session = open_session("shm-ring", wl)
    try:
        store = session.store
        store.update_priorities(np.arange(store.capacity), np.full(store.capacity, 1e-6))
        low = store.sampling.tree.total
        before = store.count.copy()
        deadline = time.time() + 20
        while (store.count - before).min() < 4 and time.time() < deadline:
            time.sleep(0.01)
        store.sample(8)   # ingests what the actors wrote since
        assert store.sampling.tree.total > low + 1.0   # new slots carry the max priority (1.0), not 1e-6
    finally:
        session.close()


def test_killed_actor_is_reported_and_nothing_is_left(tmp_path):
    shm_before = proctree.shm_snapshot()
    session = open_session("shm-ring", workload("SAC-Hopper", "max-add", actors=2))
    pids = [p.pid for p in session.actors.procs]
    os.kill(pids[1], signal.SIGKILL)
    time.sleep(0.2)
    with pytest.raises(RuntimeError, match=r"replay actor 1 \(pid \d+\) died with exit code -9"):
        for _ in range(100):
            session.step()
    session.close()
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids)
    assert shm_left_since(shm_before) == {}


def test_buffers_are_faulted_in_before_timing():
    """In a fresh interpreter: in this one, pages earlier tests freed are already resident, and the store's
    buffers may be carved from them (glibc's mmap threshold grows with frees), so RSS would grow less."""
    code = """if True:
        import psutil
        from rlbench import registry
        from rlbench.families.replay import driver
        from rlbench.workload import Workload
        cls = registry.get("numpy-ring")
        options = cls.resolve_options({})
        wl = Workload("replay/QMIX-3s5z", 1, env_kwargs={"mode": "max-sample", "item_bytes": 4096, "max_mb": 64.0})
        me = psutil.Process()
        rss0 = me.memory_info().rss
        session = cls().open(wl, options)
        print(me.memory_info().rss - rss0, session.spec.capacity * session.spec.item_bytes)
        session.close()
    """
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    grown, size = map(int, out.stdout.split())
    assert grown >= 0.95 * size


def test_memmap_cold_cache_is_dropped_and_recorded(tmp_path, monkeypatch):
    monkeypatch.setenv("RLBENCH_SCRATCH_DIR", str(tmp_path))
    session = open_session("memmap", workload("QMIX-3s5z", item_bytes=64 << 10, max_mb=16.0), cache="cold")
    try:
        session.metrics.reset()   # the window opens: the cache is dropped now
        path = session.store.path
        assert session.info["page_cache"].startswith("cold (")
        assert resident_fraction(path) < 0.1       # ext4 here; on tmpfs the drop would show 100%
        assert session.info["bound"] == "disk_random_read_1m"
        session.step()
        session.metrics.read(0.1)
        assert session.info["page_cache"].endswith("at the end)")
    finally:
        session.close()
    assert not os.path.exists(path)


class SlowStore(NumpyRing):
    """Sampling takes longer than the schedule allows."""

    def sample(self, n):
        time.sleep(0.05)
        return super().sample(n)


def test_target_mode_reports_falling_behind():
    spec = replay_spec(workload("SAC-Hopper", "target", batch_size=2))   # a batch due every 14.5 ms
    session = ReplaySession(SlowStore(spec), spec)
    try:
        r = measure(session.step, TimingProtocol(warmup_s=0.05, warmup_units=1, duration_s=0.5, min_units=3),
                    session.metrics)
    finally:
        session.close()
    assert r["keeps_up"] == 0.0
    assert r["sample_latency_max_ms"] > 200   # counted from the schedule: the backlog shows


class StallsOnce(NumpyRing):
    """Keeps up, except for one sample a third into the window that takes 0.3 s; the store then catches up."""
    stall_after_s = None

    def sample(self, n):
        if self.stall_after_s is not None and time.perf_counter() > self.stall_after_s:
            self.stall_after_s = None
            time.sleep(0.3)
        return super().sample(n)


def test_a_store_that_falls_behind_and_catches_up_inside_the_window_did_not_keep_up():
    spec = replay_spec(workload("DQN-Qbert", "target"))   # a batch of 32 due every 19.4 ms, adds every 2.5 ms
    store = StallsOnce(spec)
    session = ReplaySession(store, spec)
    protocol = TimingProtocol(warmup_s=0.05, warmup_units=1, duration_s=1.2, min_units=3)
    reset = session.metrics.reset

    def armed():
        reset()
        store.stall_after_s = time.perf_counter() + 0.4
    session.metrics.reset = armed
    try:
        r = measure(session.step, protocol, session.metrics)
    finally:
        session.close()
    assert r["sample_items_per_s"] == pytest.approx(1650, rel=0.15)   # caught up: the rate is the schedule's
    assert r["keeps_up"] == 0.0 and r["sample_lag_max_ms"] >= 250 and r["add_lag_max_ms"] >= 250
    assert 0 < r["late_ops_frac"] < 1


def test_the_lag_tolerance_is_50_ms_or_one_period():
    from rlbench.families.replay.driver import lag_tolerance_s
    assert lag_tolerance_s(0.0194) == 0.05 and lag_tolerance_s(0.74) == 0.74


def test_a_limit_the_session_measured_itself_is_in_the_cells_info():
    """Batches that go to a GPU are held against the host-to-device rate the store's delivery measured."""
    spec = replay_spec(workload("SAC-Hopper", "max-sample"))
    store = NumpyRing(spec)
    store.bound, store.bound_gbps = "h2d_pinned", 24.0   # as _Delivery sets them on a CUDA machine
    session = ReplaySession(store, spec)
    try:
        assert (session.info["bound"], session.info["bound_gbps"]) == ("h2d_pinned", 24.0)
    finally:
        session.close()
    plain = ReplaySession(NumpyRing(spec), spec)
    try:
        assert plain.info["bound"] == "memcpy_1core" and "bound_gbps" not in plain.info
    finally:
        plain.close()


def test_in_process_stores_refuse_actor_processes():
    cls = registry.get("numpy-ring")
    assert "num_envs must be 1" in cls().supports(workload(actors=2), cls.resolve_options({}))


def test_device_cuda_without_a_gpu_is_unsupported():
    pytest.importorskip("torch")
    import torch
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    from rlbench.errors import Unsupported
    with pytest.raises(Unsupported, match="no CUDA device"):
        open_session("numpy-ring", workload(), device="cuda")


@pytest.mark.parametrize("body,words", [
    (sweep(["numpy-ring"], envs=["CartPole-v1"]), ["numpy-ring", "kind replay", "needs a replay workload"]),
    (sweep(["serial"], envs=["replay/SAC-Hopper"]), ["serial", "needs an env, not a replay workload"]),
    (sweep(["numpy-ring"], envs=["replay/Nope"]), ["unknown replay workload 'replay/Nope'", "replay/DQN-Qbert"]),
    (sweep(["numpy-ring"], envs=["replay/SAC-Hopper"]) + 'env_kwargs = { mode = "fast" }\n',
     ["mode='fast'", "valid: target, max-sample, max-add, max-both"]),
])
def test_bad_replay_suites_name_the_bad_value(tmp_path, body, words):
    from rlbench.planning.suite import load_suite
    with pytest.raises(UsageError) as exc:
        load_suite(str(write_suite(tmp_path, body)))
    for w in words:
        assert w in str(exc.value)


@pytest.mark.slow
def test_replay_suite_runs_end_to_end(cli_run, tmp_path):
    body = (sweep(["numpy-ring", "shm-ring"], envs=["replay/SAC-Hopper"])
            + 'env_kwargs = { mode = ["max-sample", "target"], item_bytes = 256, max_mb = 1.0 }\n'
            + "[limits]\nmemcpy_mb = 16\ndisk_mb = 16\nrepeats = 1\n")
    r = cli_run(["run", write_suite(tmp_path, body)])
    assert r.rc == 0, r.stderr
    assert len(r.rows) == 4 and all(row["status"] == "ok" for row in r.rows)
    assert r.env["limits"]["memcpy_1core_gbps"]["median"] > 0
    import csv
    summary = list(csv.DictReader(open(r.out / "summary.csv")))
    assert all(s["bound"] == "memcpy_1core" for s in summary)
    assert all(float(s["limit_frac"]) > 0 for s in summary if "max-sample" in s["cell_id"])
    assert not (r.out / "scratch").exists()


def test_a_buffer_too_small_for_one_batch_is_a_suite_error(tmp_path):
    from rlbench.planning.suite import load_suite
    body = sweep(["numpy-ring"], envs=["replay/IMPALA-Qbert"]) + 'env_kwargs = { max_mb = 64 }\n'
    with pytest.raises(UsageError, match=r"replay/IMPALA-Qbert: max_mb=64 holds only 22 items of 3000000 bytes"):
        load_suite(str(write_suite(tmp_path, body)))


def test_shipped_replay_suites_load():
    from support import REPO

    from rlbench.planning.suite import load_suite
    full = load_suite(str(REPO / "suites" / "replay.toml"))
    assert {c.workload.env_id for c in full.cells} == {f"replay/{w}" for w in
                                                         ("DQN-Qbert", "PPO-Qbert", "R2D2-Qbert", "IMPALA-Qbert",
                                                          "SAC-Hopper", "QMIX-3s5z", "MASAC-3s5z", "DQN-GoBigger")}
    modes = {c.workload.env_kwargs["mode"] for c in full.cells}
    assert modes == {"target", "max-sample", "max-add", "max-both"}
    assert full.limits["disk_mb"] == 2048


@pytest.mark.slow
def test_replay_quick_suite_runs_every_store_and_reports(tmp_path):
    """The CI-sized replay suite: every row ok or unsupported with its reason (what no store can host left
    the plan), limits measured, replay.csv and the HTML section written."""
    import csv

    from support import REPO, run_cli
    r = run_cli(["run", str(REPO / "suites" / "replay-quick.toml")], out=tmp_path / "run")
    assert r.rc == 0
    statuses = {(row["adapter"], row["status"]) for row in r.rows}
    assert all(s in ("ok", "unsupported") for _, s in statuses), [row["error"] for row in r.rows
                                                                   if row["status"] not in ("ok", "unsupported")]
    ran = {a for a, s in statuses if s == "ok"}
    assert {"numpy-ring", "shm-ring", "memmap", "sb3-replay", "tianshou-replay", "torchrl-tensor",
            "torchrl-memmap", "ray-object-store"} <= ran
    dropped = {(d["cell_id"].split("/")[0], d["reason"]) for d in r.env["dropped"]}
    assert ("sb3-replay", "stable-baselines3 has no prioritized replay buffer") in dropped
    assert not {row["cell_id"] for row in r.rows} & {d["cell_id"] for d in r.env["dropped"]}
    rows = list(csv.DictReader(open(r.out / "replay.csv")))
    assert {row["mode"] for row in rows} == {"max-sample", "target", "max-add", "max-both"}
    assert all(row["keeps_up"] in ("1/1", "0/1") for row in rows if row["mode"] == "target" and row["n"] == "1")
    page = (r.out / "index.html").read_text()
    assert "Replay and storage" in page and "Sample bandwidth vs item size" in page
    assert r.env["limits"]["memcpy_1core_gbps"]["median"] > 0


def test_the_surveys_stated_mb_per_s_is_checked_against_its_items_and_sizes():
    """The survey's SAC row gives 138 items/s of 3 KB as 16 MB/s (it is 0.41 MB/s); every other column agrees."""
    from rlbench.families.replay.driver import stated_checks
    from rlbench.families.replay.report import _survey_rates
    wrong = [(c.workload, c.side) for c in stated_checks() if not c.consistent]
    assert wrong == [("SAC-Hopper", "sample")]
    sac = next(c for c in stated_checks() if c.workload == "SAC-Hopper" and c.side == "sample")
    assert sac.implied_mb_per_s == pytest.approx(0.414) and sac.stated_mb_per_s == 16
    assert "the survey's table says 16 MB/s" in _survey_rates("SAC-Hopper")
    assert "says" not in _survey_rates("DQN-Qbert")


def test_bounded_reuse_never_lets_a_slot_serve_more_than_its_bound_and_says_when_it_runs_dry():
    from adapters._kit.reuse import BoundedReuse
    rng = np.random.default_rng(0)
    pool = BoundedReuse(10, 3, rng)
    served = np.zeros(10, dtype=int)
    for k in range(200):
        idx = pool.indices(4)
        assert len(idx) == 4 and (np.diff(idx) >= 0).all()
        np.add.at(served, idx, 1)
        assert served.max() <= 3
        written = [k % 10, (k + 1) % 10]   # two slots written per batch of four: the pool never runs dry
        pool.written(written)
        served[written] = 0
    dry = BoundedReuse(4, 2, rng)
    dry.indices(6)
    with pytest.raises(RuntimeError, match="can serve 2 more samples"):
        dry.indices(3)                      # refused whole: nothing drawn
    assert len(dry.indices(2)) == 2 and dry.credits == 0 and dry.times.sum() == 8


def test_ppo_and_impala_bound_reuse_where_items_arrive():
    assert replay_spec(workload("PPO-Qbert", "target")).max_reuse == 4
    assert replay_spec(workload("IMPALA-Qbert", "max-both")).max_reuse == 127
    assert replay_spec(workload("PPO-Qbert", "target")).bounded
    assert not replay_spec(workload("PPO-Qbert", "max-sample")).bounded   # nothing arrives: not capped
    assert not replay_spec(workload("PPO-Qbert", "target", max_reuse=-1)).bounded
    assert not replay_spec(workload("SAC-Hopper", "target")).bounded
    with pytest.raises(ValueError, match="samples by priority"):
        replay_spec(workload("DQN-Qbert", "target", max_reuse=3))
    sb3 = registry.get("sb3-replay")
    assert "cannot cap how often" in sb3().supports(workload("PPO-Qbert", "target"), sb3.resolve_options({}))
    assert sb3().supports(workload("PPO-Qbert", "max-sample"), sb3.resolve_options({})) is None


REUSE_WINDOW = TimingProtocol(warmup_s=0.05, warmup_units=1, duration_s=0.6, min_units=3)


def test_measured_reuse_stays_within_the_bound_and_exceeds_it_without():
    """PPO's rates in one process, 100 items held: unbounded, some item serves more than 4 samples; bounded,
    none does."""
    runs = {}
    for max_reuse in (0, -1):
        wl = workload("PPO-Qbert", "max-both", max_mb=100 * 256 / 2**20, max_reuse=max_reuse)
        runs[max_reuse] = run("numpy-ring", wl, protocol=REUSE_WINDOW)
    bounded, free = runs[0][1], runs[-1][1]
    assert runs[0][0].info["max_reuse"] == 4 and "max_reuse" not in runs[-1][0].info
    assert 1 <= bounded["reuse_mean"] and bounded["reuse_max"] <= 4
    assert free["reuse_max"] > 4


def test_items_written_by_actor_processes_get_a_fresh_bound():
    wl = workload("PPO-Qbert", "max-both", max_mb=100 * 256 / 2**20, max_reuse=2)
    session, r = run("shm-ring", wl, protocol=REUSE_WINDOW)
    assert session.info["max_reuse"] == 2 and r["reuse_max"] <= 2 and r["sample_items_per_s"] > 0


def test_batches_sent_to_a_gpu_are_read_by_the_copy_and_still_count_their_reuse(monkeypatch):
    """device=cuda returns OnDevice: nothing left for the learner to read, the items' ids kept from the host
    gather (a GPU run of the device kit once failed every such cell on an empty reuse count). A CPU tensor
    stands in for the GPU's, so the same send() runs here."""
    torch = pytest.importorskip("torch")
    from adapters.replay_stores import _Delivery
    from rlbench.families.replay.driver import OnDevice, batch_ids
    wl = workload("DQN-Qbert", "max-sample", max_mb=64 * 256 / 2**20)
    spec = replay_spec(wl)
    delivery = _Delivery(spec)
    delivery.device, delivery.torch = "cuda", torch
    delivery.gpu = torch.zeros((spec.batch_size, spec.item_bytes), dtype=torch.uint8)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    host = np.random.default_rng(0).integers(0, 256, (2, spec.item_bytes), dtype=np.uint8)
    sent = delivery.send(host)
    assert isinstance(sent, OnDevice) and consume(sent) == 0
    assert list(batch_ids(sent)) == list(host.view(np.int64)[:, 0])
    assert (delivery.gpu[:2].numpy() == host).all()
    session = ReplaySession(NumpyRing(spec, delivery), spec)
    try:
        r = measure(session.step, REUSE_WINDOW, session.metrics)
    finally:
        session.close()
    assert r["sample_items_per_s"] > 0 and 1 <= r["reuse_mean"] <= r["reuse_max"]


def test_reuse_counts_every_item_of_a_batch_whatever_its_layout():
    """A store's batch is one [n, item_bytes] array, a list of one array per item (Ray's object store), or a
    list of [n, item_bytes] arrays, one per field of the same items (SB3's and tianshou's obs and next obs): each
    gives the n items' ids, so every store's reuse_mean and reuse_max count the same thing."""
    from rlbench.families.replay.driver import batch_ids
    items = np.random.default_rng(1).integers(0, 256, (5, 64), dtype=np.uint8)
    for k in range(5):
        stamp(items[k], 0, 10 + k)
    want = [10, 11, 12, 13, 14]
    assert list(batch_ids(items)) == want
    assert list(batch_ids([items[k] for k in range(5)])) == want
    assert list(batch_ids([items, np.roll(items, 1, axis=0)])) == want
