"""Our replay stores (`numpy-ring`, `shm-ring`, `memmap`): an in-process NumPy ring, a shared-memory ring written
by actor processes and sampled by the learner, and an np.memmap store on disk; prioritized sampling with a sum
tree for all (adapters._kit.prioritized, which apex and r2d2 share). They are the reference the native peers are
compared with, through the same driver (rlbench.families.replay.driver): one store, one copy into the batch.
"""
import ctypes
import multiprocessing as mp
import os
import time
from dataclasses import replace

import numpy as np

from adapters._kit.prioritized import SumTree
from adapters._kit.procs import CONTEXT_OPTION, Transient
from adapters._kit.reuse import BoundedReuse, ReuseExhausted
from rlbench.api import Adapter, Option, Unsupported, register
from rlbench.families.replay.api import (
    PAGE_CACHE,
    PRIORITY_ALPHA,
    OnDevice,
    ReplaySession,
    in_process_only,
    pagecache,
    replay_spec,
    scratch_dir,
)


class _Sampling:
    """Uniform, uniform with bounded reuse, or prioritized index selection shared by our stores (priorities
    are p ** alpha)."""

    def __init__(self, spec, capacity: int = None):
        self.capacity = capacity or spec.capacity
        self.rng = np.random.default_rng(spec.seed + 1)
        self.tree = SumTree(self.capacity) if spec.prioritized else None
        self.reuse = BoundedReuse(self.capacity, spec.max_reuse, self.rng) if spec.bounded else None

    @property
    def tracks_writes(self) -> bool:
        """Whether it must hear of every slot written (priorities, reuse counts)."""
        return self.tree is not None or self.reuse is not None

    def indices(self, n: int) -> np.ndarray:
        if self.reuse is not None:
            return self.reuse.indices(n)
        if self.tree is None:
            return np.sort(self.rng.integers(0, self.capacity, n))
        return self.tree.sample(n, self.rng)[0]

    def added(self, slot: int) -> None:
        if self.tree is not None:
            self.tree.set_one(slot, self.tree.max_priority)
        if self.reuse is not None:
            self.reuse.written(slot)

    def added_many(self, slots) -> None:
        if self.tree is not None and len(slots):
            self.tree.update(slots, np.full(len(slots), self.tree.max_priority))
        if self.reuse is not None and len(slots):
            self.reuse.written(slots)

    def update_priorities(self, indices, priorities) -> None:
        p = np.asarray(priorities, dtype=np.float64) ** PRIORITY_ALPHA
        self.tree.max_priority = max(self.tree.max_priority, float(p.max()))
        self.tree.update(indices, p)


class _Delivery:
    """Where a sampled batch goes: a host batch reused across samples (a fresh 640 MB array per
    sample would time page faults, not the store), or the GPU, copied from a pinned staging buffer
    or from pageable memory and synchronised so the copy is inside the op."""

    H2D_PROBE_MB = 256   # past the host caches; a copy this size runs at the link's rate

    def __init__(self, spec, device: str = "cpu", pinned: bool = False):
        self.device, self.staging, self.host, self.item_bytes = device, None, None, spec.item_bytes
        self.bound = self.bound_gbps = None  # on the GPU: the host-to-device copy rate, measured here
        if device == "cpu":
            return
        import torch
        if not torch.cuda.is_available():
            raise Unsupported("no CUDA device: device=cuda, and torch sees none")
        self.torch = torch
        shape = (spec.batch_size, spec.item_bytes)
        if pinned:
            self.staging = torch.empty(shape, dtype=torch.uint8).pin_memory()
            self.staging_np = self.staging.numpy()
        self.gpu = torch.empty(shape, dtype=torch.uint8, device=device)
        self.bound = "h2d_pinned" if pinned else "h2d_pageable"
        self.bound_gbps = self._h2d_gbps(pinned)

    def _h2d_gbps(self, pinned: bool, repeats: int = 5) -> float:
        """This machine's host-to-device copy rate from pinned or pageable memory (as the batches go),
        median of synchronised copies of H2D_PROBE_MB, in GB/s."""
        torch = self.torch
        n = self.H2D_PROBE_MB << 20
        src = torch.ones(n, dtype=torch.uint8)
        src = src.pin_memory() if pinned else src
        dst = torch.empty(n, dtype=torch.uint8, device=self.device)
        times = []
        for _ in range(repeats + 1):  # the first copy maps the pages: not timed
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            dst.copy_(src, non_blocking=pinned)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        del src, dst
        return n / float(np.median(times[1:])) / 1e9

    def out(self, batch_size: int):
        """The array the store gathers the batch into: pinned staging, or the reused host batch."""
        if self.staging is not None:
            return self.staging_np[:batch_size]
        if self.host is None or len(self.host) < batch_size:
            self.host = np.ones((batch_size, self.item_bytes), dtype=np.uint8)  # faulted in now, not per sample
        return self.host[:batch_size]

    def send(self, batch: np.ndarray):
        if self.device == "cpu":
            return batch
        src = self.staging[:len(batch)] if self.staging is not None else self.torch.from_numpy(batch)
        self.gpu[:len(batch)].copy_(src, non_blocking=self.staging is not None)
        self.torch.cuda.synchronize()
        return OnDevice(batch)   # the copy read every byte; the GPU-side batch is the learner's


