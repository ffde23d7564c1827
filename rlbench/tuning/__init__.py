"""`rlbench tune`: which strategy steps this env fastest on this machine, answered by measuring. In the
shape of `rlbench run`: check the input (the env is built once), profile the env in its own process, open
the run folder, calibrate what this machine has not seen, search (rlbench.tuning.search) under the budget,
decide, write tune.json and the report, print the answer. Each stage is one call here; the whole, profile
and calibration included, keeps to the budget."""
import json
import math
import os
import re
import subprocess
import sys
import time
from dataclasses import asdict, replace

from rlbench import registry
from rlbench.envs import planned_env_kwargs, wrapped_id
from rlbench.errors import UsageError
from rlbench.machine.fingerprint import fingerprint
from rlbench.planning.flags import pairs
from rlbench.planning.plan import Settings
from rlbench.report.writer import write_atomic
from rlbench.results.model import ResultSet
from rlbench.results.record import RunRecord
from rlbench.running import adapter_envs
from rlbench.running.cluster.join import join, leave
from rlbench.running.rundir import RunDir
from rlbench.tuning import calibrate
from rlbench.tuning.candidates import Space, available_mb, cpus_here, default_max_envs, stepping_adapters
from rlbench.tuning.decide import decide, lines
from rlbench.tuning.measure import SweepMeasurer
from rlbench.tuning.search import Search, probe_sizes
from rlbench.workload import Workload, kv_label, parse_policy

TUNE_JSON = "tune.json"
PROFILE_TIMEOUT_S = 300
CALIBRATION_SHARE = 0.3   # of the budget, at most, for calibrating strategies this machine has not seen
# every measurement: the normal protocol, shorter windows (the race repeats what matters)
SETTINGS = Settings(warmup_s=0.2, warmup_units=2, duration_s=0.5, min_units=5, repeats=2, timeout_s=60.0)


def parse_budget(raw: str) -> float:
    """'10m', '90s', '1h', '1h30m' or plain seconds -> seconds."""
    text = str(raw).strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        seconds = float(text)
    else:
        parts = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text)
        if not parts or not any(parts.groups()):
            raise UsageError(f"--budget {raw!r} (valid: seconds, or like 90s, 10m, 1h, 1h30m)")
        h, m, s = (int(g or 0) for g in parts.groups())
        seconds = 3600 * h + 60 * m + s
    if seconds < 10:
        raise UsageError(f"--budget {raw!r} must be at least 10s (one configuration, twice)")
    return seconds


def tune(args) -> tuple:
    """(exit code, run folder) of `rlbench tune` asked this rlbench.planning.request.TuneRequest."""
    t0 = time.monotonic()
    workload = plan_workload(args)
    budget_s = parse_budget(args.budget)
    named = [a for item in args.adapters for a in item.split(",") if a]
    stepping_adapters(named)  # unknown or non-stepping names: refused before anything runs
    settings = replace(SETTINGS, cluster=_address(args), node_class=args.node_class or "")
    try:
        cluster = join(settings)
        return _tune(args, t0, workload, budget_s, named, settings, cluster)
    finally:
        leave()


def _address(args) -> str:
    if not args.cluster:
        return ""
    from rlbench.planning.suite import parse_settings
    return parse_settings("command line", {"cluster": args.cluster}, names={"cluster": "--cluster"}).cluster


