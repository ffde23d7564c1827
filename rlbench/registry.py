"""Finds adapters: the modules in rlbench.adapters, then the `rlbench.adapters` entry-point group."""
import importlib
import pkgutil
import sys
from importlib.metadata import entry_points

from rlbench.errors import UsageError

ADAPTERS = {}
LOAD_ERRORS = {}
_discovered = False


def discover():
    global _discovered
    if _discovered:
        return ADAPTERS
    _discovered = True
    import rlbench.adapters as pkg
    for mod in pkgutil.iter_modules(pkg.__path__):
        _load(f"rlbench.adapters.{mod.name}", lambda n=mod.name: importlib.import_module(f"rlbench.adapters.{n}"))
    for ep in entry_points(group="rlbench.adapters"):
        _load(ep.value, ep.load)
    return ADAPTERS


def _load(label, load):
    from rlbench.api import Adapter, register
    try:
        obj = load()
    except Exception as exc:  # a broken plugin must not break the others
        LOAD_ERRORS[label] = f"{type(exc).__name__}: {exc}"
        print(f"rlbench: warning: cannot load adapter module {label}: {exc}", file=sys.stderr)
        return
    if isinstance(obj, type) and issubclass(obj, Adapter) and obj.name not in ADAPTERS:
        register(obj)


def get(name: str):
    adapters = discover()
    if name not in adapters:
        raise UsageError(f"unknown adapter '{name}' (valid: {', '.join(sorted(adapters))})")
    return adapters[name]