class NumpyRing:
    """One preallocated [capacity, item_bytes] array; sampling gathers the batch in one fancy index."""
    bound = "memcpy_1core"

    def __init__(self, spec, delivery=None, data=None):
        self.spec = spec
        self.data = np.empty((spec.capacity, spec.item_bytes), dtype=np.uint8) if data is None else data
        self.sampling = _Sampling(spec)
        self.delivery = delivery or _Delivery(spec)
        self.bound = self.delivery.bound or self.bound
        self.bound_gbps = self.delivery.bound_gbps
        self.next = 0

    def add(self, item) -> None:
        slot = self.next
        self.data[slot] = item
        self.sampling.added(slot)
        self.next = (slot + 1) % self.spec.capacity

    def add_many(self, items) -> None:
        slots = (self.next + np.arange(len(items))) % self.spec.capacity
        self._write(slots, items)
        self.sampling.added_many(slots)
        self.next = int((slots[-1] + 1) % self.spec.capacity)

    def _write(self, slots, items) -> None:
        self.data[slots] = items

    def sample(self, n: int):
        idx = self.sampling.indices(n)
        batch = np.take(self.data, idx, axis=0, out=self.delivery.out(n), mode="clip")  # "raise" would buffer
        return self.delivery.send(batch), idx

    def update_priorities(self, indices, priorities) -> None:
        self.sampling.update_priorities(indices, priorities)

    def close(self) -> None:
        self.data = None


class ShmWriter(Transient):
    """What an actor process holds: the shared storage, per-slot sequence words (a seqlock: odd while
    a slot is being written) and per-actor write counts. Actor a owns slots [a*per, (a+1)*per)."""
    transient = ("_views",)

    def __init__(self, ctx, spec):
        self.per = spec.capacity // spec.actors
        self.item_bytes = spec.item_bytes
        self.raw = ctx.RawArray(ctypes.c_uint8, self.per * spec.actors * spec.item_bytes)
        self.raw_seq = ctx.RawArray(ctypes.c_int64, self.per * spec.actors)
        self.raw_count = ctx.RawArray(ctypes.c_int64, spec.actors)
        self._views = None

    def views(self):
        if self._views is None:
            self._views = (np.frombuffer(self.raw, np.uint8).reshape(-1, self.item_bytes),
                           np.frombuffer(self.raw_seq, np.int64), np.frombuffer(self.raw_count, np.int64))
        return self._views

    def count(self, actor: int) -> int:
        return int(self.views()[2][actor])

    def add(self, item, actor: int = None) -> None:
        data, seq, count = self.views()
        actor = int(item[:8].view(np.int64)[0] >> 40) if actor is None else actor
        slot = actor * self.per + int(count[actor]) % self.per
        seq[slot] += 1
        data[slot] = item
        seq[slot] += 1
        count[actor] += 1


