"""`rlbench`: parse -> plan -> prepare -> run -> export -> summarize (the shape of hyperfine's main)."""
import argparse
import fnmatch
import json
import os
import signal
import sys
import threading
import time
from dataclasses import replace

from rlbench import registry, rundir
from rlbench.errors import UsageError
from rlbench.limits import DEFAULTS as LIMIT_DEFAULTS, positive_int
from rlbench.plan import Settings
from rlbench.suite import Suite, load_suite, make_cell, merge_duplicates, parse_settings
from rlbench.workload import Workload, parse_policy

REPORTS = "reports"
FLAG_NAMES = {"repeats": "--repeats", "duration_s": "--duration", "warmup_s": "--warmup", "timeout_s": "--timeout",
              "ray_address": "--ray-address"}
# what a run keeps of its command line (plan.json), enough to plan it again: resume, rerun
PLAN_ARGS = ("suite", "adapter", "env", "num_envs", "policy", "opt", "env_kwarg", "repeats", "duration", "warmup",
             "timeout", "only", "profile", "ray_address")
VALIDATE_SUITE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "suites", "validate.toml")


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit code 2, like every other bad input
        raise UsageError(f"{self.prog}: {message}")


def parse_args(argv):
    p = _Parser(prog="rlbench", description="Compare RL parallelism strategies on this machine.")
    sub = p.add_subparsers(dest="command", required=True)
    common = _Parser(add_help=False)
    common.add_argument("--out", help="run directory (default reports/<run-id>)")
    common.add_argument("--repeats", type=int, help="repeats per cell (fresh process each)")
    common.add_argument("--duration", type=float, help="minimum timed seconds per repeat")
    common.add_argument("--warmup", type=float, help="minimum warm-up seconds per repeat (discarded)")
    common.add_argument("--timeout", type=float, help="wall-clock limit per repeat, seconds")
    common.add_argument("--only", action="append", metavar="GLOB", help="run only cells whose id matches")
    common.add_argument("--profile", action="store_true", help="one extra py-spy run per cell (speedscope)")
    common.add_argument("--ray-address", help="run Ray-based adapters on this existing cluster (HOST:PORT, auto)")
    common.add_argument("--no-build", action="store_true", help="never build an adapter's own environment: "
                                                                "its cells are unsupported until built")
    common.add_argument("--allow-errors", action="store_true", help="exit 0 even when a cell has error or "
                                                                    "timeout rows (default: exit 1)")
    run = sub.add_parser("run", parents=[common], help="run a suite file, or one sweep given by flags")
    run.add_argument("suite", nargs="?", help="suite file (TOML); omit to describe a sweep with --adapter/--env")
    run.add_argument("--adapter", action="append", help="adapter name (repeatable)")
    run.add_argument("--env", action="append", help="env id (repeatable)")
    run.add_argument("--num-envs", default="1", help="comma-separated, e.g. 1,4,16")
    run.add_argument("--policy", default="random", help="random | fixed_cost:cost_us=100 | mlp:hidden=64x64,threads=1")
    run.add_argument("--opt", action="append", default=[], metavar="KEY=VALUE", help="adapter option")
    run.add_argument("--env-kwarg", action="append", default=[], metavar="KEY=VALUE", help="env argument")
    run.add_argument("--resume", metavar="DIR", help="run only the repeats missing from the run in DIR (its plan, "
                                                     "settings and machine must be the same)")
    res = sub.add_parser("resume", help="finish an interrupted run: only the (cell, repeat) pairs missing from DIR")
    res.add_argument("dir", metavar="DIR")
    res.add_argument("--no-build", action="store_true", help="never build an adapter's own environment")
    res.add_argument("--allow-errors", action="store_true", help="exit 0 even with error or timeout rows")
    rer = sub.add_parser("rerun", help="run the plan kept in DIR again, from scratch, into a new folder")
    rer.add_argument("dir", metavar="DIR")
    rer.add_argument("--out", help="run directory (default reports/<run-id>)")
    rer.add_argument("--no-build", action="store_true", help="never build an adapter's own environment")
    rer.add_argument("--allow-errors", action="store_true", help="exit 0 even with error or timeout rows")
    sub.add_parser("list", help="adapters, their options, and whether they can run here")
    rep = sub.add_parser("report", help="rebuild results.csv, summary.csv and index.html from results.jsonl")
    rep.add_argument("dir")
    sub.add_parser("env", help="print this machine's fingerprint (env.json)")
    cmp = sub.add_parser("compare", help="compare two runs; exit 1 when a cell is slower beyond the threshold "
                                         "and significantly so")
    cmp.add_argument("base", metavar="BASE_DIR")
    cmp.add_argument("new", metavar="NEW_DIR")
    cmp.add_argument("--threshold", default="10%", help="relative slowdown that counts (default 10%%)")
    cmp.add_argument("--alpha", type=float, default=0.05, help="significance level of the U test (default 0.05)")
    cmp.add_argument("--out", help="where compare.csv and compare.html go (default NEW_DIR)")
    envs = sub.add_parser("envs", help="adapters' own environments (Sample Factory, Reverb, Brax): state, or build")
    envs.add_argument("names", nargs="*", metavar="NAME", help="environment names (default: all)")
    envs.add_argument("--build", action="store_true", help="build the ones not built yet (make install-extras)")
    val = sub.add_parser("validate", parents=[common], help=f"run {VALIDATE_SUITE} and compare with published figures")
    val.add_argument("--from", dest="from_dir", metavar="DIR", help="compare an existing run instead of running")
    lim = sub.add_parser("limits", help="measure memory-copy and cold disk-read limits (what replay figures are "
                                        "fractions of)")
    lim.add_argument("--out-dir", default=REPORTS, help="measure reads on this directory's filesystem "
                                                        "(default reports/)")
    lim.add_argument("--memcpy-mb", type=positive_int, default=LIMIT_DEFAULTS["memcpy_mb"], help="MiB per copy buffer")
    lim.add_argument("--disk-mb", type=positive_int, default=LIMIT_DEFAULTS["disk_mb"], help="MiB of the scratch file")
    lim.add_argument("--repeats", type=positive_int, default=LIMIT_DEFAULTS["repeats"], help="runs per figure (median)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    try:
        args = parse_args(argv)
        commands = {"run": cmd_run, "list": cmd_list, "report": cmd_report, "env": cmd_env, "validate": cmd_validate,
                    "limits": cmd_limits, "envs": cmd_envs, "compare": cmd_compare, "resume": cmd_resume,
                    "rerun": cmd_rerun}
        return commands[args.command](args)
    except UsageError as exc:
        print(f"rlbench: error: {exc}", file=sys.stderr)
        return 2


# -- plan ------------------------------------------------------------------------------------------

def plan(args) -> Suite:
    if args.suite and args.adapter:
        raise UsageError("give either a suite file or --adapter/--env, not both")
    if args.suite:
        suite = load_suite(args.suite, getattr(args, "suite_text", None))
    elif args.adapter and args.env:
        suite = suite_from_flags(args)
    else:
        raise UsageError("rlbench run needs a suite file or --adapter NAME --env ID")
    overrides = {k: v for k, v in (("repeats", args.repeats), ("duration_s", args.duration),
                                   ("warmup_s", args.warmup),
                                   ("timeout_s", args.timeout), ("ray_address", args.ray_address))
                 if v is not None}
    settings = parse_settings("command line", overrides, suite.settings, FLAG_NAMES)
    cells = tuple(replace(c, protocol=tuple((k, v) for k, v in c.protocol if k not in overrides))
                  for c in suite.cells)  # the command line beats a sweep's own [protocol]
    if args.only:
        cells = tuple(c for c in cells if any(fnmatch.fnmatchcase(c.cell_id, g) for g in args.only))
        if not cells:
            raise UsageError(f"--only {' '.join(args.only)} matches no cell (e.g. {suite.cells[0].cell_id})")
    for cell_id in suite.duplicates:
        print(f"rlbench: warning: cell {cell_id} is given more than once; it runs once", file=sys.stderr)
    return replace(suite, settings=settings, cells=cells)


def suite_from_flags(args) -> Suite:
    from rlbench.envs import env_info, typed_env_kwargs
    try:
        sizes = [int(n) for n in args.num_envs.split(",")]
    except ValueError:
        raise UsageError(f"--num-envs {args.num_envs!r} must be comma-separated integers, e.g. 1,4,16") from None
    if any(n < 1 for n in sizes):
        raise UsageError(f"--num-envs {args.num_envs!r}: every size must be >= 1")
    policy = parse_policy(args.policy)
    options, env_kwargs = _pairs("--opt", args.opt), _pairs("--env-kwarg", args.env_kwarg)
    cells = []
    for env_id in args.env:
        info = env_info(env_id)
        try:
            kw = typed_env_kwargs(env_id, env_kwargs)
        except UsageError as exc:
            raise UsageError(f"--env-kwarg: {exc}") from None
        for name in args.adapter:
            registry.get(name)
            for n in sizes:
                cells.append(make_cell("--opt", name, Workload(env_id, n, policy, 0, info.frameskip, kw), options))
    cells, duplicates = merge_duplicates(cells)
    return Suite("adhoc", None, None, Settings(), cells, duplicates=duplicates)


def _pairs(flag, items) -> dict:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"{flag} {item!r} must be KEY=VALUE")
        out[key] = value
    return out


