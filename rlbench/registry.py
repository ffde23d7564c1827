"""Finds the plug-ins: adapters (the modules of the `adapters` package, then the `rlbench.adapters` entry-point
group), policies (built-ins by import path, as EnvPool registers its envs; framework ones register from
the adapter modules), families (built-ins by import path, then the `rlbench.families` entry-point group) and JAX
env APIs (the modules of the kit's `adapters._kit.jax_apis`, then the `rlbench.jax_env_apis` entry-point group).
Lazy: nothing is imported until a name is asked for."""
import functools
import importlib
import pkgutil
import sys
from importlib.metadata import entry_points

from rlbench.contract import Adapter, Family, JaxEnvApi
from rlbench.errors import UsageError, install_hint

ADAPTERS = {}
LOAD_ERRORS = {}
PACKAGES = ("adapters",)  # whose modules are adapters, imported by name (the core never imports them)
POLICIES = {"random": "rlbench.policy:random_policy", "fixed_cost": "rlbench.policy:fixed_cost_policy"}
# in the order their columns appear in results.csv and summary.csv; `order` places their report sections
FAMILIES = {"stepping": "rlbench.families.stepping:Stepping", "jax": "rlbench.families.jax:Jax",
            "replay": "rlbench.families.replay:Replay", "learners": "rlbench.families.learners:Learners",
            "validation": "rlbench.families.validation:Validation"}
# whose modules are JAX env APIs (one each), imported by name: the core names neither them nor the APIs
JAX_ENV_API_PACKAGES = ("adapters._kit.jax_apis",)
JAX_ENV_APIS = {}
_discovered = False


def register(cls):
    """Class decorator: make an Adapter subclass known by its `name`."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    ADAPTERS[cls.name] = cls
    return cls


def register_policy(name):
    """Decorator: `builder(spec, observation_space, action_space, seed) -> act(batch_of_obs)` as `name`."""
    def deco(builder):
        POLICIES[name] = builder
        return builder
    return deco


def discover():
    global _discovered
    if _discovered:
        return ADAPTERS
    _discovered = True
    for package in PACKAGES:
        for mod in pkgutil.iter_modules(_package(package).__path__):
            if not mod.name.startswith("_"):  # _kit: what adapters share, not an adapter
                name = f"{package}.{mod.name}"
                _load(name, lambda n=name: importlib.import_module(n))
    for ep in entry_points(group="rlbench.adapters"):
        _load(ep.value, ep.load)
    return ADAPTERS


def _package(name: str):
    """One of PACKAGES, refused when a folder of that name on sys.path (the current folder, say) hides it."""
    package = importlib.import_module(name)
    if not getattr(package, "RLBENCH_ADAPTERS", False):
        where = ", ".join(getattr(package, "__path__", [])) or getattr(package, "__file__", "?")
        raise UsageError(f"'{name}' imports from {where}, not rlbench's {name} package: a folder of that name "
                         "hides it; run rlbench from another folder or rename that one")
    return package


def _load(label, load):
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


def policy_names() -> list:
    discover()  # framework policies (mlp) register with the adapters
    return sorted(POLICIES)


def policy(name: str):
    """The builder registered as `name`, imported on first use when registered by path."""
    if name not in POLICIES:
        discover()
    if name not in POLICIES:
        raise UsageError(f"unknown policy '{name}' (valid: {', '.join(policy_names())})")
    builder = POLICIES[name]
    if isinstance(builder, str):
        builder = POLICIES[name] = _load_path(builder)
    return builder


def load_factory(path: str, what: str):
    """A user's `module:function`, imported: one line naming what failed when it cannot be."""
    import importlib
    module_name, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the user's module: whatever it raises is theirs to see, in one line
        raise UsageError(f"{what} '{path}': module {module_name} failed to import: "
                         f"{type(exc).__name__}: {exc}{install_hint(exc)}") from None
    target = getattr(module, attr, None)
    if not callable(target):
        raise UsageError(f"{what} '{path}': module {module_name} has no function '{attr}'")
    return target


def _load_path(path: str):
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


@functools.cache
def families() -> tuple:
    """Every family, one instance each, built-ins first."""
    found = [_load_path(path)() for path in FAMILIES.values()]
    for ep in entry_points(group="rlbench.families"):
        cls = ep.load()
        if isinstance(cls, type) and issubclass(cls, Family) and cls.name not in {f.name for f in found}:
            found.append(cls())
    return tuple(found)


def family_of_kind(kind: str):
    """The family owning adapters of this kind, or None."""
    return next((f for f in families() if kind in f.kinds), None)


def family_of_workload(env_id: str):
    """The family whose own workloads this env id names (replay/...), or None for an environment."""
    return next((f for f in families() if f.workload_prefix and env_id.startswith(f.workload_prefix)), None)


def register_jax_env_api(cls):
    """Class decorator: make a JaxEnvApi subclass known by its `name` (the first of a name stays)."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    JAX_ENV_APIS.setdefault(cls.name, cls)
    return cls


@functools.cache
def jax_env_apis() -> tuple:
    """Every JAX env API, one instance each, in listing order (`order`, then name): the kit's built-ins, then
    those installed packages declare in the `rlbench.jax_env_apis` entry-point group (naming the class). One that
    fails to load is left out, with a warning."""
    for package in JAX_ENV_API_PACKAGES:
        _package(package.partition(".")[0])
        for mod in pkgutil.iter_modules(importlib.import_module(package).__path__):
            if not mod.name.startswith("_"):  # what the APIs share, not an API
                name = f"{package}.{mod.name}"
                _load_jax_env_api(name, lambda n=name: importlib.import_module(n))
    for ep in entry_points(group="rlbench.jax_env_apis"):
        _load_jax_env_api(ep.value, ep.load)
    return tuple(cls() for cls in sorted(JAX_ENV_APIS.values(), key=lambda c: (c.order, c.name)))


def _load_jax_env_api(label, load):
    try:
        obj = load()
    except Exception as exc:  # a broken plugin must not break the others
        print(f"rlbench: warning: cannot load JAX env API {label}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return
    if isinstance(obj, type) and issubclass(obj, JaxEnvApi):
        register_jax_env_api(obj)