class ShmRing:
    """Storage in shared memory (no copy-on-write: every process maps the same pages), written by
    actor processes, sampled by the learner, which also owns the priorities (as in Ape-X)."""

    def __init__(self, spec, context: str, delivery=None):
        self.spec = spec
        self.bound = "memcpy_allcore" if spec.actors > 1 else "memcpy_1core"  # several writers, several cores
        self._writer = ShmWriter(mp.get_context(context), spec)
        self.data, self.seq, self.count = self._writer.views()
        self.capacity = len(self.seq)
        self.sampling = _Sampling(spec, self.capacity)
        self.seen = np.zeros(spec.actors, dtype=np.int64)
        self.slot_id = np.full(self.capacity, -1, dtype=np.int64)  # bounded reuse: the item each count is of
        self.delivery = delivery or _Delivery(spec)
        self.bound = self.delivery.bound or self.bound
        self.bound_gbps = self.delivery.bound_gbps
        self.torn_retries = 0

    def writer(self):
        return self._writer

    def fill(self, items_for) -> None:
        for a in range(self.spec.actors):
            items = items_for(a)
            for k in range(self._writer.per):
                item = items[k % len(items)]
                item[:8].view(np.int64)[0] = (a << 40) | k
                self._writer.add(item, a)
        self._ingest()

    def _ingest(self) -> None:
        """Tell the sampling of the slots written since the last look (the current max priority, a fresh
        reuse count)."""
        if not self.sampling.tracks_writes:
            return
        now = self.count.copy()
        per = self._writer.per
        for a in np.nonzero(now != self.seen)[0]:
            first = max(int(self.seen[a]), int(now[a]) - per)
            slots = a * per + np.arange(first, now[a]) % per
            if self.sampling.reuse is not None:  # a count restarts only for another item than it counted
                ids = self.data[slots, :8].copy().view(np.int64).ravel()
                slots, ids = slots[ids != self.slot_id[slots]], ids[ids != self.slot_id[slots]]
                self.slot_id[slots] = ids
            self.sampling.added_many(slots)
        self.seen = now

    def sample(self, n: int):
        self._ingest()
        self._wait_for_items(n)
        idx = self.sampling.indices(n)
        before = self.seq[idx]
        batch = np.take(self.data, idx, axis=0, out=self.delivery.out(n), mode="clip")  # "raise" would buffer
        torn = np.nonzero((before != self.seq[idx]) | (before & 1))[0]
        while len(torn):  # a slot rewritten mid-copy: read it again until a clean copy
            self.torn_retries += len(torn)
            before = self.seq[idx[torn]]
            batch[torn] = self.data[idx[torn]]
            torn = torn[(before != self.seq[idx[torn]]) | (before & 1 == 1)]
        if self.sampling.reuse is not None:
            self._recount(idx, batch)
        return self.delivery.send(batch), idx

    def _recount(self, idx, batch) -> None:
        """A slot rewritten after the last look served its new item: that item's count starts with the
        samples it just served (not a fresh bound at the next look)."""
        ids = np.ascontiguousarray(batch[:, :8]).view(np.int64).ravel()
        moved = ids != self.slot_id[idx]
        for slot in np.unique(idx[moved]):
            self.slot_id[slot] = ids[idx == slot][-1]
            self.sampling.reuse.restart(int(slot), int(np.count_nonzero((idx == slot) & (ids == self.slot_id[slot]))))

    def _wait_for_items(self, n: int, timeout_s: float = 30.0) -> None:
        """Bounded reuse: the learner waits (inside the op: it is the bound's cost) until the actors have
        written enough items for a batch, as a rate-limited buffer blocks its sampler."""
        reuse = self.sampling.reuse
        if reuse is None or reuse.credits >= n:
            return
        deadline = time.monotonic() + timeout_s
        while reuse.credits < n:
            if time.monotonic() > deadline:
                raise ReuseExhausted(f"bounded reuse: no items written for {timeout_s:g} s while the learner waited")
            time.sleep(0.0001)
            self._ingest()

    def update_priorities(self, indices, priorities) -> None:
        self.sampling.update_priorities(indices, priorities)

    def close(self) -> None:
        self.data = self.seq = self.count = None