def new_run_id(suite_name: str) -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + "".join(c if c.isalnum() else "-" for c in suite_name)


def open_out_dir(out_dir: str, resume: bool) -> "rundir.RunLock":
    """Create (or, resuming, reopen) the run folder and lock it; refuse, before writing anything else, a
    folder that is neither new nor a run being resumed, and one another run holds."""
    if resume:
        rundir.check_run(out_dir, "resume")
    else:
        rundir.check_new(out_dir)
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out_dir}: cannot create it ({exc.strerror or exc})") from None
    lock = rundir.RunLock(out_dir).acquire()
    if not resume:
        if rundir.is_run(out_dir):  # again, under the lock: another run may have started in between
            lock.release()
            raise UsageError(f"--out {out_dir} already holds a run; give a new folder")
    return lock


def point_latest(out_dir) -> None:
    """reports/latest -> the last run, when the run lives under reports/."""
    parent = os.path.dirname(os.path.abspath(out_dir))
    if os.path.abspath(REPORTS) != parent:
        return
    link = os.path.join(REPORTS, "latest")
    tmp = link + ".tmp"
    if os.path.lexists(tmp):
        os.remove(tmp)
    os.symlink(os.path.basename(os.path.abspath(out_dir)), tmp)
    os.replace(tmp, link)


