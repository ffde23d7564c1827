"""What each `rlbench` command does, from its parsed arguments: rlbench.cli only parses and dispatches here.
`rlbench run` itself is rlbench.pipeline, `rlbench tune` rlbench.tuning; the others are short enough to
live together."""
import json
import math
import os
import sys
import time
from dataclasses import replace

import rlbench
from rlbench import pipeline, registry
from rlbench.errors import UsageError
from rlbench.planning.request import RunRequest, TuneRequest
from rlbench.running import rundir

VALIDATE_SUITE = os.path.join(rlbench.ROOT, "suites", "validate.toml")


def run(request: RunRequest, resume: str = None) -> tuple:
    """(exit code, run folder) of `rlbench run` asked this."""
    return pipeline.run(request, resume)


def cmd_run(args) -> int:
    return run(RunRequest.from_flags(args))[0]


def cmd_tune(args) -> int:
    from rlbench.tuning import tune
    return tune(TuneRequest.from_flags(args))[0]


def tune_folder(plan: dict) -> bool:
    """Whether a run folder's plan is a tune's (a run's plan.json older than `command` is a run's)."""
    return plan.get("command", "run") == "tune"


def cmd_calibrate(args) -> int:
    """Each strategy's env steps/s on the zero-cost synthetic env, cached for `rlbench tune`'s predictions: run
    ahead, a first tune reads it instead of calibrating (which it does apart from its budget). A strategy whose
    cells failed or outlived their bound is listed with the reason: tune races it without a prediction."""
    import time

    from rlbench.report.format import rate
    from rlbench.tuning import calibrate, prepare
    from rlbench.tuning.candidates import Space, cpus_here
    from rlbench.workload import PolicySpec, Workload
    named = [a for item in (args.adapters or []) for a in item.split(",") if a]
    cell_s, startup_s = calibrate.bounds()
    cpus = cpus_here()
    space = Space(Workload(calibrate.ENV_ID, 1, PolicySpec()), named, args.max_envs, cpus)
    ns = calibrate.sizes(cpus, args.max_envs)
    envs = prepare(space.adapters)
    t0 = time.monotonic()
    figures, path, rows = calibrate.calibrate(space.adapters, ns, envs, force=args.force, by="rlbench calibrate")
    took = time.monotonic() - t0
    for adapter in space.adapters:
        seen = figures.get(adapter, {})
        cells = ", ".join(f"n={n}: {rate(seen.get(str(n), {}).get('steps_per_s'))}" for n in ns)
        why = calibrate.failure(figures, adapter)
        print(f"{adapter:<22} {cells}" + (f"  (no prediction: {why[:120]})" if why else ""))
    print(f"env steps/s on {calibrate.ENV_ID} (step_cost_us=0); {len(rows)} measured now in {took:.0f} s, each cell "
          f"within {cell_s:g} s ({cell_s + startup_s:g} s for one that starts a Ray cluster); cache: {path}")
    return 0


def cmd_resume(args) -> int:
    """A run goes on with the repeats it misses; a tune, with its search, in the budget it has left."""
    rundir.check_run(args.dir, "resume")
    plan = rundir.read_plan(args.dir)
    if tune_folder(plan):
        from rlbench.tuning import tune
        return tune(TuneRequest.from_plan(plan), resume=args.dir)[0]
    return run(saved_request(plan, args), resume=args.dir)[0]


def cmd_rerun(args) -> int:
    rundir.check_run(args.dir, "rerun")
    plan = rundir.read_plan(args.dir)
    if tune_folder(plan):
        from rlbench.tuning import tune
        return tune(TuneRequest.from_plan(plan, out=args.out))[0]
    return run(saved_request(plan, args, out=args.out))[0]


def saved_request(plan: dict, args, out=None) -> RunRequest:
    """The `rlbench run` a folder's plan.json kept, planned from the suite text it kept (not the file,
    which may have changed or be elsewhere)."""
    return RunRequest.from_plan(plan, out=out, no_build=args.no_build, allow_errors=args.allow_errors)


def cmd_report(args) -> int:
    if not os.path.isdir(args.dir):
        raise UsageError(f"report: {args.dir} is not a directory")
    if not os.path.exists(os.path.join(args.dir, "results.jsonl")):
        raise UsageError(f"report: no results.jsonl in {args.dir} (is it a run directory?)")
    lock = rundir.RunLock(args.dir).acquire()  # not while a run is still writing it
    try:
        if args.format == "pytest-benchmark":
            from rlbench import report
            from rlbench.report.pytest_benchmark import export_pytest_benchmark
            from rlbench.results.model import ResultSet
            paths = report.export(ResultSet.load(args.dir), args.dir, [export_pytest_benchmark])
            print(f"pytest-benchmark: {paths[0]}")
            return 0
        view = rundir.rebuild_report(args.dir)
    except OSError as exc:
        print(f"rlbench: error: cannot write the report: {exc.strerror or exc}", file=sys.stderr)
        return 1
    finally:
        lock.release()
    pipeline.print_summary(view, args.dir)
    return 0


