"""torchrl's replay buffers as their users build them (`torchrl-tensor`, `torchrl-memmap`): a TensorDictReplayBuffer
over a LazyTensorStorage or a LazyMemmapStorage, with a RandomSampler or a PrioritizedSampler. When torchrl's C++
extension does not load with this torch, its sources are compiled once against it (about 75 s).
How it is built: docs/strategies/replay.md, "How the torchrl adapters are built".
"""
import ctypes
import fcntl
import hashlib
import mmap
import os
import shutil
import sys
import sysconfig
import tempfile

from rlbench.api import Adapter, Unsupported, register
from rlbench.families.replay.api import (
    PAGE_CACHE,
    PRIORITY_ALPHA,
    PRIORITY_BETA,
    ReplaySession,
    in_process_only,
    no_reuse_bound,
    pagecache,
    replay_spec,
    scratch_dir,
)

TREES = ("SumSegmentTreeFp32", "SumSegmentTreeFp64", "MinSegmentTreeFp32", "MinSegmentTreeFp64")


def _prioritized_sampler(capacity: int):
    """torchrl's PrioritizedSampler over its C++ segment trees (built for this torch when the wheel's do
    not load), or Unsupported when they cannot be had."""
    import torch
    import torchrl
    from torchrl.data import PrioritizedSampler
    try:
        ensure_segment_trees()
    except Exception as exc:
        raise Unsupported(f"torchrl {torchrl.__version__}'s PrioritizedSampler needs its C++ extension "
                          f"(torchrl._torchrl segment trees), which does not load with torch "
                          f"{torch.__version__} ({_load_error()}) and could not be built from torchrl's "
                          f"sources: {type(exc).__name__}: {str(exc)[-300:]}") from None
    return PrioritizedSampler(capacity, alpha=PRIORITY_ALPHA, beta=PRIORITY_BETA)


def ensure_segment_trees() -> None:
    """The segment trees PrioritizedSampler's module uses: the wheel's, else built by `segment_trees()`.
    `make install` calls it, so a fresh clone's first prioritized cell does not spend its timeout compiling
    (75 s on 2 idle cores, past a 120 s cell timeout beside other tests)."""
    from torchrl.data import PrioritizedSampler
    trees = PrioritizedSampler._init.__globals__  # its module's names (the class says it is the package's)
    if any(trees.get(name) is None for name in TREES):
        ext = segment_trees()
        trees.update({name: getattr(ext, name) for name in TREES})


def _load_error() -> str:
    """Why torchrl's own extension does not import (its ImportError, cut)."""
    try:
        import torchrl._torchrl  # noqa: F401
    except ImportError as err:
        return f"ImportError: {str(err)[:160]}"
    return "it imports, without the segment trees"


