"""Replay workloads (the storage survey's table) and the driver every replay backend shares.

A backend only provides a store: `add(item)`, `sample(batch_size) -> (batch, indices)` and, for prioritized
workloads, `update_priorities(indices, priorities)`. The driver owns all that must be the same for every backend:
the fill, items, rates, schedule, reading consumer, actor processes, latency and modes (docs/strategies/replay.md).
"""
import math
import multiprocessing as mp
import os
import time
from dataclasses import dataclass

import numpy as np

MODES = ("target", "max-sample", "max-add", "max-both")
SAMPLING = ("uniform", "prioritized", "reuse")
HEADER = 8          # each item starts with its id: actor << 40 | sequence number (tests read it back)
LAT_SLOTS = 1 << 16  # add latencies kept per actor (a ring; the window reads the ones it spans)
PRIORITY_ALPHA, PRIORITY_BETA = 0.6, 0.4
# target mode: a schedule is behind while an op waits longer than this past its scheduled start (one op's
# period when that is longer: one op owed is not behind)
LAG_TOLERANCE_S = 0.05


@dataclass(frozen=True)
class ReplayWorkload:
    """One row of the storage survey (docs/published.md); batch sizes are the algorithms' usual ones."""
    algorithm: str
    env: str
    capacity_items: int
    sampling: str           # uniform | prioritized | reuse (uniform, each item's samples bounded: reuse_bound)
    item_bytes: int
    add_per_s: float
    sample_per_s: float     # items per second, in batches of batch_size
    batch_size: int
    stated_mb_per_s: tuple  # the survey's own add and sample MB/s columns, as published (checked, not used)
    seq_len: int = 1        # env steps per item when the algorithm stores sequences (R2D2, IMPALA)

    @property
    def reuse_bound(self) -> int:
        """Samples an item may serve (bounded-reuse workloads; 0: unbounded): REUSE_SLACK times the average
        reuse the survey's rates imply, sample_per_s / add_per_s, so the rates stay feasible and the tail is
        capped (PPO 4, IMPALA 127)."""
        return math.ceil(REUSE_SLACK * self.sample_per_s / self.add_per_s) if self.sampling == "reuse" else 0


REUSE_SLACK = 2
REUSE_MODES = ("target", "max-both")  # where items arrive while the learner samples: the bound applies

WORKLOADS = {
    "DQN-Qbert": ReplayWorkload("DQN", "Atari Qbert", 400_000, "prioritized", 110_000, 400, 1650, 32, (44, 181)),
    "PPO-Qbert": ReplayWorkload("PPO (off-policy)", "Atari Qbert", 100_000, "reuse", 120_000, 50, 87, 64, (6, 10)),
    "R2D2-Qbert": ReplayWorkload("R2D2", "Atari Qbert", 10_000, "prioritized", 10_000_000, 3, 45, 64, (30, 450),
                                 seq_len=80),
    "IMPALA-Qbert": ReplayWorkload("IMPALA", "Atari Qbert", 100_000, "reuse", 3_000_000, 4, 253, 32, (12, 759),
                                   seq_len=20),
    "SAC-Hopper": ReplayWorkload("SAC", "MuJoCo Hopper", 1_000_000, "uniform", 3_000, 71, 138, 256, (0.213, 16)),
    "QMIX-3s5z": ReplayWorkload("QMIX", "SMAC 3s5z", 50_000, "uniform", 290_000, 19, 60, 32, (6, 17)),
    "MASAC-3s5z": ReplayWorkload("MASAC", "SMAC 3s5z", 1_000_000, "uniform", 29_000, 116, 63, 256, (3, 2)),
    "DQN-GoBigger": ReplayWorkload("DQN", "GoBigger", 100_000, "prioritized", 400_000, 30, 83, 32, (12, 33)),
}
# a stated MB/s agrees with items/s x item size when within this share (the survey rounds to whole MB/s)
STATED_TOLERANCE = 0.25