def cmd_validate(args) -> int:
    """Run suites/validate.toml (or read --from runs): the checks against published tables, and the claims matrix
    of the source papers over the runs (claims.csv and claims.md)."""
    from rlbench.families.validation import claims
    from rlbench.families.validation.checks import validation_rows
    from rlbench.families.validation.report import claims_markdown, claims_text, validation_text
    from rlbench.report.csv_reporter import to_csv
    from rlbench.report.writer import write_atomic
    from rlbench.results.model import ResultSet
    if args.from_dir:
        for d in args.from_dir:
            if not os.path.isfile(os.path.join(d, "results.jsonl")):
                raise UsageError(f"validate --from {d}: not a run folder (valid: folders holding results.jsonl)")
        rc, dirs = 0, args.from_dir
        if len(dirs) == 1:
            rundir.rebuild_report(dirs[0])
    else:
        rc, out_dir = run(replace(RunRequest.from_flags(args), suite=VALIDATE_SUITE, adapter=()))
        dirs = [out_dir]
    runs = [ResultSet.load(d) for d in dirs]
    for d, results in zip(dirs, runs):
        rows = validation_rows(results)
        if rows:
            print(f"\n{d}:\n{validation_text(rows)}")
    matrix = claims.matrix(runs)
    print("\n" + claims_text(matrix))
    out = args.claims_out or dirs[0]
    os.makedirs(out, exist_ok=True)
    files = {"claims.csv": to_csv(matrix, claims.COLUMNS), "claims.md": claims_markdown(matrix, runs, dirs)}
    for name, text in files.items():
        write_atomic(os.path.join(out, name), text)
    print(f"claims: {os.path.join(out, 'claims.md')} (and claims.csv)")
    return rc


def cmd_list(args) -> int:
    from rlbench.running.adapter_envs import environment_of
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
    from rlbench.machine.limits import measure_in_subprocess
    os.makedirs(args.out_dir, exist_ok=True)
    limits = measure_in_subprocess(args.out_dir, args.memcpy_mb, args.disk_mb, args.repeats)
    print(json.dumps(limits, indent=2))
    return 1 if "error" in limits else 0


def cmd_compare(args) -> int:
    from rlbench.report import compare_page as compare_report
    from rlbench.report.view import CompareView
    from rlbench.results.compare import compare, parse_threshold, ratio_label
    from rlbench.results.model import ResultSet
    threshold = parse_threshold(args.threshold)
    if not 0 < args.alpha < 1:
        raise UsageError(f"--alpha {args.alpha:g} must be between 0 and 1")
    base, new = ResultSet.load(args.base), ResultSet.load(args.new)
    result = compare(base, new, threshold, args.alpha)
    view = CompareView(result, args.base, args.new, base, new)
    paths = compare_report.write_view(view, args.out or args.new)
    for label, b, n, changed in view.winners:
        if changed:
            print(f"winner changed  {label}: base {b.winner.text}, new {n.winner.text}")
    for r in result.rows:
        if r["verdict"] not in ("same",):
            ratio = ratio_label(r)
            print(f"{r['verdict']:<15} {r['cell_id']}  {r['reason'] or ''}" + (f"; new/base {ratio}" if ratio else ""))
    print(f"{len(result.rows)} cells: {result.counts_label}; "
          f"{len(result.regressions)} regression(s) beyond {threshold:.0%} at alpha {args.alpha:g}")
    print(f"comparison: {paths[1]}")
    return 1 if result.regressions else 0


def cmd_envs(args) -> int:
    from rlbench.running import adapter_envs
    known = adapter_envs.needed(registry.discover().values())
    unknown = [n for n in args.names if n not in known]
    if unknown:
        raise UsageError(f"unknown environment '{unknown[0]}' (valid: {', '.join(sorted(known))})")
    chosen = {n: e for n, e in known.items() if not args.names or n in args.names}
    if args.jobs < 0:
        raise UsageError(f"--jobs {args.jobs}: a count of builds at once, >= 1 (0: one per environment)")
    failed = []
    if args.build:
        todo = [e for _, e in sorted(chosen.items()) if os.path.exists(e.requirements)]
        failed = adapter_envs.build_all(todo, args.jobs or min(len(todo), (os.cpu_count() or 1) + 1) or 1)
    for name, env in sorted(chosen.items()):
        print(f"{name:<15} {', '.join(env.adapters):<28} {env.state()}  ({env.dir})")
    return 1 if failed else 0


def cmd_env(args) -> int:
    from rlbench.machine.fingerprint import fingerprint
    print(json.dumps(fingerprint(), indent=2))
    return 0


