"""Prioritized replay that processes share: the sum tree (proportional sampling, O(log capacity), vectorised over
a batch) and `SharedReplay`, structured items in shared memory written by actor processes and sampled through
the learner's `ReplayIndex`, which alone owns the priorities (Ape-X's central replay; shm-ring's layout).
Slots, seqlocks and priority write-back: docs/strategies/replay.md, "How the shared prioritized replay is built".
"""
import numpy as np

from adapters._kit.procs import Transient
from rlbench.families.replay.api import PRIORITY_ALPHA, PRIORITY_BETA

PRIORITY_EPS = 1e-6  # added to |TD| so that no item's probability is exactly 0


class SumTree:
    """Priorities in a binary tree of partial sums: sampling and updates are O(log capacity), and
    both are vectorised over a batch (one numpy op per tree level)."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.size = 1 << max(1, (capacity - 1).bit_length())
        self.tree = np.zeros(2 * self.size)
        self.max_priority = 1.0

    @property
    def total(self) -> float:
        return float(self.tree[1])

    def update(self, indices, priorities) -> None:
        nodes = np.asarray(indices, dtype=np.int64) + self.size
        if not nodes.size:
            return
        self.tree[nodes] = priorities
        nodes = np.unique(nodes >> 1)
        while nodes[0] >= 1:
            self.tree[nodes] = self.tree[2 * nodes] + self.tree[2 * nodes + 1]
            if nodes[0] == 1:
                break
            nodes = np.unique(nodes >> 1)

    def set_one(self, index: int, priority: float) -> None:
        """One add: a Python walk up the tree beats numpy's per-call cost at batch size 1."""
        tree = self.tree
        i = index + self.size
        tree[i] = priority
        i >>= 1
        while i:
            tree[i] = tree[2 * i] + tree[2 * i + 1]
            i >>= 1

    def sample(self, n: int, rng, beta: float = PRIORITY_BETA) -> tuple:
        """Stratified: one draw in each of n equal slices of the total mass. Returns indices and
        importance weights (N * P(i))^-beta normalised by the batch's largest (N cancels out). A draw that
        rounding carried onto an empty leaf (a tree not yet full) is replaced by another draw of the batch."""
        total = self.total
        u = (np.arange(n) + rng.random(n)) * (total / n)
        nodes = np.ones(n, dtype=np.int64)
        while nodes[0] < self.size:
            left = self.tree[2 * nodes]
            right = u >= left
            u = np.where(right, u - left, u)
            nodes = 2 * nodes + right
        indices = np.minimum(nodes - self.size, self.capacity - 1)
        leaves = self.tree[indices + self.size]
        empty = leaves <= 0
        if empty.any() and not empty.all():
            indices[empty] = rng.choice(indices[~empty], int(empty.sum()))
            leaves = self.tree[indices + self.size]
        p = np.maximum(leaves, 1e-12) / total
        weights = (self.capacity * p) ** -beta
        return indices, weights / weights.max()


class SharedReplay(Transient):
    """`fields` (name -> (item shape, dtype)) of `capacity` items in shared memory, split evenly over
    `writers` actor processes, with per-slot sequence words and initial priorities and per-writer counts."""
    transient = ("_views",)

    def __init__(self, ctx, fields: dict, capacity: int, writers: int):
        self.writers = writers
        self.per = capacity // writers
        if self.per < 1:
            raise ValueError(f"replay capacity {capacity} is smaller than its {writers} writers")
        self.capacity = self.per * writers
        self.fields = {k: (tuple(shape), np.dtype(dtype).str) for k, (shape, dtype) in fields.items()}
        self.item_bytes = sum(int(np.prod(s)) * np.dtype(d).itemsize for s, d in self.fields.values())
        specs = {f"f/{k}": ((self.capacity, *shape), dtype) for k, (shape, dtype) in self.fields.items()}
        specs.update({"seq": ((self.capacity,), np.int64), "priority": ((self.capacity,), np.float64),
                      "count": ((writers,), np.int64), "sampled": ((1,), np.int64)})
        self._specs = {k: (tuple(s), np.dtype(d).str) for k, (s, d) in specs.items()}
        self._raw = {k: ctx.RawArray("b", max(1, int(np.prod(s)) * np.dtype(d).itemsize))
                     for k, (s, d) in self._specs.items()}
        self._views = None

    def views(self) -> dict:
        if self._views is None:
            self._views = {k: np.frombuffer(self._raw[k], dtype=d, count=int(np.prod(s))).reshape(s)
                           for k, (s, d) in self._specs.items()}
        return self._views

    def data(self) -> dict:
        v = self.views()
        return {k: v[f"f/{k}"] for k in self.fields}

    def stored(self) -> int:
        """Items held now (each writer's slice fills up to `per`)."""
        return int(np.minimum(self.views()["count"], self.per).sum())

    def room(self, k: int, samples_per_insert: float, slack: int) -> bool:
        """Reverb's sample-to-insert rate limiter, from the writers' side: may k more items go in while
        inserted - slack stays within sampled / samples_per_insert? (Always, when samples_per_insert is 0.)"""
        if samples_per_insert <= 0:
            return True
        v = self.views()
        return (int(v["count"].sum()) + k - slack) * samples_per_insert <= int(v["sampled"][0])

    def write(self, writer: int, items: dict, priorities) -> None:
        """An actor's batch (each field [k, ...], k <= per) into its next k slots, with their initial
        priorities (|TD| as the actor computed it)."""
        v = self.views()
        seq, count = v["seq"], v["count"]
        k = len(priorities)
        slots = writer * self.per + (int(count[writer]) + np.arange(k)) % self.per
        seq[slots] += 1                      # odd: being written
        for name in self.fields:
            v[f"f/{name}"][slots] = items[name]
        v["priority"][slots] = priorities
        seq[slots] += 1                      # even again: whole
        count[writer] += k