@dataclass(frozen=True)
class StatedCheck:
    """One of the survey's stated MB/s against its own items/s x item size."""
    workload: str
    side: str               # add | sample
    items_per_s: float
    item_bytes: int
    stated_mb_per_s: float
    implied_mb_per_s: float

    @property
    def consistent(self) -> bool:
        return abs(self.stated_mb_per_s - self.implied_mb_per_s) <= STATED_TOLERANCE * self.implied_mb_per_s + 0.5


def stated_checks() -> list:
    """Every survey row's stated add and sample MB/s, checked against items/s x item size (what rlbench
    measures and reports): the table's SAC sample column says 16 MB/s for 138 items/s of 3 KB (0.41 MB/s)."""
    return [StatedCheck(name, side, rate, w.item_bytes, stated, rate * w.item_bytes / 1e6)
            for name, w in WORKLOADS.items()
            for side, rate, stated in (("add", w.add_per_s, w.stated_mb_per_s[0]),
                                       ("sample", w.sample_per_s, w.stated_mb_per_s[1]))]
PREFIX = "replay/"
# Arguments every replay workload takes (env_kwargs), with their defaults
# (max_reuse: 0 = the workload's own bound, -1 = none, N = at most N samples per item)
KWARGS = {"mode": "max-sample", "max_mb": 1024.0, "item_bytes": 0, "batch_size": 0, "max_reuse": 0}
CHOICES = {"mode": MODES}


@dataclass(frozen=True)
class ReplaySpec:
    """A workload as one cell runs it: capacity scaled to the memory budget, mode, actors."""
    name: str
    item_bytes: int
    capacity: int
    full_capacity: int
    batch_size: int
    sampling: str
    seq_len: int
    add_per_s: float
    sample_per_s: float
    mode: str
    actors: int
    seed: int
    max_reuse: int = 0      # samples an item may serve in REUSE_MODES (0: unbounded)

    @property
    def prioritized(self) -> bool:
        return self.sampling == "prioritized"

    @property
    def bounded(self) -> bool:
        """Each item's samples are capped in this cell: a bound, in a mode where items arrive (in max-sample
        nothing arrives, so a bound would only stop the learner: it samples uniformly, unbounded)."""
        return self.max_reuse > 0 and self.mode in REUSE_MODES

    @property
    def scale(self) -> float:
        return self.capacity / self.full_capacity

    @property
    def adds_per_sample(self) -> float:
        """Items added per item sampled at the workload's rates (in-process max-both)."""
        return self.add_per_s / self.sample_per_s


