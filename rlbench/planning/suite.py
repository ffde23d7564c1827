"""Suite files (TOML) -> validated settings and expanded cells. Nothing runs before this passes.

A suite has a `name`, an optional `[protocol]` (plan.Settings' keys), `[[sweep]]` tables in which every list is
an axis (a sweep is their cross product) and an optional `[limits]`; docs/protocol.md, "Running your own sweep",
shows every key.
"""
import hashlib
import itertools
import math
import os
import re
import tomllib
from dataclasses import dataclass, field, fields, replace

from rlbench import registry
from rlbench.envs import env_info, planned_env_kwargs, wrapped_id
from rlbench.errors import UsageError
from rlbench.machine.limits import DEFAULTS as LIMIT_DEFAULTS
from rlbench.planning.plan import Cell, Settings
from rlbench.workload import Workload, parse_policy

TOP_KEYS = {"name", "description", "schema", "protocol", "sweep", "limits"}
SWEEP_KEYS = {"adapters", "envs", "num_envs", "policy", "env_kwargs", "wrappers", "options", "omp_threads", "affinity",
              "protocol"}
SWEEP_PROTOCOL_KEYS = {"warmup_s", "warmup_units", "duration_s", "min_units", "stop_ci_width", "min_duration_s",
                       "timeout_s", "cores", "exclusive", "seed_per_repeat"}
SETTING_TYPES = {f.name: f.type for f in fields(Settings)}


@dataclass(frozen=True)
class Suite:
    name: str
    path: str
    sha256: str
    settings: Settings
    cells: tuple
    limits: dict = field(default_factory=lambda: dict(LIMIT_DEFAULTS))  # [limits], resolved
    duplicates: tuple = ()   # ids of cells given more than once (run once; the CLI warns)