def _tune(args, t0, workload, budget_s, named, settings, cluster) -> tuple:
    """`cluster`: the class of nodes the candidates race on, one per node at a time (cores and calibration
    are theirs, not this machine's: it is not calibrated)."""
    cpus = cluster.cpus if cluster else cpus_here()
    where = f"nodes of class {cluster.class_id} ({_machine(cluster)})" if cluster else "this machine"
    print(f"rlbench tune: profiling {label(workload)} in its own process", file=sys.stderr)
    profile = profile_env(workload)
    max_envs = args.max_envs or default_max_envs(profile)
    space = Space(workload, named, max_envs, cpus)
    runnable = [a for a in space.adapters if any(space.settings(a, n) for n in probe_sizes(cpus, max_envs, profile))]
    if not runnable:
        raise UsageError(f"no adapter can run {workload.env_id} here: "
                         + "; ".join(f"{x.adapter}: {x.reason}" for x in space.left[:6]))
    folder = RunDir.choose("tune", args.out)
    out_dir, run_id = folder.path, folder.run_id
    with folder:
        folder.begin(RunRecord(fingerprint(), run_id, command="tune", settings=settings.__dict__, budget_s=budget_s,
                               cluster=cluster.record() if cluster else None))
        envs = prepare(space.adapters)
        folder.write(replace(folder.record, adapter_envs=adapter_envs.records(envs)))
        measurer = SweepMeasurer(run_id, settings, out_dir, envs, t0=t0, cluster=cluster)
        calibration = calibrate_here(runnable, cpus, max_envs, envs, measurer, budget_s, out_dir) \
            if profile.get("api", "gymnasium") == "gymnasium" and cluster is None else NOT_CALIBRATED
        search = Search(space, measurer, budget_s - report_s(budget_s), profile, calibration["adapters"], cpus,
                        memory_mb=available_mb())
        interrupted = False
        try:
            search.go()
        except KeyboardInterrupt:
            interrupted = True
            search.stop_reason = "interrupted: deciding on what was measured"
            search.finish()
            print("rlbench tune: interrupted; deciding on what was measured", file=sys.stderr)
        results = ResultSet.load(out_dir)
        decision = decide(search, results, profile, max_envs)
        decision["search"] = f"{search.stop_reason}; {measurer.elapsed():.0f} s of the {budget_s:.0f} s budget used"
        decision["where"] = where
        record = tune_record(workload, budget_s, measurer.elapsed(), max_envs, profile, calibration, search, decision,
                             settings)
        write_atomic(os.path.join(out_dir, TUNE_JSON), json.dumps(record, indent=2, default=str) + "\n")
        folder.export(cells=len(search.candidates),
                      tune={"label": label(workload), **decision, "points": chart_points(search)})
    print("\n".join(lines(decision, profile, label(workload))))
    print(f"\nreport: {os.path.join(out_dir, 'index.html')}  decision: {os.path.join(out_dir, TUNE_JSON)}")
    print(f"rlbench tune: {time.monotonic() - t0:.0f} s of the {budget_s:.0f} s budget used", file=sys.stderr)
    return (130 if interrupted else 0 if decision.get("winner") else 1), out_dir


# a JAX env races JAX adapters only, which the calibration (CPU strategies on a CPU env) does not measure
NOT_CALIBRATED = {"path": None, "sizes": [], "measured_now": [], "adapters": {}}


def report_s(budget_s: float) -> float:
    """Kept from the budget for the decision and the report."""
    return min(10.0, max(3.0, 0.05 * budget_s))


def calibrate_here(adapters, cpus, max_envs, envs, measurer, budget_s, out_dir) -> dict:
    """This machine's calibration of these adapters: reused from the cache, else measured now (in the run
    folder's calibration/, within CALIBRATION_SHARE of the budget; an adapter not calibrated in time is
    simply never pruned)."""
    ns = calibrate.sizes(cpus, max_envs)
    limit = CALIBRATION_SHARE * budget_s

    def admit(job):
        return measurer.elapsed() + measurer.job_s(job.cell) <= limit

    def announce(todo):
        print(f"rlbench tune: calibrating {len(todo)} strategies on this machine (cached for later tunes)",
              file=sys.stderr)

    figures, path, rows = calibrate.calibrate(adapters, ns, envs, out_dir=os.path.join(out_dir, "calibration"),
                                              admit=admit, announce=announce)
    measurer.learn({a: calibrate.wall_s(figures, a) for a in adapters})
    return {"path": path, "sizes": ns, "measured_now": sorted({r["adapter"] for r in rows}), "adapters": figures}