def cmd_history(args) -> int:
    return {"add": _history_add, "show": _history_show, "check": _history_check}[args.history_command](args)


def _history_add(args) -> int:
    from rlbench.results.history import History, run_folders
    folders = run_folders(args.dirs)
    counts = {}
    with History(args.db) as history:
        for path in folders:
            added = history.add(path, tag=args.tag)
            counts[added.outcome] = counts.get(added.outcome, 0) + 1
            print(f"{added.outcome:<9} {path}" + (f" ({added.repeats} repeats)" if added.repeats else "")
                  + (f": {added.why}" if added.why else ""))
    outcomes = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    print(f"{len(folders)} run(s): {outcomes}; history: {args.db}")
    return 0


def _series(history, suite, machine_class, alpha):
    """The history's points and, per series, its noise and change points."""
    from rlbench.results.changes import SERIES, change_points, noise, points
    pts = points(history.repeats(suite, machine_class))
    noises = noise(pts)
    changes = {key: change_points(series.reset_index(drop=True), noises[key].sd, alpha)
               for key, series in pts.groupby(list(SERIES), sort=False)}
    return pts, noises, changes


def _history_show(args) -> int:
    from rlbench.report.history_page import export_history, open_regressions
    from rlbench.report.writer import write_files
    from rlbench.results.history import History
    with History(args.db, create=False) as history:
        suites, machines = history.suites(), history.machines()
        if args.suite and args.suite not in suites:
            raise UsageError(f"history show: no suite {args.suite!r} in {args.db} (valid: {', '.join(suites)})")
        cls = _machine_class(args.machine, machines) if args.machine else None
        pts, noises, changes = _series(history, args.suite, cls, args.alpha)
    os.makedirs(args.out, exist_ok=True)
    for suite in sorted(pts["suite"].unique()):
        mine = {k: v for k, v in changes.items() if k[0] == suite}
        paths = write_files(args.out, export_history(suite, pts[pts["suite"] == suite], mine, noises))
        found = open_regressions(mine, machines)
        print(f"{suite}: {pts[pts['suite'] == suite]['cell_id'].nunique()} cells, "
              f"{sum(len(c) for c in mine.values())} change point(s), {len(found)} open regression(s): {paths[-1]}")
    return 0


def _machine_class(given: str, machines: dict) -> str:
    """A machine class by its id or a part of its label that names one class."""
    if given in machines:
        return given
    hits = [c for c, label in machines.items() if given.lower() in label.lower()]
    if len(hits) != 1:
        valid = "; ".join(f"{c} ({label})" for c, label in machines.items())
        raise UsageError(f"history: --machine {given!r} names {len(hits)} machine classes (valid: {valid})")
    return hits[0]


def _confirm(args, folder, rows, slow, past, threshold) -> None:
    """The cells found slower run again (the run's own plan, only those cells, into a confirm-N folder beside it)
    and checked again: a cell stays slower only where its second run is too, as a host's passing hiccup (these
    VMs lose 20-30% for a minute now and then) does not last into the next run. The second run's rows are
    matched to the first's by their place in the plan (cell_index)."""
    import glob

    from rlbench.results.changes import check, noise, points
    from rlbench.results.history import History
    from rlbench.results.store import RESULTS, read_rows
    plan = rundir.read_plan(folder)
    index = {r["cell_id"]: r["cell_index"] for r in read_rows(os.path.join(folder, RESULTS)) if r["cell_id"] in slow}
    planned = {plan["cells"][i]: cell for cell, i in index.items()}
    base = args.out or folder
    out = next(os.path.join(base, f"confirm-{k}") for k in range(1, 1000)
               if not os.path.exists(os.path.join(base, f"confirm-{k}")))
    print(f"confirming {len(slow)} slower cell(s) in a second run: {out}")
    run(RunRequest.from_plan(plan, out=out, only=tuple(glob.escape(c) for c in planned), allow_errors=True))
    with History(":memory:") as scratch:
        scratch.add(out)
        again = points(scratch.repeats())
    again["cell_id"] = again["cell_id"].map(lambda c: planned.get(c, c))
    second = {r["cell_id"]: r for r in check(past, again, noise(past), args.alpha, threshold, args.window)}
    for r in rows:
        if r["verdict"] != "slower":
            continue
        c = second.get(r["cell_id"])
        r["confirm_ratio"] = c["ratio"] if c else None
        if c is None or c["verdict"] != "slower":
            again_text = f"{c['ratio'] - 1:+.1%}" if c and c["ratio"] is not None else "no ok repeat"
            r["verdict"], r["reason"] = "same", f"{r['reason']}; not in its confirmation run ({again_text})"


