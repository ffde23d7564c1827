"""The commands on run folders: `run` (rlbench.pipeline), `resume` and `rerun` (a folder's plan.json, a run's or a
tune's), `validate` (suites/validate.toml and the claims matrix) and `report` (the reports rebuilt)."""
import os
import sys
from dataclasses import dataclass, fields, replace

import rlbench
from rlbench import pipeline
from rlbench.commands.command import Command
from rlbench.errors import UsageError
from rlbench.planning.request import Request, RunRequest, TuneRequest, allow_errors, flag, no_build, run_dir
from rlbench.running import rundir

VALIDATE_SUITE = os.path.join(rlbench.ROOT, "suites", "validate.toml")


def tune_folder(plan: dict) -> bool:
    """Whether a run folder's plan is a tune's (a run's plan.json older than `command` is a run's)."""
    return plan.get("command", "run") == "tune"


def run(request: RunRequest) -> int:
    return pipeline.run(request)[0]


@dataclass(frozen=True)
class ResumeRequest(Request):
    """`resume DIR`: the folder whose plan.json says what to run."""
    dir: str = flag("a run or tune folder (its plan.json)", positional=True, metavar="DIR")
    no_build: bool = no_build()
    allow_errors: bool = allow_errors()


@dataclass(frozen=True)
class RerunRequest(ResumeRequest):
    """`rerun DIR [--out]`: that plan again, into a new folder."""
    out: str = run_dir()


def resume(request: ResumeRequest) -> int:
    """A run goes on with the repeats it misses; a tune, with its search, in the budget it has left."""
    rundir.check_run(request.dir, "resume")
    plan = rundir.read_plan(request.dir)
    if tune_folder(plan):
        from rlbench.tuning import tune
        return tune(TuneRequest.from_plan(plan), resume=request.dir)[0]
    return pipeline.run(_saved(plan, request), resume=request.dir)[0]


def rerun(request: RerunRequest) -> int:
    rundir.check_run(request.dir, "rerun")
    plan = rundir.read_plan(request.dir)
    if tune_folder(plan):
        from rlbench.tuning import tune
        return tune(TuneRequest.from_plan(plan, out=request.out))[0]
    return pipeline.run(_saved(plan, request, out=request.out))[0]


def _saved(plan: dict, request: ResumeRequest, out=None) -> RunRequest:
    """The `rlbench run` a folder's plan.json kept, planned from the suite text it kept (not the file,
    which may have changed or be elsewhere)."""
    return RunRequest.from_plan(plan, out=out, no_build=request.no_build, allow_errors=request.allow_errors)


@dataclass(frozen=True)
class ValidateRequest(RunRequest):
    """`rlbench validate`: the run's protocol flags (not a sweep's: it runs its own suite), or runs to judge."""
    from_dir: tuple = flag("judge existing runs instead of running (several runs of one machine: the claims matrix "
                           "over all of them)", (), name="--from", metavar="DIR", nargs="+")
    claims_out: str = flag("where claims.csv and claims.md go (default: the run's folder, the first of --from)",
                           metavar="DIR")
    noise_from: tuple = flag("A/A runs of this machine (one suite run again at one commit): their run-to-run "
                             "spread widens every ratio's CI (default: the 1%% floor)", (), name="--noise-from",
                             metavar="DIR", nargs="+")

    def run_request(self) -> RunRequest:
        """The run of suites/validate.toml it asks for."""
        mine = {f.name: getattr(self, f.name) for f in fields(RunRequest)}
        return replace(RunRequest(**mine), suite=VALIDATE_SUITE, adapter=())