# -- commands --------------------------------------------------------------------------------------

def cmd_run(args) -> int:
    return run(args)[0]


def cmd_resume(args) -> int:
    rundir.check_run(args.dir, "resume")
    return run(saved_args(args.dir, args), resume=args.dir)[0]


def cmd_rerun(args) -> int:
    rundir.check_run(args.dir, "rerun")
    return run(saved_args(args.dir, args, out=args.out))[0]


def saved_args(run_dir: str, args, out=None) -> argparse.Namespace:
    """The `rlbench run` a folder's plan.json kept, planned from the suite text it kept (not the file,
    which may have changed or be elsewhere)."""
    saved = rundir.read_plan(run_dir)
    kept = saved.get("args") or {}
    return argparse.Namespace(**{k: kept.get(k) for k in PLAN_ARGS}, suite_text=saved.get("suite_text"), out=out,
                              resume=None, no_build=args.no_build, allow_errors=args.allow_errors)


def plan_record(args, suite, run_id: str, env: dict) -> dict:
    """plan.json: what was asked (arguments, suite text) and what it resolved to (settings, cells), and the
    machine: enough to run it again elsewhere, or to resume it here."""
    text = getattr(args, "suite_text", None)
    if args.suite and text is None:
        with open(args.suite, encoding="utf-8") as f:
            text = f.read()
    return _jsonable({"schema": 1, "run_id": run_id, "args": {k: getattr(args, k, None) for k in PLAN_ARGS},
                      "suite_text": text, "settings": suite.settings.__dict__,
                      "cells": [c.cell_id for c in suite.cells],
                      "machine": {k: env.get(k) for k in rundir.MACHINE_KEYS}})


