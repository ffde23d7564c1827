"""`ray-object-store`: Ray's object store as a replay buffer: the learner (the cell process) holds a ring of
`capacity` ObjectRefs, adds with `ray.put` and samples with `ray.get` (zero-copy views it then reads in full).
The store is sized so that nothing spills, and the session fails rather than time a store that spilled.
How it is built: docs/strategies/replay.md.
"""
import numpy as np

from adapters._kit import ray_runtime
from adapters._kit.reuse import BoundedReuse
from rlbench.api import Adapter, register
from rlbench.families.replay.api import ReplaySession, replay_spec

OBJECT_OVERHEAD = 1024        # bytes per object beyond the item (Ray's header and alignment; ~250 seen)
MIN_STORE = 75 * 2**20        # ray_constants.OBJECT_STORE_MINIMUM_MEMORY_BYTES


def store_bytes(spec) -> int:
    return max(MIN_STORE, int(1.3 * spec.capacity * (spec.item_bytes + OBJECT_OVERHEAD)))


class RayObjectStore:
    bound = "memcpy_1core"

    def __init__(self, spec):
        import ray
        self.spec, self.ray, self.refs = spec, ray, None
        self.init_s, self._shutdown = ray_runtime.start(num_cpus=1, object_store_memory=store_bytes(spec))
        try:
            self.cluster = ray_runtime.cluster_info(ray)
            self.refs = [None] * spec.capacity
            self.next = 0
            self.rng = np.random.default_rng(spec.seed + 1)
            self.reuse = BoundedReuse(spec.capacity, spec.max_reuse, self.rng) if spec.bounded else None
        except BaseException:
            self.close()
            raise

    def add(self, item) -> None:
        self.refs[self.next] = self.ray.put(item)  # the ref it replaces was the object's last: freed
        if self.reuse is not None:
            self.reuse.written(self.next)
        self.next = (self.next + 1) % self.spec.capacity

    def sample(self, n: int):
        idx = self.rng.integers(0, self.spec.capacity, n) if self.reuse is None else self.reuse.indices(n)
        return self.ray.get([self.refs[i] for i in idx]), idx

    def before_window(self) -> None:
        """Fail rather than time a store that spilled objects to disk or fell back to filesystem mmap."""
        stats = _store_stats(self.ray)
        if stats is not None and (stats.spilled_objects_total or stats.object_store_bytes_fallback):
            raise RuntimeError(f"Ray's object store spilled {stats.spilled_objects_total} objects "
                               f"({stats.object_store_bytes_fallback} bytes in fallback mmap): "
                               f"{store_bytes(self.spec) / 2**20:.0f} MiB is too small for this ring")

    def close(self) -> None:
        self.refs = None
        if self._shutdown is not None:
            self._shutdown()
            self._shutdown = None


def _store_stats(ray):
    """The object store's statistics (Ray's `ray memory --stats-only`), None if Ray will not say."""
    try:
        from ray._private.internal_api import get_memory_info_reply, get_state_from_address
        state = get_state_from_address(ray.get_runtime_context().gcs_address)
        return get_memory_info_reply(state, timeout_seconds=10).store_stats
    except Exception:
        return None


@register
class RayObjectStoreAdapter(Adapter):
    name = "ray-object-store"
    kind = "replay"
    description = "Ray's object store as a replay buffer: a ring of ObjectRefs, ray.put adds, ray.get samples"
    requires = ("ray",)

    def supports(self, workload, options):
        if workload.num_envs != 1:
            return ("the learner holds every ref and adds with ray.put itself (num_envs must be 1): the "
                    "harness's actor processes are not Ray workers, and refs put by Ray actors would have "
                    "to reach the learner through another Ray actor, which would time that, not the store")
        try:
            prioritized = replay_spec(workload).prioritized
        except ValueError:
            return None  # open() reports what is wrong with the workload's arguments
        if prioritized:
            return "Ray's object store has no prioritized sampling"
        return None

    def open(self, workload, options):
        spec = replay_spec(workload)
        store = RayObjectStore(spec)
        session = ReplaySession(store, spec)
        session.info.update(runtime_init_s=store.init_s, cluster=store.cluster)
        return session
