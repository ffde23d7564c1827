"""`rlbench`: the command line, its arguments and which command runs; `rlbench run` itself is
rlbench.pipeline."""
import argparse
import json
import os
import sys

import rlbench
from rlbench import pipeline, registry
from rlbench.errors import UsageError
from rlbench.machine.limits import DEFAULTS as LIMIT_DEFAULTS
from rlbench.machine.limits import positive_int
from rlbench.pipeline import export, summarize
from rlbench.running import rundir

REPORTS = rundir.REPORTS
# what a run keeps of its command line (plan.json), enough to plan it again: resume, rerun
PLAN_ARGS = ("suite", "adapter", "env", "num_envs", "policy", "opt", "env_kwarg", "repeats", "duration", "warmup",
             "timeout", "only", "profile", "ray_address")
VALIDATE_SUITE = os.path.join(rlbench.ROOT, "suites", "validate.toml")


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
    rep.add_argument("--format", choices=("html", "pytest-benchmark"), default="html",
                     help="html: results.csv, summary.csv, index.html and the other views (default); "
                          "pytest-benchmark: only DIR/pytest-benchmark.json, for `pytest-benchmark compare`")
    tun = sub.add_parser("tune", help="race every strategy that can step this env here and recommend the fastest")
    tun.add_argument("--env", required=True, help="env id: registered gymnasium id, module:EnvId-v0 or "
                                                  "package.module:make_env")
    tun.add_argument("--env-kwarg", action="append", default=[], metavar="KEY=VALUE", help="env argument")
    tun.add_argument("--policy", default="random", help="random | fixed_cost:cost_us=100 | mlp:... | module:function")
    tun.add_argument("--budget", default="10m", help="wall-clock budget of the whole search (default 10m; 90s, 1h)")
    tun.add_argument("--max-envs", type=positive_int, help="largest num_envs tried (default max(16, 4 x cores))")
    tun.add_argument("--adapters", action="append", metavar="A,B", help="race only these adapters (default: every "
                                                                        "env-stepping adapter available here)")
    tun.add_argument("--out", help="run directory (default reports/<run-id>)")
    sub.add_parser("env", help="print this machine's fingerprint (env.json)")
    cmp = sub.add_parser("compare", help="compare two runs; exit 1 when a cell is slower beyond the threshold "
                                         "and significantly so")
    cmp.add_argument("base", metavar="BASE_DIR")
    cmp.add_argument("new", metavar="NEW_DIR")
    cmp.add_argument("--threshold", default="10%", help="relative slowdown that counts (default 10%%)")
    cmp.add_argument("--alpha", type=float, default=0.05, help="significance level of the U test (default 0.05)")
    cmp.add_argument("--out", help="where compare.csv and compare.html go (default NEW_DIR)")
    envs = sub.add_parser("envs", help="adapters' own environments (Sample Factory, Reverb, Brax, RLlib): state, "
                                       "or build")
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
    if os.getcwd() not in sys.path and "" not in sys.path:  # a user's env or policy module imports from here,
        sys.path.insert(0, os.getcwd())                      # as under `python -m` (and in every cell)
    try:
        args = parse_args(argv)
        commands = {"run": cmd_run, "list": cmd_list, "report": cmd_report, "env": cmd_env, "validate": cmd_validate,
                    "limits": cmd_limits, "envs": cmd_envs, "compare": cmd_compare, "resume": cmd_resume,
                    "rerun": cmd_rerun, "tune": cmd_tune}
        return commands[args.command](args)
    except UsageError as exc:
        print(f"rlbench: error: {exc}", file=sys.stderr)
        return 2


# -- commands --------------------------------------------------------------------------------------

def run(args, resume: str = None) -> tuple:
    """(exit code, run folder) of `rlbench run` with these arguments."""
    return pipeline.run(args, PLAN_ARGS, resume)


def cmd_run(args) -> int:
    return run(args)[0]


def cmd_tune(args) -> int:
    from rlbench.tuning import tune
    return tune(args)[0]


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
        results = export(args.dir)
    except OSError as exc:
        print(f"rlbench: error: cannot write the report: {exc.strerror or exc}", file=sys.stderr)
        return 1
    finally:
        lock.release()
    summarize(results, args.dir)
    return 0


def cmd_validate(args) -> int:
    from rlbench.families.validation.checks import validation_rows
    from rlbench.families.validation.report import validation_text
    from rlbench.results.model import ResultSet
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
    from rlbench.report import compare as compare_report
    from rlbench.results.compare import compare, parse_threshold, ratio_label
    from rlbench.results.model import ResultSet
    threshold = parse_threshold(args.threshold)
    if not 0 < args.alpha < 1:
        raise UsageError(f"--alpha {args.alpha:g} must be between 0 and 1")
    base, new = ResultSet.load(args.base), ResultSet.load(args.new)
    result = compare(base, new, threshold, args.alpha)
    paths = compare_report.write(result, args.base, args.new, args.out or args.new)
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


if __name__ == "__main__":
    sys.exit(main())