def _history_check(args) -> int:
    from rlbench.report.csv_reporter import to_csv
    from rlbench.report.writer import write_files
    from rlbench.results.changes import CHECK_COLUMNS, VERDICTS, check, noise, points
    from rlbench.results.compare import parse_threshold
    from rlbench.results.history import History, run_folders
    threshold = parse_threshold(args.threshold)
    if not 0 < args.alpha < 1:
        raise UsageError(f"--alpha {args.alpha:g} must be between 0 and 1")
    folders = run_folders([args.dir])
    if len(folders) != 1:
        raise UsageError(f"history check: {args.dir!r} holds {len(folders)} runs (valid: one run folder)")
    folder = folders[0]
    with History(":memory:") as scratch:
        scratch.add(folder)
        new = points(scratch.repeats())
        statuses = scratch.db.execute("SELECT cell_id, max(status = 'ok') FROM repeats GROUP BY cell_id").fetchall()
    if new.empty:
        raise UsageError(f"history check: {folder!r} has no ok repeat to check")
    suite, cls = new["suite"].iloc[0], new["machine_class"].iloc[0]
    with History(args.db, create=False) as history:
        past = points(history.repeats(suite, cls))
    past = past[past["run_key"] != new["run_key"].iloc[0]]
    rows = check(past, new, noise(past), args.alpha, threshold, args.window,
                 failed=tuple(c for c, ok in statuses if not ok))
    for r in rows:
        r["first_verdict"] = r["verdict"]
    slow = [r["cell_id"] for r in rows if r["verdict"] == "slower"]
    if args.confirm and slow:
        _confirm(args, folder, rows, slow, past, threshold)
    os.makedirs(args.out or folder, exist_ok=True)
    path = write_files(args.out or folder, {"history-check.csv": to_csv(rows, CHECK_COLUMNS).encode()})[0]
    for r in rows:
        if r["verdict"] != "same":
            print(f"{r['verdict']:<11} {r['cell_id']}  {r['reason']}")
    counts = {}
    for r in rows:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    failed = [r for r in rows if VERDICTS[r["verdict"]]]
    print(f"{len(rows)} cells against the history of {suite} on this machine class: "
          + ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
          + f"; suite: {'REGRESSED' if failed else 'ok'} (alpha {args.alpha:g} over the cells, Holm)")
    print(f"check: {path}")
    if args.add:
        with History(args.db) as history:
            history.add(folder)
    return 1 if failed else 0


def cmd_bisect(args) -> int:
    """The first commit between --good and --bad, or the first released version of --package in --versions, at
    which CELL got slower; every run into the history."""
    from rlbench.bisect import Bisect, CommitRuns, VersionRuns, path_between
    from rlbench.results.history import History
    if not os.path.isfile(args.suite):
        raise UsageError(f"bisect: no suite file {args.suite!r} (valid: a suite file, e.g. suites/quick.toml)")
    run_args = [a for k, v in (("--repeats", args.repeats), ("--duration", args.duration)) if v is not None
                for a in (k, str(v))]
    out = args.out or os.path.join(rundir.REPORTS, "bisect", time.strftime("%Y%m%d-%H%M%S"))
    if os.path.isdir(out) and os.listdir(out):
        raise UsageError(f"bisect: --out {out} is not empty (valid: a new or empty folder; each bisect measures anew)")
    if args.package:
        from rlbench.running.version_envs import released
        if args.good or args.bad or not args.versions or ".." not in args.versions:
            raise UsageError(f"bisect: --package {args.package} takes --versions FIRST..LAST (e.g. 1.0.0..1.3.0), "
                             "not --good/--bad")
        measure, what = VersionRuns(args.package, args.suite, args.cell, out, run_args), f"{args.package} version"
        points = released(args.package, *args.versions.split("..", 1))
    else:
        if not (args.good and args.bad) or args.versions:
            raise UsageError("bisect: give --good REV --bad REV (commits), or --package NAME --versions FIRST..LAST")
        points = path_between(args.repo, args.good, args.bad)
        measure, what = CommitRuns(args.repo, args.suite, args.cell, out, run_args), "commit"
    limit = math.ceil(math.log2(max(len(points) - 1, 1))) + 2
    print(f"bisect: {len(points) - 1} {what}(s) after {points[0][:12]} up to {points[-1][:12]}: at most {limit} "
          f"runs of {args.cell}")
    with History(args.db) as history:
        found, measured, midpoint = Bisect(args.cell, measure, history.add).run(points, args.alpha)
    named = f"{args.package} {found}" if args.package else f"commit {found[:12]} ({git_subject(args.repo, found)})"
    print(f"bisect: first slow {named} after {len(measured)} runs; slow below {midpoint:,.0f} steps/s; runs in "
          f"{out}, added to {args.db}")
    return 0


def git_subject(repo: str, commit: str) -> str:
    from rlbench.bisect import git
    return git(repo, "show", "-s", "--format=%s", commit)