def replay_spec(workload) -> ReplaySpec:
    name = workload.env_id[len(PREFIX):]
    w = WORKLOADS[name]
    kw = {**KWARGS, **workload.env_kwargs}
    item_bytes = int(kw["item_bytes"]) or w.item_bytes
    if item_bytes < 2 * HEADER:
        raise ValueError(f"item_bytes={item_bytes} is too small (at least {2 * HEADER})")
    batch = int(kw["batch_size"]) or w.batch_size
    capacity = min(w.capacity_items, int(kw["max_mb"] * 2**20 // item_bytes))
    if capacity < max(batch, 2 * workload.num_envs):
        raise ValueError(f"max_mb={kw['max_mb']:g} holds only {capacity} items of {item_bytes} bytes "
                         f"(need at least batch_size={batch})")
    asked = int(kw["max_reuse"])
    if asked > 0 and w.sampling == "prioritized":
        raise ValueError(f"max_reuse={asked}: replay/{name} samples by priority; a reuse bound is for uniform "
                         "sampling (a workload of sampling 'uniform' or 'reuse')")
    max_reuse = {0: w.reuse_bound, -1: 0}.get(asked, asked)
    return ReplaySpec(name, item_bytes, capacity, w.capacity_items, batch, w.sampling, w.seq_len, w.add_per_s,
                      w.sample_per_s, kw["mode"], workload.num_envs, workload.seed, max_reuse)


def no_reuse_bound(workload, library: str):
    """supports() of a store that cannot cap how often an item is sampled: the reason, in a cell whose
    workload bounds reuse; None elsewhere."""
    spec = replay_spec(workload)
    if not spec.bounded:
        return None
    return (f"{library} cannot cap how often an item is sampled: replay/{spec.name} bounds each item to "
            f"{spec.max_reuse} samples in mode {spec.mode} (env kwarg max_reuse=-1 runs it unbounded)")


def scratch_dir() -> str:
    """Where an on-disk store puts its files: the run's scratch folder on the run's disk (the runner
    removes it after each repeat), else the working directory."""
    return os.environ.get("RLBENCH_SCRATCH_DIR") or os.getcwd()


def in_process_only(workload):
    """supports() of a store the learner process writes itself: no actor processes to host."""
    if workload.num_envs != 1:
        return "in-process store: adds come from the learner process (num_envs must be 1)"
    return None


def make_items(spec: ReplaySpec, actor: int, k: int = 4) -> list:
    """A few distinct random payloads an actor cycles through; `stamp` writes each add's id."""
    rng = np.random.default_rng([spec.seed, actor])
    return [rng.integers(0, 256, spec.item_bytes, dtype=np.uint8) for _ in range(k)]


def stamp(item: np.ndarray, actor: int, seq: int) -> np.ndarray:
    item[:HEADER].view(np.int64)[0] = (actor << 40) | seq
    return item


def item_ids(batch) -> np.ndarray:
    """The ids stamped into sampled items (for tests: what a store returns is what actors wrote)."""
    return np.array([int(np.asarray(b)[:HEADER].view(np.int64)[0]) for b in batch])


class OnDevice:
    """A sampled batch already copied to an accelerator: the copy read every host byte, so the learner has
    nothing left to read here; the items' ids, read from the host gather, stay for the reuse count."""

    def __init__(self, host_batch):
        self.ids = batch_ids(host_batch)


def batch_ids(batch):
    """The ids of a sampled batch's items (int64 array; None for a batch that is not host memory), for the
    session's reuse count: one strided read of each item's header. A batch is one array [n, item_bytes], a
    sequence of item arrays (one per item), or a sequence of such [n, item_bytes] arrays, one per field of the
    same n items (SB3's and tianshou's observations and next observations): the first field's rows are the items."""
    if isinstance(batch, OnDevice):
        return batch.ids
    if isinstance(batch, (list, tuple)) and batch and isinstance(batch[0], np.ndarray) and batch[0].ndim == 2:
        batch = batch[0]
    try:
        if isinstance(batch, np.ndarray) and batch.ndim == 2:
            if batch.shape[1] % 8 == 0 and batch.flags.c_contiguous:
                return batch.view(np.int64)[:, 0].copy()
            return np.ascontiguousarray(batch[:, :HEADER]).view(np.int64).ravel()
        return np.array([np.asarray(b).reshape(-1)[:HEADER].view(np.int64)[0] for b in batch], dtype=np.int64)
    except (TypeError, ValueError, AttributeError):
        return None


def consume(batch) -> int:
    """The learner reads every sampled byte (a lazy or zero-copy store cannot skip the copy);
    `batch` is one array [n, item_bytes] or a sequence of item arrays (or OnDevice: read by its copy)."""
    if isinstance(batch, OnDevice):
        return 0
    total = 0
    for part in ([batch] if isinstance(batch, np.ndarray) else batch):
        a = np.ascontiguousarray(part).reshape(-1)
        n8 = a.size // 8 * 8
        total += int(np.bitwise_xor.reduce(a[:n8].view(np.uint64))) if n8 else 0
        total += int(a[n8:].sum())
    return total


def new_priorities(rng, n: int) -> np.ndarray:
    """What a learner writes back after an update: |TD error|-like, never zero."""
    return np.abs(rng.standard_normal(n)) + 1e-3


def sleep_until(t_ns: int) -> None:
    """Sleep, then spin the last half millisecond (sleep alone oversleeps by ~0.1 ms)."""
    while True:
        left = t_ns - time.perf_counter_ns()
        if left <= 0:
            return
        if left > 1_500_000:
            time.sleep((left - 500_000) / 1e9)


def percentiles_ms(lat_ns) -> dict:
    if len(lat_ns) == 0:
        return {}
    p50, p99, p999 = np.percentile(lat_ns, [50, 99, 99.9]) / 1e6
    return {"p50": float(p50), "p99": float(p99), "p999": float(p999), "max": float(np.max(lat_ns) / 1e6)}


# -- actor processes (multi-process stores) -------------------------------------------------------

RUN, STOP = 1, 2


class ActorShared:
    """What the learner and its actors share: control word, schedule start, per-actor add counts and
    (done_ns, latency_ns, start lag_ns) of recent adds, the latency and the lag from the add's scheduled
    start."""

    def __init__(self, ctx, actors: int):
        self.ctl = ctx.RawArray("q", 2)                 # phase, schedule start (perf_counter_ns)
        self.added = ctx.RawArray("q", actors)
        self.ready = ctx.RawArray("q", actors)          # 1 once an actor's writer is set up (count() returned)
        self.lat = ctx.RawArray("q", actors * LAT_SLOTS * 3)

    def arrays(self):
        return (np.frombuffer(self.ctl, np.int64), np.frombuffer(self.added, np.int64),
                np.frombuffer(self.lat, np.int64).reshape(-1, LAT_SLOTS, 3))


def actor_main(writer, spec: ReplaySpec, actor: int, shared: ActorShared) -> None:
    """Add items at the workload's rate (target) or flat out (max-add, max-both) until told to stop, or
    until the cell process is gone (its sentinel, which every start method passes; under forkserver
    getppid() is the server, not the cell)."""
    parent = mp.parent_process()
    ctl, added, lat = shared.arrays()
    items = make_items(spec, actor)
    period_ns = int(1e9 * spec.actors / spec.add_per_s)
    paced = spec.mode == "target"
    seq = writer.count(actor)
    shared.ready[actor] = 1
    while ctl[0] != RUN:
        if ctl[0] == STOP or not parent.is_alive():
            return
        time.sleep(0.001)
    start = int(ctl[1]) + actor * period_ns // spec.actors
    k = 0
    while ctl[0] == RUN:
        if paced:
            due = start + k * period_ns
            sleep_until(due)
        else:
            due = time.perf_counter_ns()
        began = time.perf_counter_ns()
        writer.add(stamp(items[seq % len(items)], actor, seq))
        done = time.perf_counter_ns()
        lat[actor, k % LAT_SLOTS] = (done, done - due, began - due)
        seq += 1
        k += 1
        added[actor] += 1
        if k % 1024 == 0 and not parent.is_alive():
            return


class ActorPool:
    def __init__(self, writer, spec: ReplaySpec, context: str = "fork"):
        ctx = mp.get_context(context)
        self.shared = ActorShared(ctx, spec.actors)
        self.ctl, self.added, self.lat = self.shared.arrays()
        self.procs = [ctx.Process(target=actor_main, args=(writer, spec, a, self.shared), daemon=True)
                      for a in range(spec.actors)]
        for p in self.procs:
            p.start()

    def go(self, timeout_s: float = 300.0) -> None:
        """Start the schedule once every actor's writer is set up: an actor that first has to import its
        framework or connect to a server (spawned processes) would otherwise start seconds late."""
        deadline = time.monotonic() + timeout_s
        ready = np.frombuffer(self.shared.ready, np.int64)
        while not ready.all():
            self.check()
            if time.monotonic() > deadline:
                raise RuntimeError(f"replay actors not ready after {timeout_s:g} s: {ready.tolist()}")
            time.sleep(0.001)
        self.ctl[1] = time.perf_counter_ns() + 20_000_000
        self.ctl[0] = RUN

    def check(self) -> None:
        for i, p in enumerate(self.procs):
            if p.exitcode is not None:
                raise RuntimeError(f"replay actor {i} (pid {p.pid}) died with exit code {p.exitcode}")

    def total_added(self) -> int:
        return int(self.added.sum())

    def latencies(self, t0: int, t1: int) -> np.ndarray:
        """[latency, start lag] of each add done within [t0, t1], both from its scheduled start (ns)."""
        flat = self.lat.reshape(-1, 3)
        keep = (flat[:, 0] >= t0) & (flat[:, 0] <= t1)
        return flat[keep, 1:]

    def close(self) -> None:
        self.ctl[0] = STOP
        for p in self.procs:
            p.join(timeout=2)
            if p.is_alive():
                p.kill()
                p.join()


# -- the session ----------------------------------------------------------------------------------

class ReplaySession:
    """The harness-facing session over one store: `step()` is one learner op, `metrics` the
    figures of both sides over exactly the timed window.

    Store protocol: add(item), sample(n) -> (batch, indices), update_priorities(indices, p) when
    prioritized, close(); optional add_many(items [k, item_bytes]) to fill faster, `writer()` (a
    picklable object with add(item) and count(actor)) for stores written by actor processes,
    `bound` (the machine limit it should be compared with), `page_cache` with `before_window()` and
    `after_window()` (set and record the page cache's state as the timed window opens and closes)."""

    def __init__(self, store, spec: ReplaySpec, context: str = "fork"):
        self.store, self.spec = store, spec
        self.rng = np.random.default_rng(spec.seed)
        self.multiprocess = hasattr(store, "writer")
        self.actors = None
        self.sample_lat, self.add_lat = [], []
        self.sample_lag, self.add_lag = [], []  # target mode: each op's start lag behind its schedule (ns)
        self.sampled = self.added_here = 0
        self.sampled_ids = []   # every sampled item's id since the first sample: how often each was reused
        self._adds_owed = 0.0
        self._batch = None
        self._items = make_items(spec, 0)
        self._seq = 0
        try:
            self._fill()
            self._sample(time.perf_counter_ns())  # first-touch of the sample path (batch buffers), untimed
            self.sample_lat.clear()
            if self.multiprocess and spec.mode != "max-sample":
                self.actors = ActorPool(store.writer(), spec, context)
                self.actors.go()
            self._start_schedule()
        except BaseException:
            self.close()
            raise
        self.info = {"item_bytes": spec.item_bytes, "capacity_items": spec.capacity,
                     "capacity_scale": round(spec.scale, 6), "bound": getattr(store, "bound", "memcpy_1core"),
                     "workers": spec.actors, "batch_size": spec.batch_size}
        if spec.bounded:
            self.info["max_reuse"] = spec.max_reuse
        if getattr(store, "bound_gbps", None):  # a limit only the session can measure (host-to-device)
            self.info["bound_gbps"] = store.bound_gbps
        self.metrics = _Window(self)

    def _fill(self) -> None:
        """Every slot written before timing: pages faulted in, sampling spans the whole capacity."""
        spec, store = self.spec, self.store
        if hasattr(store, "fill"):
            store.fill(lambda actor: make_items(spec, actor))
            return
        chunk = max(1, min(spec.capacity, (64 << 20) // spec.item_bytes))
        block = np.stack([self._items[i % len(self._items)] for i in range(chunk)])
        left = spec.capacity
        while left > 0:
            n = min(chunk, left)
            for i in range(n):
                stamp(block[i], 0, self._seq + i)
            if hasattr(store, "add_many"):
                store.add_many(block[:n])
            else:
                for i in range(n):
                    store.add(block[i])
            self._seq += n
            left -= n

    def _start_schedule(self) -> None:
        spec = self.spec
        now = time.perf_counter_ns()
        self._sample_period = int(1e9 * spec.batch_size / spec.sample_per_s)
        self._add_period = int(1e9 / spec.add_per_s)
        self._next_sample = now + self._sample_period
        self._next_add = now + self._add_period

    # one learner op per step ---------------------------------------------------------------------
    def step(self) -> int:
        if self.actors is not None:
            self.actors.check()
        mode = self.spec.mode
        if mode == "max-sample":
            return self._sample(time.perf_counter_ns())
        if mode == "max-add":
            if self.actors is None:
                self._add(time.perf_counter_ns())
                return 1
            before = self.actors.total_added()
            time.sleep(0.002)
            return self.actors.total_added() - before
        if mode == "max-both":
            if self.actors is None:
                self._adds_owed += self.spec.batch_size * self.spec.adds_per_sample
                while self._adds_owed >= 1:
                    self._add(time.perf_counter_ns())
                    self._adds_owed -= 1
            return self._sample(time.perf_counter_ns())
        # target: one unit is one scheduled sample; adds due before it run first (here, when no actor
        # process adds), each waiting for its own scheduled time
        while self.actors is None and self._next_add < self._next_sample:
            due, self._next_add = self._next_add, self._next_add + self._add_period
            sleep_until(due)
            self._add(due)
        due, self._next_sample = self._next_sample, self._next_sample + self._sample_period
        sleep_until(due)
        self.sample_lag.append(time.perf_counter_ns() - due)
        return self._sample(due)

    def _sample(self, due: int) -> int:
        batch, indices = self.store.sample(self.spec.batch_size)
        if isinstance(batch, list) and len(batch) == self.spec.batch_size and np.ndim(batch[0]) == 1:
            # one array per item (zero-copy views, e.g. Ray's): the learner needs one [B, item] batch,
            # so it copies them into its own, as the other stores' gathers do
            if self._batch is None:
                self._batch = np.ones((self.spec.batch_size, self.spec.item_bytes), dtype=np.uint8)
            batch = np.stack(batch, out=self._batch)
        consume(batch)
        ids = batch_ids(batch)
        if ids is not None:
            self.sampled_ids.append(ids)
        if self.spec.prioritized:
            self.store.update_priorities(indices, new_priorities(self.rng, len(indices)))
        self.sample_lat.append(time.perf_counter_ns() - due)
        self.sampled += self.spec.batch_size
        return self.spec.batch_size

    def _add(self, due: int) -> None:
        if self.spec.mode == "target":
            self.add_lag.append(time.perf_counter_ns() - due)
        item = stamp(self._items[self._seq % len(self._items)], 0, self._seq)
        self.store.add(item)
        self._seq += 1
        self.added_here += 1
        self.add_lat.append(time.perf_counter_ns() - due)

    def total_added(self) -> int:
        return self.added_here + (self.actors.total_added() if self.actors is not None else 0)

    def close(self) -> None:
        if self.actors is not None:
            self.actors.close()
            self.actors = None
        self.store.close()


class _Window:
    """Rates and latencies of both sides over the harness's timed window."""

    def __init__(self, session: ReplaySession):
        self.s = session

    def reset(self) -> None:
        s = self.s
        if hasattr(s.store, "before_window"):
            s.store.before_window()
        if getattr(s.store, "page_cache", None):
            s.info["page_cache"] = s.store.page_cache
        for kept in (s.sample_lat, s.add_lat, s.sample_lag, s.add_lag):
            kept.clear()
        self.sampled0, self.added0 = s.sampled, s.total_added()
        self.sample_due0 = s._next_sample
        self.add_due0 = s._next_add
        self.t0 = time.perf_counter_ns()

    def read(self, seconds: float) -> dict:
        s, spec = self.s, self.s.spec
        t1 = time.perf_counter_ns()
        if hasattr(s.store, "after_window"):
            s.store.after_window()
            s.info["page_cache"] = s.store.page_cache
        added = s.total_added() - self.added0
        sampled = s.sampled - self.sampled0
        add_lat, add_lag = np.array(s.add_lat, dtype=np.int64), np.array(s.add_lag, dtype=np.int64)
        if s.actors is not None:
            actors = s.actors.latencies(self.t0, t1)
            add_lat, add_lag = np.concatenate([add_lat, actors[:, 0]]), np.concatenate([add_lag, actors[:, 1]])
        mb = spec.item_bytes / 1e6
        out = {"add_items_per_s": added / seconds, "add_mb_per_s": added * mb / seconds,
               "sample_items_per_s": sampled / seconds, "sample_mb_per_s": sampled * mb / seconds}
        out.update({f"sample_latency_{k}_ms": v for k, v in percentiles_ms(s.sample_lat).items()})
        add_pct = percentiles_ms(add_lat)
        if add_pct:
            out.update(add_latency_p99_ms=add_pct["p99"], add_latency_max_ms=add_pct["max"])
        if spec.mode == "target":
            out.update(self._schedule(np.array(s.sample_lag, dtype=np.int64), add_lag, added, t1))
        out.update(reuse(s.sampled_ids))
        return out

    def _schedule(self, sample_lag, add_lag, added: int, t1: int) -> dict:
        """How far each schedule fell behind over the window: each op's start lag, plus what is still owed as
        the window closes (the next sample's wait; adds short of the schedule's count). Behind: a lag above
        the schedule's tolerance (lag_tolerance_s) at any point; keeps_up = 1 only when neither was."""
        s, spec = self.s, self.s.spec
        window_s = (t1 - self.t0) / 1e9
        sample_owed_s = max(0.0, (t1 - s._next_sample) / 1e9)
        adds_owed = window_s * spec.add_per_s - added - spec.actors  # an add per actor may be under way
        add_owed_s = max(0.0, adds_owed / spec.add_per_s) if s.actors is not None else max(
            0.0, (t1 - s._next_add) / 1e9)
        sample_max, sample_late, sample_ok = _behind(sample_lag, sample_owed_s,
                                                     lag_tolerance_s(spec.batch_size / spec.sample_per_s))
        add_period_s = (spec.actors if s.actors is not None else 1) / spec.add_per_s
        add_max, add_late, add_ok = _behind(add_lag, add_owed_s, lag_tolerance_s(add_period_s))
        ops = len(sample_lag) + len(add_lag)
        return {"sample_lag_max_ms": sample_max * 1e3, "add_lag_max_ms": add_max * 1e3,
                "late_ops_frac": (sample_late + add_late) / ops if ops else 0.0,
                "keeps_up": float(sample_ok and add_ok)}


def _behind(lag_ns, owed_s: float, tolerance_s: float) -> tuple:
    """One schedule over a window: (its largest lag in s, the ops later than the tolerance, whether it kept
    up), from each op's start lag (ns) and what was still owed as the window closed."""
    lag_s = np.asarray(lag_ns) / 1e9
    worst = max(owed_s, float(lag_s.max(initial=0.0)))
    return worst, int(np.count_nonzero(lag_s > tolerance_s)) + (owed_s > tolerance_s), worst <= tolerance_s


def reuse(sampled_ids) -> dict:
    """How often the items sampled were sampled, from the session's first sample to now: the mean over those
    items and the most any one served ({} before any sample, or when ids could not be read)."""
    ids = np.concatenate(sampled_ids) if sampled_ids else ()
    if not len(ids):
        return {}
    _, counts = np.unique(ids, return_counts=True)
    return {"reuse_mean": float(counts.mean()), "reuse_max": float(counts.max())}


def lag_tolerance_s(period_s: float) -> float:
    """How late an op may start before its schedule counts as behind: LAG_TOLERANCE_S, or one op's period
    when that is longer (one op owed is not behind)."""
    return max(LAG_TOLERANCE_S, period_s)
