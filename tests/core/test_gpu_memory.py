"""The GPU memory a cell held (rlbench.running.gpu_memory): summed over the frameworks the cell started on a GPU,
nothing asked of a framework the cell did not import or start (asking would start it), nothing on a CPU."""
import sys
from types import SimpleNamespace as NS

from rlbench.running import gpu_memory

MB = 2**20


def _device(platform, peak):
    return NS(platform=platform, memory_stats=lambda: {"peak_bytes_in_use": peak} if platform == "gpu" else None)


def test_the_peaks_of_jax_torch_and_warp_are_summed_over_their_gpus(monkeypatch):
    jax = NS(devices=lambda: [_device("gpu", 100 * MB), _device("gpu", 50 * MB), _device("cpu", 0)])
    monkeypatch.setitem(sys.modules, "jax", jax)
    monkeypatch.setitem(sys.modules, "jax._src.xla_bridge", NS(backends_are_initialized=lambda: True))
    torch = NS(cuda=NS(is_initialized=lambda: True, device_count=lambda: 2, max_memory_reserved=lambda i: (i + 1) * MB))
    monkeypatch.setitem(sys.modules, "torch", torch)
    warp = NS(get_cuda_devices=lambda: ["cuda:0", "cuda:1"], is_mempool_enabled=lambda d: d == "cuda:0",
              get_mempool_used_mem_high=lambda d: 7 * MB)
    monkeypatch.setitem(sys.modules, "warp", warp)
    monkeypatch.setitem(sys.modules, "warp._src.context", NS(runtime=object()))
    assert gpu_memory.peak_mb() == 150 + 3 + 7


def test_a_framework_imported_but_never_started_is_not_asked(monkeypatch):
    def started():
        raise AssertionError("asked a framework the cell never started")
    monkeypatch.setitem(sys.modules, "jax", NS(devices=started))
    monkeypatch.setitem(sys.modules, "jax._src.xla_bridge", NS(backends_are_initialized=lambda: False))
    monkeypatch.setitem(sys.modules, "torch", NS(cuda=NS(is_initialized=lambda: False, device_count=started)))
    monkeypatch.setitem(sys.modules, "warp", NS(get_cuda_devices=started))
    monkeypatch.setitem(sys.modules, "warp._src.context", NS(runtime=None))
    assert gpu_memory.peak_mb() is None
    for name in ("jax", "jax._src.xla_bridge", "torch", "warp", "warp._src.context"):
        monkeypatch.delitem(sys.modules, name)
    assert gpu_memory.peak_mb() is None


def test_a_cpu_cell_records_no_gpu_memory(tmp_path):
    from support import TINY, run_cli_subprocess
    run = run_cli_subprocess(["run", "--adapter", "serial", "--env", "CartPole-v1", "--num-envs", "2",
                              "--policy", "mlp:hidden=8", *TINY], out=tmp_path / "r")
    assert run.rc == 0, run.stderr
    [row] = run.rows
    assert "gpu_mem_peak_mb" in row and row["gpu_mem_peak_mb"] is None