def load_suite(path: str, text: str = None) -> Suite:
    """`text`: the suite's contents as a run folder kept them (resume, rerun), instead of reading `path`."""
    try:
        raw_bytes = open(path, "rb").read() if text is None else text.encode()
    except OSError as exc:
        raise UsageError(f"cannot read suite file {path}: {exc.strerror}") from None
    try:
        doc = tomllib.loads(raw_bytes.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None
    _check_keys(path, "top level", doc, TOP_KEYS)
    for key in ("name", "description"):
        if key in doc and not (isinstance(doc[key], str) and doc[key].strip()):
            raise UsageError(f"{path}: {key} = {doc[key]!r} must be a non-empty string")
    settings = parse_settings(path, _seeds(path, doc.get("protocol", {})))
    limits = parse_limits(path, doc.get("limits", {}))
    sweeps = doc.get("sweep")
    if not isinstance(sweeps, list) or not sweeps:
        raise UsageError(f"{path}: needs at least one [[sweep]] table")
    cells = []
    for i, sweep in enumerate(sweeps):
        cells += expand(f"{path}: sweep[{i}]", sweep, settings.seed)
    cells, duplicates = merge_duplicates(cells)
    return Suite(doc.get("name", path), path, hashlib.sha256(raw_bytes).hexdigest(), settings, cells,
                 limits, duplicates)


# The valid range of each numeric setting: (low, low is allowed)
SETTING_RANGES = {"repeats": (1, True), "timeout_s": (0, False), "warmup_s": (0, True), "warmup_units": (0, True),
                  "duration_s": (0, True), "min_units": (1, True), "stop_ci_width": (0, True),
                  "min_duration_s": (0, True), "omp_threads": (0, True), "seed": (0, True),
                  "cores": (0, True)}


def _seeds(where: str, table):
    """A suite's `seeds = N` in [protocol]: N repeats, each its own seed (`rlbench run --seeds N`)."""
    if not isinstance(table, dict) or "seeds" not in table:
        return table
    table = dict(table)
    seeds = _number(f"{where}: protocol.seeds", table.pop("seeds"), int, 1, True)
    if table.get("repeats", seeds) != seeds:
        raise UsageError(f"{where}: protocol.seeds = {seeds} runs {seeds} repeats, one per seed: leave out "
                         f"repeats = {table['repeats']}")
    return {**table, "repeats": seeds, "seed_per_repeat": True}


def parse_settings(where: str, table: dict, base: Settings = Settings(), names: dict = None) -> Settings:
    """`names`: how the user spelled each key (e.g. --timeout for timeout_s), for the error message."""
    _check_keys(where, "protocol", table, set(SETTING_TYPES))
    names = names or {}
    values = {}
    for key, raw in table.items():
        kind = SETTING_TYPES[key]
        label = f"{where}: {names.get(key, f'protocol.{key}')}"
        if kind is str:
            values[key] = _ray_address(label, raw, key) if key in ("ray_address", "cluster") else \
                _text(label, raw)
        elif kind is bool:
            if not isinstance(raw, bool):
                raise UsageError(f"{label}={raw!r} must be true or false")
            values[key] = raw
        elif kind is tuple:
            if not isinstance(raw, list):
                raise UsageError(f"{label}={raw!r} must be a list of CPU ids")
            values[key] = tuple(_cpu_ids(label, raw))
        else:
            values[key] = _number(label, raw, kind, *SETTING_RANGES[key])
    return Settings(**{**base.__dict__, **values})


def _number(label: str, raw, kind, low, closed: bool):
    """A finite number of `kind` in range, or a UsageError naming the value and the range."""
    bound = f">= {low}" if closed else f"> {low}"
    what = "an integer" if kind is int else "a finite number"
    ok = isinstance(raw, (int, float)) and not isinstance(raw, bool) and math.isfinite(raw)
    if ok and kind is int and isinstance(raw, float):
        ok = raw.is_integer()
    if not ok or (raw < low if closed else raw <= low):
        raise UsageError(f"{label}={raw!r} must be {what} {bound}")
    return kind(raw)


def _cpu_ids(label: str, cpus) -> list:
    """CPU ids this process may run on, or a UsageError naming the CPU and the valid ones."""
    valid = sorted(os.sched_getaffinity(0))
    out = []
    for c in cpus:
        if not isinstance(c, int) or isinstance(c, bool) or c not in valid:
            raise UsageError(f"{label}: CPU {c!r} is not available here (valid: {_ranges(valid)})")
        out.append(c)
    return out


def _ranges(ids) -> str:
    """[0, 1, 2, 5] -> '0-2, 5'"""
    parts, start = [], None
    for i, c in enumerate(ids):
        if start is None:
            start = c
        if i + 1 == len(ids) or ids[i + 1] != c + 1:
            parts.append(f"{start}" if start == c else f"{start}-{c}")
            start = None
    return ", ".join(parts)


def parse_limits(where: str, table: dict) -> dict:
    """[limits]: the sizes of the machine-limit measurement (rlbench.machine.limits), and whether to run it."""
    _check_keys(where, "limits", table, set(LIMIT_DEFAULTS))
    for key, raw in table.items():
        kind = type(LIMIT_DEFAULTS[key])
        if kind is bool and not isinstance(raw, bool):
            raise UsageError(f"{where}: limits.{key}={raw!r} must be true or false")
        if kind is int and (not isinstance(raw, int) or isinstance(raw, bool) or raw < 1):
            raise UsageError(f"{where}: limits.{key}={raw!r} must be a positive integer")
    return {**LIMIT_DEFAULTS, **table}


def _ray_address(label: str, raw, key: str) -> str:
    """'' (ray_address: start a local Ray per cell; cluster: run here), 'auto' (the cluster this machine is
    part of), HOST:PORT of a head node's GCS, or ray://HOST:PORT (Ray Client)."""
    if isinstance(raw, str) and (raw in ("", "auto") or re.fullmatch(r"(ray://)?[\w.\-]+:\d{1,5}", raw)):
        return raw
    empty = "a local Ray" if key == "ray_address" else "this machine"
    raise UsageError(f"{label}={raw!r} (valid: '' for {empty}, 'auto', HOST:PORT or ray://HOST:PORT)")


def _text(label: str, raw) -> str:
    if not isinstance(raw, str):
        raise UsageError(f"{label}={raw!r} must be a string")
    return raw


def expand(where: str, sweep: dict, seed: int) -> list:
    """One sweep table -> its cells (cross product of every list-valued field)."""
    if not isinstance(sweep, dict):
        raise UsageError(f"{where}: must be a table")
    _check_keys(where, "sweep", sweep, SWEEP_KEYS)
    for key in ("adapters", "envs", "num_envs"):
        if key not in sweep:
            raise UsageError(f"{where}: missing key '{key}'")
    _no_empty_list(where, "", sweep)
    adapters = registry.discover()
    for name in _axis(sweep["adapters"]):
        if name not in adapters:
            raise UsageError(f"{where}: adapters: unknown adapter '{name}' (valid: {', '.join(sorted(adapters))})")
    wrappers = sweep.get("wrappers", [])
    if not isinstance(wrappers, list) or not all(isinstance(w, str) for w in wrappers):
        raise UsageError(f"{where}: wrappers: {wrappers!r} must be a list of \"package.module:fn\" applied in order")
    envs = [_named(where, "envs", env_info, wrapped_id(e, wrappers)) if isinstance(e, str) else _bad(where, "envs", e)
            for e in _axis(sweep["envs"])]
    for n in _axis(sweep["num_envs"]):
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise UsageError(f"{where}: num_envs: {n!r} must be a positive integer")
    policies = [_named(where, "policy", parse_policy, p) for p in _axis(sweep.get("policy", "random"))]
    env_kwargs = _table(where, "env_kwargs", sweep.get("env_kwargs", {}))
    options = _table(where, "options", sweep.get("options", {}))
    for name in options:
        if name not in _axis(sweep["adapters"]):
            raise UsageError(f"{where}: options.{name}: not one of this sweep's adapters "
                             f"(valid: {', '.join(_axis(sweep['adapters']))})")
        _table(where, f"options.{name}", options[name])
    protocol = _sweep_protocol(where, sweep.get("protocol", {}))
    threads = [_cpu_setting(where, "omp_threads", t) for t in _axis(sweep.get("omp_threads", [None]))]
    affinities = _affinity_axis(where, sweep.get("affinity"))
    cells = []
    for info in envs:
        for kw in _product(env_kwargs):
            kw, frameskip = _named(where, "env_kwargs",
                                   lambda k, env_id=info.env_id: planned_env_kwargs(env_id, k), kw)
            for name, n, policy, omp, cpus in itertools.product(
                    _axis(sweep["adapters"]), _axis(sweep["num_envs"]), policies, threads, affinities):
                workload = Workload(info.env_id, n, policy, seed, frameskip, kw)
                for given in _product(options.get(name, {})):
                    cell = make_cell(f"{where}: options.{name}", name, workload, given)
                    cells.append(replace(cell, omp_threads=omp, affinity=cpus, protocol=protocol))
    return cells


def _sweep_protocol(where: str, table) -> tuple:
    """A sweep's own durations and timeout (e.g. paced replay workloads need longer windows)."""
    _check_keys(where, "protocol", table, SWEEP_PROTOCOL_KEYS)
    parsed = parse_settings(f"{where}: protocol", table)
    return tuple(sorted((k, getattr(parsed, k)) for k in table))


def make_cell(where: str, adapter: str, workload: Workload, given: dict) -> Cell:
    cls = registry.get(adapter)
    family, owner = registry.family_of_kind(cls.kind), registry.family_of_workload(workload.env_id)
    own = family.workload_prefix if family else ""
    if (own and owner is not family) or (not own and owner):
        need = f"a {family.name} workload ({own}<name>)" if own else f"an env, not a {owner.name} workload"
        raise UsageError(f"{where}: adapter '{adapter}' (kind {cls.kind}) needs {need}, got '{workload.env_id}'")
    if family:
        try:
            family.check_workload(workload)
        except ValueError as exc:
            raise UsageError(f"{where}: {workload.env_id}: {exc}") from None
    try:
        resolved = cls.resolve_options(given)
    except ValueError as exc:
        raise UsageError(f"{where}: {exc}") from None
    return Cell(adapter, workload, resolved, {k: resolved[k] for k in given})  # typed, however given


def _axis(value) -> list:
    return value if isinstance(value, list) else [value]


def _product(table: dict) -> list:
    if not isinstance(table, dict):
        raise UsageError(f"expected a table, got {table!r}")
    keys = sorted(table)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(_axis(table[k]) for k in keys))]