class MemmapStore(NumpyRing):
    """A NumPy ring in an np.memmap file in the run's scratch folder, read with a cold page cache
    (dropped with posix_fadvise after unmapping) or a warm one (read through once), as chosen."""

    def __init__(self, spec, cache: str, folder: str):
        self.path = os.path.join(folder, f"replay-{os.getpid()}.bin")
        self.cache = cache
        self.page_cache = None
        data = np.memmap(self.path, dtype=np.uint8, mode="w+", shape=(spec.capacity, spec.item_bytes))
        super().__init__(spec, data=data)
        self.bound = "disk_random_read_1m" if cache == "cold" else "memcpy_1core"

    def _write(self, slots, items) -> None:
        """The fill's consecutive slots go to the file with one pwrite per chunk (the mapping sees the same page
        cache), instead of faulting the mapping in page by page (1 GiB on ext4 here: 0.8 s instead of 3.6 s, flush
        included); a chunk across the ring's end, and adds while timing, go through the mapping."""
        if slots[-1] - slots[0] != len(slots) - 1:
            return super()._write(slots, items)
        view, offset = memoryview(np.ascontiguousarray(items)).cast("B"), int(slots[0]) * self.spec.item_bytes
        with open(self.path, "r+b") as f:
            while view:   # a write may stop short (Linux: at most ~2 GiB per call)
                done = os.pwrite(f.fileno(), view, offset)
                view, offset = view[done:], offset + done

    def before_window(self) -> None:
        """Set the page-cache state right before timing and record it."""
        shape = self.data.shape
        self.data.flush()
        del self.data
        pagecache.set_state(self.path, self.cache)
        self.data = np.memmap(self.path, dtype=np.uint8, mode="r+", shape=shape)
        self.page_cache = pagecache.describe(self.path, self.cache)

    def after_window(self) -> None:
        """Reads warm the cache as the window runs: how far is part of the record."""
        self.page_cache = pagecache.after(self.page_cache, self.path)

    def close(self) -> None:
        self.data = None
        if os.path.exists(self.path):
            os.remove(self.path)


DEVICE_OPTIONS = (
    Option("device", str, "cpu", "where sampled batches go: cpu, or cuda (host-to-GPU copy inside the op)",
           ("cpu", "cuda")),
    Option("pinned", bool, True, "device=cuda: gather into a pinned staging buffer (else pageable memory)"),
)


@register
class NumpyRingAdapter(Adapter):
    name = "numpy-ring"
    kind = "replay"
    description = "In-process NumPy ring buffer (uniform, or prioritized with a sum tree)"
    options = DEVICE_OPTIONS

    def supports(self, workload, options):
        return in_process_only(workload)

    def open(self, workload, options):
        spec = replay_spec(workload)
        delivery = _Delivery(spec, options["device"], options["pinned"])
        return ReplaySession(NumpyRing(spec, delivery), spec)


@register
class ShmRingAdapter(Adapter):
    name = "shm-ring"
    kind = "replay"
    description = "Shared-memory ring: num_envs actor processes write, the learner process samples"
    options = DEVICE_OPTIONS + (
        replace(CONTEXT_OPTION, help="how actor processes start (storage is shared memory either way)"),
    )

    def open(self, workload, options):
        spec = replay_spec(workload)
        delivery = _Delivery(spec, options["device"], options["pinned"])
        store = ShmRing(spec, options["context"], delivery)
        return ReplaySession(store, spec, options["context"])


@register
class MemmapAdapter(Adapter):
    name = "memmap"
    kind = "replay"
    description = "np.memmap store on disk (the run's folder), cold or warm page cache"
    options = (PAGE_CACHE,)

    def supports(self, workload, options):
        return in_process_only(workload)

    def open(self, workload, options):
        spec = replay_spec(workload)
        return ReplaySession(MemmapStore(spec, options["cache"], scratch_dir()), spec)