def validate(request: ValidateRequest) -> int:
    """Run suites/validate.toml (or read --from runs): the checks against published tables, and the claims matrix
    of the source papers over the runs (claims.csv and claims.md)."""
    from rlbench.families.validation import claims
    from rlbench.families.validation.checks import validation_rows
    from rlbench.families.validation.report import claims_csv, claims_markdown, claims_text, validation_text
    from rlbench.report.writer import write_atomic
    from rlbench.results.model import ResultSet
    for flag_name, given in (("--from", request.from_dir), ("--noise-from", request.noise_from)):
        for d in given:
            if not os.path.isfile(os.path.join(d, "results.jsonl")):
                raise UsageError(f"validate {flag_name} {d}: not a run folder (valid: folders holding results.jsonl)")
    noise = _run_noise(request)
    if request.from_dir:
        rc, dirs = 0, list(request.from_dir)
        if len(dirs) == 1:
            rundir.rebuild_report(dirs[0])
    else:
        rc, out_dir = pipeline.run(request.run_request())
        dirs = [out_dir]
    runs = [ResultSet.load(d) for d in dirs]
    for d, results in zip(dirs, runs):
        rows = validation_rows(results)
        if rows:
            print(f"\n{d}:\n{validation_text(rows)}")
    matrix = claims.matrix(runs, noise=noise)
    print("\n" + claims_text(matrix, noise))
    out = request.claims_out or dirs[0]
    os.makedirs(out, exist_ok=True)
    files = {"claims.csv": claims_csv(matrix), "claims.md": claims_markdown(matrix, runs, dirs, noise)}
    for name, text in files.items():
        write_atomic(os.path.join(out, name), text)
    print(f"claims: {os.path.join(out, 'claims.md')} (and claims.csv)")
    return rc


def _run_noise(request: ValidateRequest):
    """The machine's run-to-run noise the claims' CIs hold: learned from --noise-from's A/A runs, which must be of
    the machine the --from runs are of; the floor without them."""
    from rlbench.results.changes import RUN_SD_FLOOR, Noise, aa_noise
    from rlbench.results.history import machine_key
    from rlbench.results.model import ResultSet
    if not request.noise_from:
        return Noise(RUN_SD_FLOOR, 0, "the floor: no A/A runs given (--noise-from)")
    aa = [ResultSet.load(d) for d in request.noise_from]
    judged = {machine_key(ResultSet.load(d).record)[::2] for d in request.from_dir}
    for d, results in zip(request.noise_from, aa):
        key = machine_key(results.record)[::2]
        if judged and key not in judged:
            raise UsageError(f"validate --noise-from {d}: a run of another machine ({key[1]}) than the runs judged "
                             f"(valid: A/A runs of {', '.join(sorted(label for _, label in judged))})")
    return aa_noise(aa)


@dataclass(frozen=True)
class ReportRequest(Request):
    dir: str = flag("a run folder (its results.jsonl)", positional=True)
    format: str = flag("html: results.csv, summary.csv, index.html and the other views (default); "
                       "pytest-benchmark: only DIR/pytest-benchmark.json, for `pytest-benchmark compare`", "html",
                       choices=("html", "pytest-benchmark"))


def report(request: ReportRequest) -> int:
    if not os.path.isdir(request.dir):
        raise UsageError(f"report: {request.dir} is not a directory")
    if not os.path.exists(os.path.join(request.dir, "results.jsonl")):
        raise UsageError(f"report: no results.jsonl in {request.dir} (is it a run directory?)")
    lock = rundir.RunLock(request.dir).acquire()  # not while a run is still writing it
    try:
        if request.format == "pytest-benchmark":
            from rlbench import report as reports
            from rlbench.report.pytest_benchmark import export_pytest_benchmark
            from rlbench.results.model import ResultSet
            paths = reports.export(ResultSet.load(request.dir), request.dir, [export_pytest_benchmark])
            print(f"pytest-benchmark: {paths[0]}")
            return 0
        view = rundir.rebuild_report(request.dir)
    except OSError as exc:
        print(f"rlbench: error: cannot write the report: {exc.strerror or exc}", file=sys.stderr)
        return 1
    finally:
        lock.release()
    pipeline.print_summary(view, request.dir)
    return 0


COMMANDS = (
    Command("run", "run a suite file, or one sweep given by flags", RunRequest, run),
    Command("resume", "finish an interrupted run: only the (cell, repeat) pairs missing from DIR", ResumeRequest,
            resume),
    Command("rerun", "run the plan kept in DIR again, from scratch, into a new folder", RerunRequest, rerun),
    Command("validate", f"run {os.path.relpath(VALIDATE_SUITE, rlbench.ROOT)} and compare with published figures",
            ValidateRequest, validate, validate_only=True),
    Command("report", "rebuild results.csv, summary.csv and index.html from results.jsonl", ReportRequest, report),
)
