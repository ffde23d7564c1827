"""The GPU memory a cell held, as its frameworks count it: the peak of what each allocator had taken on the GPU
devices, read once the cell has run (every counter below keeps its peak after the memory is freed). Asked only of
frameworks the cell imported and started on a GPU: nothing is imported or initialised here, so on a CPU it costs
a few dictionary lookups and says nothing.

- JAX: each GPU device's `memory_stats()["peak_bytes_in_use"]` (XLA's allocator; with preallocation on, JAX
  holds its whole pool from the start, which this does not count: the jax adapters leave it off by default);
- torch: `torch.cuda.max_memory_reserved(i)` (the caching allocator's peak, what nvidia-smi sees of it);
- Warp: `warp.get_mempool_used_mem_high(device)` (its stream-ordered memory pool's high-water mark).

The CUDA contexts' own few hundred MB are not in it, nor the memory of worker processes the cell started.
"""
import sys


def _jax_bytes() -> int:
    jax, bridge = sys.modules.get("jax"), sys.modules.get("jax._src.xla_bridge")
    if jax is None or bridge is None:
        return 0
    try:
        if not bridge.backends_are_initialized():   # imported, never started: asking would start it
            return 0
        devices = [d for d in jax.devices() if d.platform == "gpu"]
    except Exception:  # noqa: BLE001 - a JAX without these internals, or no GPU backend: nothing to count
        return 0
    return sum((d.memory_stats() or {}).get("peak_bytes_in_use", 0) for d in devices)


def _torch_bytes() -> int:
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    if cuda is None or not cuda.is_initialized():
        return 0
    return sum(cuda.max_memory_reserved(i) for i in range(cuda.device_count()))


def _warp_bytes() -> int:
    wp, context = sys.modules.get("warp"), sys.modules.get("warp._src.context")
    if wp is None or getattr(context, "runtime", None) is None:   # not imported, or never initialised
        return 0
    try:
        return sum(wp.get_mempool_used_mem_high(d) for d in wp.get_cuda_devices() if wp.is_mempool_enabled(d))
    except Exception:  # noqa: BLE001 - a Warp without a memory pool: nothing to count
        return 0


def peak_mb() -> float | None:
    """MB at the peak, summed over frameworks and devices; None when the cell held no GPU memory through them."""
    total = _jax_bytes() + _torch_bytes() + _warp_bytes()
    return round(total / 2**20, 1) if total else None
