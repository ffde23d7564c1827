"""What each strategy costs per env step on this machine, whatever the env: its env steps/s on the synthetic env
with a zero-cost step, at a few num_envs, by the normal protocol, cached per machine (docs/tune.md), typed as
rlbench.tuning.figures. `rlbench tune` reads it to predict the most a strategy can reach on the user's env
(`predict`) and prune what cannot come within reach of the leader; `rlbench calibrate` runs it alone, ahead.
Each cell is bounded to seconds (`cell_timeout_s`): a strategy that fails or outlives its bound is cached with
the reason, and tune races it without a prediction rather than waiting a minute for it.
"""
import contextlib
import functools
import hashlib
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import types
from dataclasses import replace
from datetime import datetime

from rlbench.errors import UsageError
from rlbench.machine.fingerprint import fingerprint
from rlbench.planning.plan import Settings
from rlbench.results.model import ResultSet, Run
from rlbench.results.store import RESULTS, read_rows
from rlbench.running.sweep import SweepRequest, run_sweep
from rlbench.synthetic import ENV_ID
from rlbench.tuning.figures import Figure, Figures
from rlbench.tuning.profile import EnvProfile
from rlbench.workload import PolicySpec, Workload

VERSION = 3  # 2: each size's figures are the best of the adapter's tune_space settings; 3: stamped with its code
OBS_BYTES = 64       # a small observation: what the strategy costs, not what copying costs
# A cell's bound: its process started, its libraries imported and 0.4 s measured take 1-4 s on 2 cores (torch's
# import is most of it); a strategy that starts a cluster first (Ray: ray-actors ~7 s there) gets STARTUP_S more.
# One that needs longer is not worth a first tune's wait: it is named with the timeout and raced unpredicted.
CELL_S = 10.0
STARTUP_S = 20.0
CLUSTER_MODULES = ("ray",)   # frameworks that start a cluster of daemons before their first step
BOUND_ENV = {"cell": "RLBENCH_CALIBRATION_CELL_S", "startup": "RLBENCH_CALIBRATION_STARTUP_S"}
SETTINGS = Settings(warmup_s=0.1, warmup_units=2, duration_s=0.3, min_units=3, repeats=1,
                    timeout_s=CELL_S + STARTUP_S)   # each cell carries its own bound (cells)


def bounds() -> tuple:
    """(cell_s, startup_s): a calibration cell's timeout and a cluster-starting strategy's extra, from
    $RLBENCH_CALIBRATION_CELL_S and $RLBENCH_CALIBRATION_STARTUP_S where set (a slow machine may need more),
    else CELL_S and STARTUP_S; a bad value is refused with its name (checked before anything runs)."""
    out = []
    for (kind, var), default, low in zip(BOUND_ENV.items(), (CELL_S, STARTUP_S), (0.0, -1.0)):
        raw = os.environ.get(var, "").strip()
        try:
            value = float(raw) if raw else default
        except ValueError:
            value = float("nan")
        if not (low < value < 3600):
            valid = "seconds > 0 and < 3600" if kind == "cell" else "seconds >= 0 and < 3600"
            raise UsageError(f"${var}={raw!r} (valid: {valid})")
        out.append(value)
    return tuple(out)


def starts_cluster(adapter: str) -> bool:
    from rlbench import registry
    return any(m in CLUSTER_MODULES for m in registry.get(adapter).requires)


def cell_timeout_s(adapter: str) -> float:
    """How long one calibration cell of this adapter may run: the cell's bound, plus the start-up allowance
    for a strategy that starts a cluster."""
    cell_s, startup_s = bounds()
    return cell_s + (startup_s if starts_cluster(adapter) else 0.0)