class ReplayIndex:
    """The learner's side of a SharedReplay: the sum tree over its slots, and per slot the learner update
    whose parameters computed the priority it holds (`priority_lag` of a sample is the learner's update
    count minus that)."""

    def __init__(self, replay: SharedReplay, seed: int, alpha: float = PRIORITY_ALPHA, beta: float = PRIORITY_BETA,
                 version_field: str = "version"):
        self.replay, self.alpha, self.beta = replay, alpha, beta
        self.v = replay.views()
        self.data = replay.data()
        self.tree = SumTree(replay.capacity)
        self.rng = np.random.default_rng(seed)
        self.seen = np.zeros(replay.writers, dtype=np.int64)
        self.priority_version = np.zeros(replay.capacity, dtype=np.int64)
        self.version_field = version_field
        self.added = 0          # items ingested so far (a lapped actor's overwritten items are not counted)
        self.torn_retries = 0

    def ingest(self) -> int:
        """Give every slot written since the last look its actor's initial priority; returns how many."""
        now = self.v["count"].copy()
        per, new = self.replay.per, 0
        for a in np.nonzero(now != self.seen)[0]:
            first = max(int(self.seen[a]), int(now[a]) - per)
            slots = a * per + np.arange(first, now[a]) % per
            self.tree.update(slots, (self.v["priority"][slots] + PRIORITY_EPS) ** self.alpha)
            self.priority_version[slots] = self.data[self.version_field][slots]
            new += len(slots)
        self.seen = now
        self.added += new
        return new

    def sample(self, n: int) -> tuple:
        """(indices, importance weights, the slots' sequence words as sampled)."""
        idx, weights = self.tree.sample(n, self.rng, self.beta)
        self.v["sampled"][0] += n
        return idx, weights, self.v["seq"][idx].copy()

    def gather(self, idx, before, out: dict) -> None:
        """Copy the items at idx into out (name -> array [len(idx), ...]); a slot rewritten mid-copy is read
        again until a clean copy (`before` is updated to the sequence words of what was read)."""
        seq = self.v["seq"]
        for name, arr in self.data.items():
            np.take(arr, idx, axis=0, out=out[name])
        torn = np.nonzero((before != seq[idx]) | ((before & 1) == 1))[0]
        while len(torn):
            self.torn_retries += len(torn)
            before[torn] = seq[idx[torn]]
            for name, arr in self.data.items():
                out[name][torn] = arr[idx[torn]]
            torn = torn[(before[torn] != seq[idx[torn]]) | ((before[torn] & 1) == 1)]

    def update(self, idx, before, priorities, version: int) -> int:
        """New priorities for the sampled slots still holding what was sampled; returns how many landed."""
        keep = self.v["seq"][idx] == before
        idx = idx[keep]
        if len(idx):
            self.tree.update(idx, (np.asarray(priorities, dtype=np.float64)[keep] + PRIORITY_EPS) ** self.alpha)
            self.priority_version[idx] = version
        return len(idx)