def segment_trees():
    """torchrl._torchrl compiled from the installed torchrl's own csrc against the running torch (once per
    torchrl, torch and Python version and environment; cached), imported and returned. Also registered as
    torchrl._torchrl. Serialised by a lock file, so concurrent cells wait for one build; a stale lock left by a
    killed build (torch's FileBaton) is removed while holding ours."""
    import importlib.metadata
    import importlib.util

    import torch
    from torch.utils import cpp_extension

    if "torchrl._torchrl" in sys.modules and hasattr(sys.modules["torchrl._torchrl"], TREES[0]):
        return sys.modules["torchrl._torchrl"]
    csrc = os.path.join(os.path.dirname(importlib.util.find_spec("torchrl").origin), "csrc")
    sources = sorted(os.path.join(csrc, f) for f in os.listdir(csrc) if f.endswith(".cpp"))
    if not sources:
        raise FileNotFoundError(f"no C++ sources in {csrc}")
    root = os.environ.get("TORCH_EXTENSIONS_DIR") or os.path.join(os.path.expanduser("~"), ".cache",
                                                                   "torch_extensions")
    # keyed by what the build compiles against too: two environments with the same versions (a fresh clone's
    # .venv beside this one) would otherwise take turns rebuilding each other's library (~40 s each time)
    against = "|".join((os.path.dirname(torch.__file__), sysconfig.get_paths()["include"], os.environ.get("CXX", "")))
    build = os.path.join(root, f"torchrl-{importlib.metadata.version('torchrl')}-torch-{torch.__version__}"
                               f"-py{sys.version_info.major}{sys.version_info.minor}-"
                               f"{hashlib.sha256(against.encode()).hexdigest()[:10]}")
    os.makedirs(build, exist_ok=True)
    with open(build + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            os.remove(os.path.join(build, "lock"))  # cpp_extension's own baton, only ever stale here
        except FileNotFoundError:
            pass
        # torchrl's setup.py: -O3 and a stripped link; the C++ standard is the one torch's build picks
        ext = cpp_extension.load("_torchrl", sources, extra_cflags=["-O3"], extra_ldflags=["-Wl,-s"],
                                 build_directory=build, verbose=False)
    sys.modules["torchrl._torchrl"] = ext
    return ext


class TorchRLStore:
    """One TensorDictReplayBuffer over `make_storage(capacity)`: a LazyTensorStorage or LazyMemmapStorage."""
    bound = "memcpy_1core"

    def __init__(self, spec, make_storage):
        import torch
        from tensordict import TensorDict
        from torchrl.data import RandomSampler, TensorDictReplayBuffer
        self.torch, self.TensorDict = torch, TensorDict
        self.spec, self.rb, self.storage = spec, None, None
        self._tracker = _ResourceTracker()
        try:
            self.storage = make_storage(spec.capacity)
            sampler = _prioritized_sampler(spec.capacity) if spec.prioritized else RandomSampler()
            self.rb = TensorDictReplayBuffer(storage=self.storage, sampler=sampler,
                                             generator=torch.Generator().manual_seed(spec.seed + 1))
        except BaseException:
            self.close()
            raise

    def add(self, item) -> None:
        self.rb.add(self.TensorDict({"obs": self.torch.from_numpy(item)}, batch_size=[]))

    def add_many(self, items) -> None:
        self.rb.extend(self.TensorDict({"obs": self.torch.from_numpy(items)}, batch_size=[len(items)]))

    def sample(self, n: int):
        td = self.rb.sample(n)
        return td["obs"].numpy(), td["index"]

    def update_priorities(self, indices, priorities) -> None:
        # float32, the sampler's tree dtype (a float64 tensor trips an assert in torchrl's C++ tree)
        self.rb.update_priority(indices, self.torch.as_tensor(priorities, dtype=self.torch.float32))

    def close(self) -> None:
        self.rb = self.storage = None
        self._tracker.stop_if_started()


class _ResourceTracker:
    """torchrl keeps its buffer's counters in multiprocessing Values, whose named semaphores start
    multiprocessing's resource tracker, a helper process that would outlive the session. If it was not
    running before, it is stopped on close, once the buffer's semaphores have been released."""

    def __init__(self):
        from multiprocessing import resource_tracker
        self.tracker = resource_tracker._resource_tracker
        self.was_running = self.tracker._fd is not None

    def stop_if_started(self) -> None:
        import gc
        if self.was_running:
            return
        gc.collect()  # the buffer's semaphores unregister while the tracker still runs
        try:
            self.tracker._stop()
        except Exception:  # private API: leaving it behind beats failing close()
            pass


class TorchRLMemmapStore(TorchRLStore):
    """A LazyMemmapStorage in its own folder under the run's scratch folder (torchrl writes obs.memmap,
    index.memmap and meta.json there), timed with a cold page cache (dropped: the pages are written
    back and unmapped from torchrl's own mapping, then evicted with posix_fadvise) or a warm one (read
    through once), as chosen; the share resident as the window opens and closes is recorded. close()
    removes the folder."""

    def __init__(self, spec, cache: str, folder: str):
        from torchrl.data import LazyMemmapStorage
        self.dir = tempfile.mkdtemp(prefix="torchrl-replay-", dir=folder)
        self.cache = cache
        self.page_cache = None
        self.bound = "disk_random_read_1m" if cache == "cold" else "memcpy_1core"
        try:
            super().__init__(spec, lambda capacity: LazyMemmapStorage(capacity, scratch_dir=self.dir))
        except BaseException:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise

    def files(self) -> list:
        """(path, address, bytes) of each memory-mapped leaf torchrl keeps (obs and its index)."""
        out = []
        for t in self.storage._storage.values(include_nested=True, leaves_only=True):
            out.append((t.filename, t.data_ptr(), t.numel() * t.element_size()))
        return out

    def before_window(self) -> None:
        """Set the page-cache state right before timing and record it."""
        libc = ctypes.CDLL(None, use_errno=True)
        for path, addr, size in self.files():
            start = addr - addr % mmap.PAGESIZE
            length = ctypes.c_size_t(size + addr - start)
            if libc.msync(ctypes.c_void_p(start), length, 4) != 0:  # MS_SYNC
                raise OSError(ctypes.get_errno(), f"msync {path}")
            if libc.madvise(ctypes.c_void_p(start), length, 4) != 0:  # MADV_DONTNEED: drop our page mappings
                raise OSError(ctypes.get_errno(), f"madvise {path}")
            pagecache.set_state(path, self.cache)
        self.page_cache = pagecache.describe(self._obs_file(), self.cache)

    def after_window(self) -> None:
        """Reads warm the cache as the window runs: how far is part of the record."""
        self.page_cache = pagecache.after(self.page_cache, self._obs_file())

    def _obs_file(self) -> str:
        return self.storage._storage["obs"].filename

    def close(self) -> None:
        if self.storage is not None:
            self.storage.cleanup()  # rmtree of its scratch_dir (our own folder)
        shutil.rmtree(self.dir, ignore_errors=True)
        super().close()


@register
class TorchRLTensorAdapter(Adapter):
    name = "torchrl-tensor"
    kind = "replay"
    description = "torchrl TensorDictReplayBuffer over LazyTensorStorage (RAM); Random or PrioritizedSampler"
    requires = ("torchrl", "tensordict")

    def supports(self, workload, options):
        return in_process_only(workload) or no_reuse_bound(workload, "torchrl's ReplayBuffer samplers")

    def open(self, workload, options):
        from torchrl.data import LazyTensorStorage
        spec = replay_spec(workload)
        return ReplaySession(TorchRLStore(spec, LazyTensorStorage), spec)


@register
class TorchRLMemmapAdapter(Adapter):
    name = "torchrl-memmap"
    kind = "replay"
    description = "torchrl TensorDictReplayBuffer over LazyMemmapStorage (the run's folder), cold or warm cache"
    requires = ("torchrl", "tensordict")
    options = (PAGE_CACHE,)

    def supports(self, workload, options):
        return in_process_only(workload) or no_reuse_bound(workload, "torchrl's ReplayBuffer samplers")

    def open(self, workload, options):
        spec = replay_spec(workload)
        return ReplaySession(TorchRLMemmapStore(spec, options["cache"], scratch_dir()), spec)
