"""What each `rlbench` command does, from its parsed arguments: rlbench.cli only parses and dispatches here.
`rlbench run` itself is rlbench.pipeline, `rlbench tune` rlbench.tuning; the others are short enough to
live together."""
import json
import os
import sys
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
    from rlbench.families.validation.checks import validation_rows
    from rlbench.families.validation.report import validation_text
    from rlbench.results.model import ResultSet
    if args.from_dir:
        if not os.path.isdir(args.from_dir):
            raise UsageError(f"validate --from {args.from_dir}: not a directory")
        rc, out_dir = 0, args.from_dir
        rundir.rebuild_report(out_dir)
    else:
        rc, out_dir = run(replace(RunRequest.from_flags(args), suite=VALIDATE_SUITE, adapter=()))
    results = ResultSet.load(out_dir)
    rows = validation_rows(results)
    print("\n" + (validation_text(rows) if rows else "no cell of this run matches a validation check"))
    print(f"validation: {os.path.join(out_dir, 'validation.csv')}")
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
    from rlbench.machine.fingerprint import fingerprint
    print(json.dumps(fingerprint(), indent=2))
    return 0
