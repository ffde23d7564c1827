"""The machine and software a run measured on (env.json): what makes two runs comparable."""
import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version

import psutil

import rlbench

PACKAGES = ("numpy", "psutil", "gymnasium", "envpool", "torch", "jax", "jaxlib", "jax-cuda12-plugin",
            "jax-cuda13-plugin", "gymnax", "flax", "optax", "stable-baselines3", "tianshou", "ray", "torchrl",
            "ale-py", "mujoco", "py-spy", "pandas", "scipy", "plotly")
ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "CUDA_VISIBLE_DEVICES",
            "XLA_FLAGS", "XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION", "JAX_PLATFORMS",
            "RAY_ADDRESS", "PYTHONHASHSEED", "VIRTUAL_ENV")


def fingerprint(suite_path: str = None) -> dict:
    vm = psutil.virtual_memory()
    return {
        "schema": rlbench.SCHEMA_VERSION,
        "rlbench_version": rlbench.__version__,
        "hostname": platform.node(),
        "cpu_model": _cpu_model(),
        "cpu_physical_cores": psutil.cpu_count(logical=False),
        "cpu_logical_cores": psutil.cpu_count(logical=True),
        "cpu_affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_freq_mhz": _cpu_freq(),
        "cpu_governor": _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        "ram_gb": round(vm.total / 2**30, 2),
        "gpus": gpus(),
        "os": platform.platform(),
        "kernel": platform.release(),
        "python": sys.version.split()[0],
        "python_executable": sys.executable,
        "packages": {p: _version(p) for p in PACKAGES},
        "git": _git(),
        "env_vars": {k: os.environ[k] for k in ENV_VARS if k in os.environ},
        "suite_path": suite_path,
        "suite_sha256": _sha256(suite_path) if suite_path else None,
        "started_at": now(),
    }


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _cpu_model() -> str:
    for line in (_read("/proc/cpuinfo") or "").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _cpu_freq():
    try:
        f = psutil.cpu_freq()
        return round(f.max or f.current) if f else None
    except (OSError, AttributeError, NotImplementedError):
        return None


def gpus() -> list:
    """The NVIDIA GPUs nvidia-smi lists (name, memory, driver, uuid, cuda); [] without one."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version,uuid",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    keys = ("name", "memory", "driver", "uuid")
    gpus = [dict(zip(keys, (f.strip() for f in line.split(",")))) for line in out.splitlines() if line.strip()]
    cuda = _cuda_version() if gpus else None
    return [{**g, "cuda": cuda} for g in gpus]


def _cuda_version():
    """The CUDA version the driver supports, as nvidia-smi's banner prints it (no query field has it)."""
    try:
        out = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"CUDA Version:\s*([0-9.]+)", out)
    return found.group(1) if found else None


def _version(package: str):
    try:
        return version(package)
    except PackageNotFoundError:
        return None


def _git() -> dict:
    root = rlbench.ROOT

    def git(*args):
        try:
            r = subprocess.run(["git", "-C", root, *args], capture_output=True, text=True, timeout=10)
            return r.stdout.strip() if r.returncode == 0 else None
        except (OSError, subprocess.SubprocessError):
            return None
    commit = git("rev-parse", "HEAD")
    if commit is None and os.environ.get("RLBENCH_GIT_COMMIT"):
        # a copy of the checkout without .git (the device kit's machine): the commit its kit was made at
        return {"commit": os.environ["RLBENCH_GIT_COMMIT"], "dirty": os.environ.get("RLBENCH_GIT_DIRTY") == "1",
                "from": "device kit"}
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def _read(path: str):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()
