"""Bounded reuse for our replay stores: uniform sampling among the slots that have served fewer than
`max_reuse` samples since they were last written (the storage survey's PPO and IMPALA rows)."""
import numpy as np


class ReuseExhausted(RuntimeError):
    """The held items have fewer samples left than a batch needs: the learner outran the adds."""


class BoundedReuse:
    """The eligible slots as a pool with O(1) removal (swap with the last) and insertion; a slot leaves the
    pool on its max_reuse-th sample and comes back when it is written again. `credits`: the samples the
    held items can still serve."""

    def __init__(self, capacity: int, max_reuse: int, rng):
        self.max_reuse, self.rng = max_reuse, rng
        self.times = np.zeros(capacity, dtype=np.int64)     # samples served since last written
        self.pool = np.arange(capacity)                      # eligible slots in pool[:size]
        self.where = np.arange(capacity)                     # slot -> its position in pool, -1 when out
        self.size = capacity
        self.credits = capacity * max_reuse

    def indices(self, n: int) -> np.ndarray:
        """n slots, sorted, uniform among the eligible, none past its bound (a draw beyond a slot's room is
        drawn again among the rest). ReuseExhausted, changing nothing, when fewer than n samples are left."""
        if self.credits < n:
            raise ReuseExhausted(f"bounded reuse: the items held can serve {self.credits} more samples (max_reuse="
                                 f"{self.max_reuse} each), a batch needs {n}: the learner outran the adds")
        out, need = [], n
        while need:
            slots, counts = np.unique(self.pool[self.rng.integers(0, self.size, need)], return_counts=True)
            take = np.minimum(counts, self.max_reuse - self.times[slots])
            self.times[slots] += take
            out.append(np.repeat(slots, take))
            need -= int(take.sum())
            for slot in slots[self.times[slots] >= self.max_reuse]:
                self._remove(int(slot))
        self.credits -= n
        return np.sort(np.concatenate(out))

    def written(self, slots) -> None:
        """Slots written again: their count restarts and they are eligible."""
        slots = np.unique(np.asarray(slots, dtype=np.int64))
        self.credits += int(self.times[slots].sum())
        self.times[slots] = 0
        back = slots[self.where[slots] < 0]
        self.pool[self.size:self.size + len(back)] = back
        self.where[back] = np.arange(self.size, self.size + len(back))
        self.size += len(back)

    def restart(self, slot: int, served: int) -> None:
        """The slot holds another item than its count describes, which has served `served` samples."""
        self.credits += int(self.times[slot]) - served
        self.times[slot] = served
        if served >= self.max_reuse and self.where[slot] >= 0:
            self._remove(slot)
        elif served < self.max_reuse and self.where[slot] < 0:
            self.pool[self.size], self.where[slot] = slot, self.size
            self.size += 1

    def _remove(self, slot: int) -> None:
        pos, last = self.where[slot], self.pool[self.size - 1]
        self.pool[pos], self.where[last] = last, pos
        self.where[slot] = -1
        self.size -= 1