def check_resumable(out_dir: str, record: dict) -> dict:
    """The saved plan, when this run is the same run on the same machine; else a UsageError naming what
    differs."""
    saved = rundir.read_plan(out_dir)
    differs = []
    if saved.get("cells") != record["cells"]:
        gone = [c for c in saved.get("cells", []) if c not in record["cells"]]
        new = [c for c in record["cells"] if c not in saved.get("cells", [])]
        differs.append("cells: " + "; ".join(filter(None, [f"not planned now: {', '.join(gone[:3])}" if gone else "",
                                                            f"new: {', '.join(new[:3])}" if new else "",
                                                            "" if gone or new else "another order"])))
    differs += [f"settings.{d}" for d in rundir.differences(saved.get("settings", {}), record["settings"],
                                                             sorted(record["settings"]))]
    differs += [f"machine.{d}" for d in rundir.differences(saved.get("machine", {}), record["machine"],
                                                            rundir.MACHINE_KEYS)]
    if differs:
        raise UsageError(f"cannot resume {out_dir}: {' | '.join(differs)}")
    return saved


def _jsonable(value):
    return json.loads(json.dumps(value, default=str))


def prepare(suite, build: bool, env: dict) -> dict:
    """Build (once, cached) the environments of adapters that cannot share this one; env.json records
    each one's interpreter and package versions. A build that fails turns its cells into error rows."""
    from rlbench import adapter_envs
    prepared = adapter_envs.prepare({registry.get(c.adapter) for c in suite.cells}, build=build)
    env["adapter_envs"] = {name: p.record or {"status": p.status, "reason": p.reason} for name, p in prepared.items()}
    return prepared


def run(args, resume: str = None) -> tuple:
    """plan -> open the folder -> prepare -> sweep -> export -> summarize; returns (exit code, run folder).

    Exit codes: 0 every row ok or unsupported; 1 an error or timeout row (unless --allow-errors), or rows
    that could not be written (disk full); 2 bad input, nothing written; 130 interrupted."""
    from rlbench.fingerprint import fingerprint, now
    from rlbench.results import ResultSet
    suite = plan(args)
    resume = resume or getattr(args, "resume", None)
    if resume and args.out and os.path.abspath(args.out) != os.path.abspath(resume):
        raise UsageError(f"--out {args.out} and --resume {resume}: a resumed run writes into its own folder")
    run_id = new_run_id(suite.name)
    out_dir = resume or args.out or os.path.join(REPORTS, run_id)
    env = {**fingerprint(), "suite_path": suite.path, "suite_sha256": suite.sha256}  # the text it planned from
    record = plan_record(args, suite, run_id, env)
    done = set()
    if resume:
        saved = check_resumable(resume, record)  # before the lock: a refusal writes nothing
    lock = open_out_dir(out_dir, bool(resume))
    try:
        if resume:
            run_id = saved["run_id"]
            env = {**_read_env(out_dir), "resumed_at": [*_read_env(out_dir).get("resumed_at", []), now()]}
            done = {(r["cell_id"], r["repeat"], bool(r.get("profiled"))) for r in ResultSet.load(out_dir).rows}
        else:
            rundir.write_plan(out_dir, {**record, "run_id": run_id})
            env.update(run_id=run_id, settings=suite.settings.__dict__, cells=len(suite.cells))
        _write_env(out_dir, env)
        point_latest(out_dir)
        return sweep_and_report(args, suite, run_id, out_dir, env, done)
    finally:
        lock.release()


