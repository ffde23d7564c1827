"""`bisect SUITE CELL`: the first commit, or released version of a package, at which a cell got slower
(rlbench.bisect measures each point; every run goes into the history)."""
import math
import os
import time
from dataclasses import dataclass

import rlbench
from rlbench.commands import flags
from rlbench.commands.command import Command
from rlbench.errors import UsageError
from rlbench.machine.limits import positive_int
from rlbench.planning.request import Request, flag
from rlbench.running import rundir


@dataclass(frozen=True)
class BisectRequest(Request):
    suite: str = flag("the suite file the cell is in", positional=True, metavar="SUITE")
    cell: str = flag("the cell's id (rlbench run --only)", positional=True, metavar="CELL")
    good: str = flag("a commit at which the cell was fast")
    bad: str = flag("a later commit at which it is slow")
    package: str = flag("bisect this library's released versions instead of commits")
    versions: str = flag("with --package: the fast version and a later slow one, e.g. 1.0.0..1.3.0",
                         metavar="FIRST..LAST")
    repo: str = flag("the project checkout whose commits are measured (default: this rlbench's)", rlbench.ROOT)
    repeats: int = flag("repeats per run (default: the suite's)", type=positive_int)
    duration: float = flag("timed seconds per repeat (default: the suite's)")
    alpha: float = flags.alpha("the ends must differ at this level")
    out: str = flag("where the runs go, a new or empty folder (default reports/bisect/<time>)")
    db: str = flags.db()


def bisect(request: BisectRequest) -> int:
    """The first commit between --good and --bad, or the first released version of --package in --versions, at
    which CELL got slower; every run into the history."""
    from rlbench.bisect import Bisect, CommitRuns, VersionRuns, path_between
    from rlbench.results.history import History
    if not os.path.isfile(request.suite):
        raise UsageError(f"bisect: no suite file {request.suite!r} (valid: a suite file, e.g. suites/quick.toml)")
    run_args = [a for k, v in (("--repeats", request.repeats), ("--duration", request.duration)) if v is not None
                for a in (k, str(v))]
    out = request.out or os.path.join(rundir.REPORTS, "bisect", time.strftime("%Y%m%d-%H%M%S"))
    if os.path.isdir(out) and os.listdir(out):
        raise UsageError(f"bisect: --out {out} is not empty (valid: a new or empty folder; each bisect measures anew)")
    if request.package:
        from rlbench.running.version_envs import released
        if request.good or request.bad or not request.versions or ".." not in request.versions:
            raise UsageError(f"bisect: --package {request.package} takes --versions FIRST..LAST (e.g. 1.0.0..1.3.0), "
                             "not --good/--bad")
        measure = VersionRuns(request.package, request.suite, request.cell, out, run_args)
        what, points = f"{request.package} version", released(request.package, *request.versions.split("..", 1))
    else:
        if not (request.good and request.bad) or request.versions:
            raise UsageError("bisect: give --good REV --bad REV (commits), or --package NAME --versions FIRST..LAST")
        points = path_between(request.repo, request.good, request.bad)
        measure, what = CommitRuns(request.repo, request.suite, request.cell, out, run_args), "commit"
    limit = math.ceil(math.log2(max(len(points) - 1, 1))) + 2
    print(f"bisect: {len(points) - 1} {what}(s) after {points[0][:12]} up to {points[-1][:12]}: at most {limit} "
          f"runs of {request.cell}")
    db = flags.db_path(request.db)
    with History(db) as history:
        found, measured, midpoint = Bisect(request.cell, measure, history.add).run(points, request.alpha)
    named = (f"{request.package} {found}" if request.package
             else f"commit {found[:12]} ({git_subject(request.repo, found)})")
    print(f"bisect: first slow {named} after {len(measured)} runs; slow below {midpoint:,.0f} steps/s; runs in "
          f"{out}, added to {db}")
    return 0


def git_subject(repo: str, commit: str) -> str:
    from rlbench.bisect import git
    return git(repo, "show", "-s", "--format=%s", commit)


COMMANDS = (
    Command("bisect", "the first commit between --good and --bad, or the first released version of --package, at "
                      "which CELL got slower (each commit measured in a git worktree, each version in its own "
                      "environment; every run added to the history)", BisectRequest, bisect),
)