def _machine(cluster) -> str:
    fp = cluster.fingerprint
    return f"{len(cluster.nodes)} x {fp.get('cpu_model')}, {cluster.cpus} cores, {fp.get('ram_gb')} GB"


def label(workload) -> str:
    env = workload.env_id + (f"({kv_label(workload.env_kwargs)})" if workload.env_kwargs else "")
    return f"{env} with policy {workload.policy.label}"


def plan_workload(args) -> Workload:
    env_kwargs = pairs("--env-kwarg", args.env_kwarg)
    if registry.family_of_workload(args.env) is not None:
        raise UsageError(f"--env {args.env}: tune races env-stepping strategies; give an env, not a workload")
    env_id = wrapped_id(args.env, args.env_wrapper)
    kwargs, frameskip = planned_env_kwargs(env_id, env_kwargs)
    return Workload(env_id, 1, parse_policy(args.policy), 0, frameskip, kwargs)


def profile_env(workload) -> dict:
    """The env profile, from its own process (rlbench.tuning.profile), killed with its children if it
    outlives PROFILE_TIMEOUT_S."""
    cmd = [sys.executable, "-m", "rlbench.tuning.profile", json.dumps({"workload": workload.to_dict(), "seconds": 1.0})]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=PROFILE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.communicate()
        raise UsageError(f"the env profile of {workload.env_id} did not finish in {PROFILE_TIMEOUT_S} s") from None
    if proc.returncode != 0:
        last = (err.strip().splitlines() or ["no output"])[-1]
        raise UsageError(f"the env profile of {workload.env_id} failed: {last}")
    return json.loads(out.strip().splitlines()[-1])


def prepare(adapters) -> dict:
    """Adapter environments of the adapters named to race (built once, cached)."""
    from rlbench.running import adapter_envs
    return adapter_envs.prepare({registry.get(a) for a in adapters}, build=True)


def chart_points(search) -> list:
    """The search as the Recommendation chart draws it: each configuration measured (its median) or pruned
    (its prediction), by strategy and num_envs."""
    out = []
    for c in search.candidates:
        if c.values or (c.status == "pruned" and c.predicted):
            out.append({"strategy": " ".join(filter(None, (c.adapter, kv_label(c.cell.given_options)))),
                        "num_envs": c.num_envs, "steps_per_s": c.median if c.values else c.predicted,
                        "status": c.status, "config": c.config, "n": len(c.values)})
    return out


def tune_record(workload, budget_s, used_s, max_envs, profile, calibration, search, decision, settings) -> dict:
    """tune.json: the profile, the calibration it read, every round of the search (what was added and why,
    predicted and measured rates, drops with p-values, prunes with predictions), every candidate and its
    fate, what could not race, the stop reason and the decision."""
    cands = [{"cell_id": c.cell.cell_id, "config": c.config, "adapter": c.adapter, "num_envs": c.num_envs,
              "options": c.cell.given_options, "origin": c.origin, "round_added": c.round,
              "predicted_max_steps_per_s": c.predicted, "status": c.status, "repeats": c.repeats,
              "ok_repeats": len(c.values), "steps_per_s": c.values,
              "steps_per_s_median": c.median if c.values else None, "round_out": c.round_out or None,
              "p_slower_than_leader": None if math.isnan(c.p) else c.p, "why": c.why} for c in search.candidates]
    left = [{**asdict(x), "repeats": 0} for x in search.space.left]
    return {"schema": 2, "workload": workload.to_dict(), "budget_s": budget_s, "used_s": used_s,
            "max_envs": max_envs, "settings": settings.__dict__, "profile": profile, "calibration": calibration,
            "stop_reason": search.stop_reason, "converged": search.converged, "rounds": search.rounds,
            "candidates": cands, "left_out": left, "decision": decision}