def sweep_and_report(args, suite, run_id, out_dir, env, done) -> tuple:
    from rlbench.fingerprint import now
    from rlbench.results import ResultSet, ResultStore, StoreError
    from rlbench.sweep import run_sweep
    todo = f" ({len(done)} rows kept, running the rest)" if done else ""
    print(f"rlbench: {len(suite.cells)} cells x {suite.settings.repeats} repeats -> {out_dir}{todo}", file=sys.stderr)
    interrupted, store_failed = False, False
    previous = _handle_signals()
    try:
        needs_limits = any(registry.get(c.adapter).kind == "replay" for c in suite.cells)
        if suite.limits["measure"] and needs_limits and "limits" not in env:
            ResultStore(out_dir).close()  # interrupted while measuring, it is still a run (of no rows)
            env["limits"] = measure_limits(out_dir, suite.limits)
            _write_env(out_dir, env)
        envs = prepare(suite, not args.no_build, env)
        _write_env(out_dir, env)
        run_sweep(run_id, suite.name, suite.cells, suite.settings, out_dir, args.profile, envs, done)
    except KeyboardInterrupt:
        interrupted = True
        print("rlbench: interrupted; every finished repeat is kept "
              f"(`rlbench resume {out_dir}` runs the rest)", file=sys.stderr)
    except (StoreError, OSError) as exc:
        store_failed = True
        print(f"rlbench: error: {exc}; every earlier row is kept. Free space, then `rlbench resume {out_dir}` "
              "runs the rest", file=sys.stderr)
    finally:
        _restore_signals(previous)
    try:
        env["ended_at"] = now()
        on_cluster = [r for r in ResultSet.load(out_dir).rows if r.get("cluster")]
        if on_cluster:  # the cluster as the last cell saw it, and where each cell's actors ran
            env["ray_cluster"] = {**on_cluster[-1]["cluster"],
                                  "placements": {r["cell_id"]: r.get("placement") for r in on_cluster}}
        _write_env(out_dir, env)
        results = export(out_dir)
    except OSError as exc:
        print(f"rlbench: error: cannot write the report: {exc.strerror or exc}; `rlbench report {out_dir}` "
              "rebuilds it from results.jsonl", file=sys.stderr)
        return 1 if not interrupted else 130, out_dir
    summarize(results, out_dir)
    failed = [r for r in results.rows if r["status"] in ("error", "timeout")]
    if interrupted:
        return 130, out_dir
    if store_failed:
        return 1, out_dir
    if failed and not getattr(args, "allow_errors", False):
        print(f"rlbench: {len(failed)} row(s) with status error or timeout: exit 1 (--allow-errors: exit 0)",
              file=sys.stderr)
        return 1, out_dir
    return 0, out_dir


HANDLED = ("SIGTERM", "SIGHUP")  # like Ctrl-C: the running cell is killed, every finished row kept


def _handle_signals() -> dict:
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.signal(getattr(signal, sig), _interrupt) for sig in HANDLED}


def _restore_signals(previous: dict) -> None:
    for sig, handler in previous.items():
        signal.signal(getattr(signal, sig), handler)