def cache_dir() -> str:
    """$RLBENCH_CACHE, else $XDG_CACHE_HOME/rlbench, else ~/.cache/rlbench."""
    base = os.environ.get("RLBENCH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "rlbench")
    return os.path.join(base, "calibration")


def sizes(cpus: int, max_envs: int) -> list:
    """The num_envs calibrated: eight per core (the probe's larger size), within --max-envs. One size keeps
    a first tune's calibration short (a Ray adapter's process takes ~20 s to start on 2 cores)."""
    return [max(1, min(8 * cpus, max_envs))]


# the packages the calibrated strategies' speed depends on (a fixed list: the fingerprint's may grow)
KEY_PACKAGES = ("numpy", "psutil", "gymnasium", "envpool", "torch", "jax", "jaxlib", "gymnax", "stable-baselines3",
                "tianshou", "ray", "torchrl", "ale-py", "mujoco", "py-spy", "pandas")


def machine_key(env: dict = None) -> dict:
    env = env or fingerprint()
    packages = env.get("packages") or {}
    return {"version": VERSION, "cpu_model": env.get("cpu_model"), "cores": env.get("cpu_logical_cores"),
            "ram_gb": round(env.get("ram_gb") or 0), "cpus": len(os.sched_getaffinity(0)),
            "python": platform.python_version(), "packages": {k: packages.get(k) for k in sorted(KEY_PACKAGES)}}


def cache_path(key: dict) -> str:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return os.path.join(cache_dir(), f"{digest}.json")


def load(key: dict) -> Figures:
    """The figures measured on this machine (empty when none)."""
    try:
        with open(cache_path(key)) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return Figures()
    return Figures.from_json(data.get("adapters", {})) if data.get("key") == key else Figures()


def store(key: dict, measured: Figures, by: str = "") -> str:
    """Merge these adapters' figures into the machine's file (locked; atomic replace), each stamped with when
    and by which command it was measured (what tune says it read)."""
    from filelock import FileLock

    from rlbench.report.writer import write_atomic
    path = cache_path(key)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    now = time.time()
    with FileLock(path + ".lock"):
        stamped = Figures({a: {n: replace(f, measured_at=now, by=by) for n, f in by_n.items()}
                           for a, by_n in measured.items()})
        merged = load(key).merged(stamped)
        write_atomic(path, json.dumps({"key": key, "measured_at": time.time(), "adapters": merged.to_json()},
                                      indent=1) + "\n")
    return path


@functools.lru_cache(maxsize=None)
def code_of(adapter: str) -> str:
    """The code an adapter's figures are measured under: its module's source and that of the modules of its own
    package it takes names from (its shared helpers), hashed. The cache is keyed by machine and packages; a
    figure stamped with other code (the adapter changed since: another speed, another verdict) is measured
    again."""
    from rlbench import registry
    module = sys.modules[registry.get(adapter).__module__]
    top = module.__name__.split(".")[0]
    names = {module.__name__}
    for value in vars(module).values():
        names.add(value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", "") or "")
    h = hashlib.sha256()
    for name in sorted(n for n in names if n.split(".")[0] == top):
        path = getattr(sys.modules.get(name), "__file__", None)
        if path and os.path.isfile(path):
            with open(path, "rb") as f:
                h.update(name.encode() + b"\0" + f.read())
    return h.hexdigest()[:16]


def missing(calibration: Figures, adapters, ns) -> list:
    """The adapters to measure at these sizes: those the cache lacks at one of them, that were measured under
    other code (code_of), or that timed out there under a shorter bound than theirs now (the bound was raised
    for a slow machine: a timeout under a shorter one says nothing of it)."""
    def lacks(a, n):
        f = calibration.at(a, n)
        return (f is None or (f.code or code_of(a)) != code_of(a)
                or (f.status == "timeout" and (f.bound_s or 0.0) < cell_timeout_s(a)))
    return [a for a in adapters if any(lacks(a, n) for n in ns)]


def cells(adapters, ns) -> list:
    """The calibration's cells: at each size on the zero-cost synthetic env, each adapter under every setting
    its tune_space gives there (the settings tune races), so that its ceiling is its best one's, not its
    defaults' (PufferLib's default workers, busy-waiting on every core, can be its worst setting)."""
    from rlbench import registry
    from rlbench.planning.suite import make_cell
    cpus = len(os.sched_getaffinity(0))
    out = []
    for adapter in adapters:
        bound = (("timeout_s", cell_timeout_s(adapter)),)
        for n in ns:
            workload = Workload(ENV_ID, n, PolicySpec(), 0, 1, {"step_cost_us": 0.0, "obs_bytes": OBS_BYTES})
            for options in registry.get(adapter)().tune_space(n, cpus) or [{}]:
                try:
                    cell = make_cell("calibration", adapter, workload, options)
                except Exception:  # noqa: BLE001 - a setting that cannot take the synthetic env is left out
                    continue
                out.append(replace(cell, index=len(out), protocol=bound))
    return out


def figures(rows, bounds: dict = None) -> Figures:
    """The figures of calibration rows: each size's best setting (best_of); a failure is kept too (no rate:
    never a prediction), so that it is not tried at every tune, a timeout with the bound it ran under (bounds:
    adapter -> seconds). rows: Runs (rlbench.results.model), or rows as written."""
    measured = {}
    for run in map(Run.of, rows):
        ok = run.status == "ok" and run.steps_per_s
        # what one of its jobs costs (a timeout: the limit): the search's first estimate of its jobs
        wall = run.wall_s or (SETTINGS.timeout_s if run.status == "timeout" else None)
        if ok:
            f = Figure(float(run.steps_per_s), run.workers or 1, run.options or {}, wall, code_of(run.adapter))
        else:
            f = Figure(None, wall_s=wall, code=code_of(run.adapter), status=run.status,
                       reason=(run.error or "")[:300],
                       bound_s=bounds.get(run.adapter) if run.status == "timeout" and bounds else None)
        by_n = measured.setdefault(run.adapter, {})
        by_n[int(run.num_envs)] = best_of(by_n.get(int(run.num_envs)), f)
    return Figures(measured)


def best_of(kept, new: Figure) -> Figure:
    """One size's figures over an adapter's settings: the fastest one's rate and options, the most workers any
    ran with and the longest job (both bound what its settings may do), a failure only when every one failed."""
    if kept is None:
        return new
    fast = max((kept, new), key=lambda f: f.steps_per_s or 0.0)
    ran = [f for f in (kept, new) if f.ran]
    walls = [f.wall_s for f in (kept, new) if f.wall_s]
    return replace(fast, workers=max(f.workers for f in ran) if ran else fast.workers,
                   wall_s=max(walls) if walls else None)


def _written(folder: str) -> list:
    """The calibration rows in this folder so far, as written (as Runs, in order)."""
    path = os.path.join(folder, RESULTS)
    return [Run.from_row(r) for r in read_rows(path)] if os.path.exists(path) else []


def calibrate(adapters, ns, envs=None, force: bool = False, out_dir: str = None, admit=None,
              announce=None, by: str = "") -> tuple:
    """(the Figures of these adapters on this machine, cache path, the rows measured now, as Runs): measures
    those the cache lacks at these sizes (all of them when forced) in out_dir (default a temporary folder,
    removed), the jobs admit(job) lets start, and stores them (stamped `by`, the command measuring them); once
    one setting of an adapter times out at a size, its others there are not tried (a Ray cluster's start-up
    that outlived the bound would again). announce(todo) is told what will be measured."""
    key = machine_key()
    have = load(key)
    todo = list(adapters) if force else missing(have, adapters, ns)
    rows = []
    if todo:
        if announce:
            announce(todo)
        scratch = out_dir or tempfile.mkdtemp(prefix="rlbench-calibrate-")
        os.makedirs(scratch, exist_ok=True)
        earlier = len(_written(scratch))   # a resumed tune's folder holds its first session's rows

        def bounded(job):   # a setting of an adapter that timed out at this size would too: its start-up did
            if any(r.status == "timeout" and r.adapter == job.cell.adapter
                   and r.num_envs == job.cell.workload.num_envs for r in _written(scratch)[earlier:]):
                return False
            return admit(job) if admit else True

        try:  # one repeat of each cell, interleaved
            run_sweep(SweepRequest("calibration", "calibration", tuple(cells(todo, ns)), SETTINGS, scratch, envs=envs,
                                   admit=bounded))
        finally:  # whatever ended it (a signal, a full disk), the jobs that finished are cached for the next tune
            ran = os.path.exists(os.path.join(scratch, RESULTS))
            rows = ResultSet.load(scratch).runs if ran else []
            measured = figures(rows, {a: cell_timeout_s(a) for a in todo})
            if measured:
                with contextlib.suppress(OSError):
                    store(key, measured, by)
            if out_dir is None:
                shutil.rmtree(scratch, ignore_errors=True)
        have = load(key) or have.merged(measured)
    return have.only(adapters), cache_path(key), rows


# -- what the calibration predicts ---------------------------------------------------------------------

def env_us(profile: EnvProfile) -> float:
    """One env's own cost per step in one process, resets spread over the steps."""
    step = profile.step_us
    share = min(profile.reset_share, 0.99)
    return step / (1 - share)


def policy_us_per_step(profile: EnvProfile, device: str = None) -> float:
    """The policy's cost per env step at its cheapest profiled batch on `device` (the user's by default)."""
    per = [us / int(b) for b, us in profile.curve(device).items()]
    return min(per) if per else 0.0


def predict(calibration: Figures, adapter: str, num_envs: int, profile: EnvProfile, cpus: int, device: str = None,
            central: bool = True):
    """The most env steps/s (adapter, num_envs) can reach on the profiled env here, or None uncalibrated:
    no faster than its cores running the env's own step and the policy (at its cheapest per step) with no
    overhead at all, or than its ceiling. A central policy (one copy, batched on `device`) beside envs stepped
    elsewhere overlaps their stepping at best (the slower of the two bounds it); in one process, or as workers'
    own copies, the policy shares the cores with the envs. A central policy on the CPU shares them too: the
    machine's cores do the env's and the policy's work together, whoever does which (on MiniGrid's screen with the
    CNN, 2 cores, the overlap alone bounded every central strategy at 3.5k env steps/s and the one that places
    the policy in its workers, rlpyt-cpu, at 3.1k: a tenth lower, so it was probed last and never measured, while
    it was the sweep's best). An upper bound, not an estimate: it prunes only what cannot win."""
    top = calibration.ceiling(adapter)
    if top is None:
        return None
    parallel = max(1, min(cpus, calibration.workers_at(adapter, num_envs, cpus), num_envs))
    policy_us = policy_us_per_step(profile, device)
    overlapped = central and parallel > 1
    work_us = max(env_us(profile) / parallel, policy_us) if overlapped else (env_us(profile) + policy_us) / parallel
    if overlapped and not str(device or "cpu").startswith("cuda"):
        work_us = max(work_us, (env_us(profile) + policy_us) / max(cpus, 1))
    return 1.0 / max(1.0 / top, work_us / 1e6) if work_us > 0 else top


def memory_mb(calibration: Figures, adapter: str, num_envs: int, profile: EnvProfile, cpus: int) -> float:
    """The memory (adapter, num_envs) is expected to hold: every env's own, and a Python process per worker."""
    per_env, process = profile.rss_per_env_mb, profile.process_rss_mb
    workers = calibration.workers_at(adapter, num_envs, cpus) if calibration.get(adapter) else 1
    return num_envs * per_env + max(workers - 1, 0) * process


def stamp(seconds: float) -> str:
    """A cache stamp (time.time()) as the console says it."""
    return datetime.fromtimestamp(seconds).strftime("%Y-%m-%d %H:%M")
