"""Which envs EnvPool and gymnax implement themselves: rlbench's own envs say so in EnvInfo.native, and a plain
registered gymnasium id is native where the framework's own registry has the same id (read here once per
process); the user's own env never is. Such a gymnasium id runs with that framework's own arguments, so it
takes no env_kwargs there.
"""
import ast
import functools
import importlib.util
import os
import subprocess
import sys

from rlbench.api import env_info


@functools.lru_cache(maxsize=None)
def _envpool_ids() -> frozenset:
    import envpool
    return frozenset(envpool.list_all_envs())


@functools.lru_cache(maxsize=None)
def _gymnax_ids() -> frozenset:
    """gymnax.registered_envs without importing gymnax here: its modules build JAX arrays as they import,
    which starts JAX's backend (its threads, and on a GPU its memory) in the planning process. So the ids
    are read from gymnax/registration.py (the list literal of its built-in ids), or else from gymnax
    imported in a child process."""
    spec = importlib.util.find_spec("gymnax")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("No module named 'gymnax'")
    try:
        with open(os.path.join(spec.submodule_search_locations[0], "registration.py")) as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        tree = ast.Module(body=[], type_ignores=[])
    lists = {}
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                try:
                    value = ast.literal_eval(node.value)
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                    continue
                if isinstance(target, ast.Name) and isinstance(value, (list, tuple)):
                    lists[target.id] = value
    for name in ("registered_envs", "_BUILTIN_ENV_IDS"):  # a literal in older gymnax; the built-ins in newer
        if name in lists and all(isinstance(v, str) for v in lists[name]):
            return frozenset(lists[name])
    out = subprocess.run([sys.executable, "-c", "import gymnax; print(*gymnax.registered_envs, sep=chr(10))"],
                         capture_output=True, text=True, timeout=120)
    if out.returncode:
        raise ImportError(f"gymnax failed to import: {out.stderr.strip().splitlines()[-1:]}")
    return frozenset(out.stdout.split())


def _registered(ids, workload, framework: str, who: str):
    """None when `ids()` (the framework's registry) has the workload's gymnasium id, else the reason."""
    try:
        native = workload.env_id in ids()
    except ImportError:
        return f"package not installed: {framework}"
    if not native:
        return f"{framework} has no native {workload.env_id}"
    if workload.env_kwargs:
        return (f"{who} runs {framework}'s own {workload.env_id}, which takes {framework}'s arguments, not "
                f"gymnasium's: no env_kwargs (got {', '.join(sorted(workload.env_kwargs))})")
    return None


def envpool_native(workload, who: str = "envpool"):
    """None when EnvPool implements the workload's env itself, else the reason (`envpool has no native X`)."""
    info = env_info(workload.env_id)
    if info.family == "gymnasium":
        return _registered(_envpool_ids, workload, "envpool", who)
    if "envpool" in info.native:
        return None
    return f"envpool has no native {workload.env_id}"


def gymnax_native(workload, who: str = "gymnax"):
    """For a plain gymnasium id: None when gymnax registers the same id, else the reason."""
    if env_info(workload.env_id).family != "gymnasium":
        return f"gymnax has no native {workload.env_id}"
    return _registered(_gymnax_ids, workload, "gymnax", who)
