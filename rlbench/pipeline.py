"""`rlbench run`, stage by stage, on the lifecycle every measuring command shares (rlbench.running.session):
plan the cells, open the run folder, prepare what the cells need, sweep them (a fresh process per cell and
repeat), export the reports and summarize. Each stage is one call here; what it does lives in its own module.

Exit codes: 0 every row ok or unsupported; 1 an error, timeout or lost row (unless --allow-errors), or rows
that could not be written (disk full); 2 bad input, nothing written; 130 interrupted."""
import os
import sys

from rlbench.planning.drop import drop_impossible
from rlbench.planning.flags import plan_from_args
from rlbench.running.session import Job, Session, session


def run(args, resume: str = None) -> tuple:
    """(exit code, run folder) of the rlbench.planning.request.RunRequest `args`.
    Cells that cannot run anywhere (an adapter's supports() says why) leave the plan first; none left is a
    UsageError, before anything is written."""
    suite, dropped = drop_impossible(plan_from_args(args))
    dropped = [d.to_dict() for d in dropped]
    job = Job(suite.name, "run", suite.settings, args.planned(), suite.cells, suite_text(args), args.out,
              resume or args.resume, {"dropped": dropped})
    with session(job) as s, s.open(suite_path=suite.path, suite_sha256=suite.sha256, cells=len(suite.cells),
                                   dropped=dropped):
        todo = f" ({len(s.done)} rows kept, running the rest)" if s.done else ""
        print(f"rlbench: {len(suite.cells)} cells x {suite.settings.repeats} repeats -> {s.path}{todo}",
              file=sys.stderr)
        envs = s.prepare(suite, build=not args.no_build)
        sweep(suite, s, envs, args.profile)
    if s.view is not None:
        print_summary(s.view, s.path)
    return s.exit_code(args.allow_errors), s.path


def suite_text(args) -> str:
    """The suite's text plan.json keeps (resume and rerun plan from it, not from the file, which may change)."""
    if args.suite and args.suite_text is None:
        with open(args.suite, encoding="utf-8") as f:
            return f.read()
    return args.suite_text


def sweep(suite, s: Session, envs, profile: bool) -> None:
    """Every (cell, repeat) not done, a fresh process each, repeats interleaved (rlbench.running.sweep)."""
    from rlbench.running.sweep import SweepRequest, run_sweep
    run_sweep(SweepRequest(s.run_id, suite.name, tuple(suite.cells), suite.settings, s.path, profile, envs,
                           frozenset(s.done), cluster=s.cluster))


def print_summary(view, out_dir) -> None:
    """The medians table, the row count and the report's path, then the answer: each family's headline
    sentences (rlbench.contract.Family.headlines), last."""
    from rlbench.report.console import medians_table
    print(medians_table(view))
    counts = {}
    for r in view.results.runs:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    print(f"\n{len(view.results.runs)} rows ({', '.join(f'{v} {k}' for k, v in sorted(counts.items()))})")
    page = os.path.join(out_dir, "index.html")
    print(f"report: {page if os.path.exists(page) else os.path.join(out_dir, 'results.csv')}")
    lines = view.headlines
    if lines:
        print("\nSummary")
        for line in lines:
            print(f"  {line}")