def _read_env(out_dir) -> dict:
    try:
        with open(os.path.join(out_dir, "env.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def measure_limits(out_dir, sizes: dict) -> dict:
    """The machine limits replay figures are fractions of, measured on this run's filesystem before the
    sweep; a failure is recorded ({"error": ...}) and the sweep runs without them."""
    from rlbench.limits import measure_in_subprocess, summary_line
    print("rlbench: limits: ", end="", file=sys.stderr, flush=True)  # the figures end the line (~15 s)
    try:
        limits = measure_in_subprocess(out_dir, sizes["memcpy_mb"], sizes["disk_mb"], sizes["repeats"])
    except KeyboardInterrupt:
        print(file=sys.stderr)
        raise
    print(summary_line(limits), file=sys.stderr)
    return limits


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def export(out_dir):
    from rlbench.report import reporters
    from rlbench.results import ResultSet
    results = ResultSet.load(out_dir)
    if results.skipped:
        print(f"rlbench: warning: {out_dir}/results.jsonl: line(s) {', '.join(map(str, results.skipped[:10]))} "
              "are not results rows; left out", file=sys.stderr)
    for reporter in reporters():
        reporter.report(results, out_dir)
    return results


def summarize(results, out_dir) -> None:
    from rlbench.report.console import medians_table
    print(medians_table(results))
    counts = {}
    for r in results.rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    print(f"\n{len(results.rows)} rows ({', '.join(f'{v} {k}' for k, v in sorted(counts.items()))})")
    print(f"report: {os.path.join(out_dir, 'index.html')}")


def cmd_report(args) -> int:
    if not os.path.isdir(args.dir):
        raise UsageError(f"report: {args.dir} is not a directory")
    if not os.path.exists(os.path.join(args.dir, "results.jsonl")):
        raise UsageError(f"report: no results.jsonl in {args.dir} (is it a run directory?)")
    lock = rundir.RunLock(args.dir).acquire()  # not while a run is still writing it
    try:
        results = export(args.dir)
    except OSError as exc:
        print(f"rlbench: error: cannot write the report: {exc.strerror or exc}", file=sys.stderr)
        return 1
    finally:
        lock.release()
    summarize(results, args.dir)
    return 0


def cmd_validate(args) -> int:
    from rlbench.report.validation import validation_text
    from rlbench.validate import validation_rows
    from rlbench.results import ResultSet
    if args.from_dir:
        if not os.path.isdir(args.from_dir):
            raise UsageError(f"validate --from {args.from_dir}: not a directory")
        rc, out_dir = 0, args.from_dir
        export(out_dir)
    else:
        args.suite, args.adapter = VALIDATE_SUITE, None
        rc, out_dir = run(args)
    results = ResultSet.load(out_dir)
    rows = validation_rows(results)
    print("\n" + (validation_text(rows) if rows else "no cell of this run matches a validation check"))
    print(f"validation: {os.path.join(out_dir, 'validation.csv')}")
    return rc


def cmd_list(args) -> int:
    from rlbench.adapter_envs import environment_of
    adapters = registry.discover()
    for name in sorted(adapters):
        cls = adapters[name]
        own = environment_of(cls)
        if own:
            state = f"own environment '{own.name}': {own.state()}"
        else:
            reason = cls().available()
            state = "available" if reason is None else "unavailable: " + reason
        print(f"{name:<18} {cls.kind:<11} {state}")
        print(f"    {cls.description}")
        for o in cls.options:
            choices = f" [{'|'.join(map(str, o.choices))}]" if o.choices else ""
            valid = f"; {o.valid}" if o.type in (int, float) else ""
            print(f"    --opt {o.name}=<{o.type.__name__}> (default {o.default}{valid}){choices}  {o.help}")
    for label, err in registry.LOAD_ERRORS.items():
        print(f"{label}: failed to load: {err}")
    return 0


def cmd_limits(args) -> int:
    from rlbench.limits import measure_in_subprocess
    os.makedirs(args.out_dir, exist_ok=True)
    limits = measure_in_subprocess(args.out_dir, args.memcpy_mb, args.disk_mb, args.repeats)
    print(json.dumps(limits, indent=2))
    return 1 if "error" in limits else 0


def cmd_compare(args) -> int:
    from rlbench.compare import compare, parse_threshold
    from rlbench.report import compare as compare_report
    from rlbench.results import ResultSet
    threshold = parse_threshold(args.threshold)
    if not 0 < args.alpha < 1:
        raise UsageError(f"--alpha {args.alpha:g} must be between 0 and 1")
    base, new = ResultSet.load(args.base), ResultSet.load(args.new)
    result = compare(base, new, threshold, args.alpha)
    paths = compare_report.write(result, args.base, args.new, args.out or args.new)
    for r in result.rows:
        if r["verdict"] not in ("same",):
            print(f"{r['verdict']:<15} {r['cell_id']}  {r['reason'] or ''}")
    print(f"{len(result.rows)} cells: {result.counts_label}; "
          f"{len(result.regressions)} regression(s) beyond {threshold:.0%} at alpha {args.alpha:g}")
    print(f"comparison: {paths[1]}")
    return 1 if result.regressions else 0


def cmd_envs(args) -> int:
    from rlbench import adapter_envs
    known = adapter_envs.needed(registry.discover().values())
    unknown = [n for n in args.names if n not in known]
    if unknown:
        raise UsageError(f"unknown environment '{unknown[0]}' (valid: {', '.join(sorted(known))})")
    chosen = {n: e for n, e in known.items() if not args.names or n in args.names}
    failed = 0
    for name, env in sorted(chosen.items()):
        if args.build and os.path.exists(env.requirements):
            try:
                env.ensure()
            except adapter_envs.EnvBuildError as exc:
                print(f"rlbench: {exc}", file=sys.stderr)
                failed += 1
        print(f"{name:<15} {', '.join(env.adapters):<28} {env.state()}  ({env.dir})")
    return 1 if failed else 0


def cmd_env(args) -> int:
    from rlbench.fingerprint import fingerprint
    print(json.dumps(fingerprint(), indent=2))
    return 0


def _write_env(out_dir, env) -> None:
    from rlbench.report.writer import write_atomic
    write_atomic(os.path.join(out_dir, "env.json"), json.dumps(env, indent=2, default=str) + "\n")


if __name__ == "__main__":
    sys.exit(main())