def _check_keys(where, what, table, valid):
    if not isinstance(table, dict):
        raise UsageError(f"{where}: {what} must be a table")
    for key in table:
        if key not in valid:
            raise UsageError(f"{where}: unknown key '{key}' in {what} (valid: {', '.join(sorted(valid))})")


def _cpu_setting(where, key, value):
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise UsageError(f"{where}: {key}: {value!r} must be a non-negative integer (0 = leave unset)")
    return value


def _affinity_axis(where, value) -> list:
    """`[0, 1]` is one setting (pin to CPUs 0 and 1); `[[0], [0, 1]]` sweeps two."""
    if value is None:
        return [None]
    settings = value if value and all(isinstance(v, list) for v in value) else [value]
    out = []
    for cpus in settings:
        if not isinstance(cpus, list) or not cpus:
            raise UsageError(f"{where}: affinity: {cpus!r} must be a list of CPU ids, or a list of such lists")
        out.append(tuple(_cpu_ids(f"{where}: affinity", cpus)))
    return out


def _no_empty_list(where, prefix, table):
    for key, value in table.items():
        if value == []:
            raise UsageError(f"{where}: {prefix}{key} = [] sweeps nothing (give at least one value)")
        if isinstance(value, dict):
            _no_empty_list(where, f"{prefix}{key}.", value)


def _named(where, key, parse, value):
    """parse(value), its UsageError prefixed with where the value was given."""
    try:
        return parse(value)
    except UsageError as exc:
        raise UsageError(f"{where}: {key}: {exc}") from None


def _table(where, key, value) -> dict:
    if not isinstance(value, dict):
        raise UsageError(f"{where}: {key} = {value!r} must be a table")
    return value


def _bad(where, key, value):
    raise UsageError(f"{where}: {key}: {value!r} must be a string")


def merge_duplicates(cells) -> tuple:
    """(cells with each id once, in first-given order and indexed, ids given more than once): the same
    cell twice would run twice per repeat and be pooled as one cell of twice the repeats."""
    seen, unique, duplicates = set(), [], []
    for c in cells:
        if c.cell_id in seen:
            duplicates.append(c.cell_id)
            continue
        seen.add(c.cell_id)
        unique.append(c)
    return tuple(replace(c, index=i) for i, c in enumerate(unique)), tuple(dict.fromkeys(duplicates))
