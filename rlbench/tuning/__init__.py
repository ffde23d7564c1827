"""`rlbench tune`: which strategy steps this env fastest on this machine, answered by measuring. In the
shape of `rlbench run`: check the input (the env is built once), profile the env in its own process,
list the candidates, race them under the budget, decide, write the run folder and tune.json, print the
answer. Each stage is one call here."""
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import asdict

from rlbench import registry
from rlbench.envs import planned_env_kwargs
from rlbench.errors import UsageError
from rlbench.machine.fingerprint import fingerprint, now
from rlbench.planning.flags import pairs
from rlbench.planning.plan import Settings
from rlbench.report.writer import write_atomic
from rlbench.results.model import ResultSet
from rlbench.running import rundir
from rlbench.tuning.candidates import candidates, cpus_here, default_max_envs
from rlbench.tuning.decide import decide, lines
from rlbench.tuning.race import Race
from rlbench.workload import Workload, kv_label, parse_policy

TUNE_JSON = "tune.json"
PROFILE_TIMEOUT_S = 300
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
    """(exit code, run folder) of `rlbench tune`."""
    workload = plan_workload(args)
    budget_s = parse_budget(args.budget)
    cpus = cpus_here()
    max_envs = args.max_envs or default_max_envs(cpus)
    if max_envs < 1:
        raise UsageError(f"--max-envs {max_envs} must be >= 1")
    named = [a for item in (args.adapters or []) for a in item.split(",") if a]
    cells, left, variants = candidates(workload, named, max_envs, cpus)
    if not cells:
        raise UsageError(f"no adapter can run {workload.env_id} here: "
                         + "; ".join(f"{x.adapter}: {x.reason}" for x in left[:6]))
    run_id = rundir.new_run_id("tune")
    out_dir = args.out or os.path.join(rundir.REPORTS, run_id)
    lock = rundir.open_out_dir(out_dir, False)
    try:
        env = {**fingerprint(), "run_id": run_id, "suite_path": None, "command": "tune",
               "settings": SETTINGS.__dict__, "cells": len(cells)}
        rundir.write_env(out_dir, env)
        rundir.point_latest(out_dir)
        t0 = time.monotonic()
        print(f"rlbench tune: profiling {label(workload)} in its own process", file=sys.stderr)
        profile = profile_env(workload)
        race = Race(cells, SETTINGS, out_dir, run_id, budget_s - (time.monotonic() - t0), prepare(cells, env),
                    variants=variants)
        race.left_out = left
        interrupted = False
        try:
            finalists = race.go()
        except KeyboardInterrupt:
            interrupted = True
            finalists = race.finalists()
            print("rlbench tune: interrupted; deciding on what was measured", file=sys.stderr)
        results = ResultSet.load(out_dir)
        decision = decide(race, finalists, profile, [r.to_row() for r in results.rows], workload, max_envs)
        record = tune_record(workload, budget_s, time.monotonic() - t0, max_envs, profile, race, decision)
        write_atomic(os.path.join(out_dir, TUNE_JSON), json.dumps(record, indent=2, default=str) + "\n")
        env.update(ended_at=now(), tune={"label": label(workload), **decision})
        rundir.write_env(out_dir, env)
        from rlbench import report
        report.export(ResultSet.load(out_dir), out_dir)
    finally:
        lock.release()
    print("\n".join(lines(decision, profile, label(workload))))
    print(f"\nreport: {os.path.join(out_dir, 'index.html')}  decision: {os.path.join(out_dir, TUNE_JSON)}")
    return (130 if interrupted else 0 if decision.get("winner") else 1), out_dir


def label(workload) -> str:
    env = workload.env_id + (f"({kv_label(workload.env_kwargs)})" if workload.env_kwargs else "")
    return f"{env} with policy {workload.policy.label}"


def plan_workload(args) -> Workload:
    env_kwargs = pairs("--env-kwarg", args.env_kwarg)
    if registry.family_of_workload(args.env) is not None:
        raise UsageError(f"--env {args.env}: tune races env-stepping strategies; give an env, not a workload")
    kwargs, frameskip = planned_env_kwargs(args.env, env_kwargs)
    return Workload(args.env, 1, parse_policy(args.policy), 0, frameskip, kwargs)


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


def prepare(cells, env: dict) -> dict:
    """Adapter environments of the adapters named to race (built once, cached)."""
    from rlbench.running import adapter_envs
    prepared = adapter_envs.prepare({registry.get(c.adapter) for c in cells}, build=True)
    env["adapter_envs"] = {name: p.record or {"status": p.status, "reason": p.reason} for name, p in prepared.items()}
    return prepared


def tune_record(workload, budget_s, used_s, max_envs, profile, race, decision) -> dict:
    """tune.json: the profile, every candidate (raced or not, with its repeats and fate), the rounds and
    the decision."""
    raced = [{"cell_id": r.cell.cell_id, "adapter": r.adapter, "num_envs": r.cell.workload.num_envs,
              "options": r.cell.given_options, "status": r.status, "repeats": r.repeats, "ok_repeats": len(r.values),
              "steps_per_s_median": r.median if r.values else None, "round_out": r.round or None,
              "p_slower_than_leader": None if r.p != r.p else r.p, "why": r.why} for r in race.racers]
    left = [{**asdict(x), "repeats": 0} for x in race.left_out]
    return {"schema": 1, "workload": workload.to_dict(), "budget_s": budget_s, "used_s": used_s, "max_envs": max_envs,
            "settings": SETTINGS.__dict__, "profile": profile, "rounds": race.rounds,
            "candidates": raced + left, "decision": decision}
