"""`history add | show | check`: the benchmark history across commits and machines (rlbench.results.history
holds it; rlbench.results.changes finds its noise, change points and the regressions of a new run)."""
import glob
import os
from dataclasses import dataclass

from rlbench import pipeline
from rlbench.commands import flags
from rlbench.commands.command import Command
from rlbench.errors import UsageError
from rlbench.machine.limits import positive_int
from rlbench.planning.request import Request, RunRequest, flag
from rlbench.running import rundir
from rlbench.running.rundir import REPORTS


@dataclass(frozen=True)
class AddRequest(Request):
    dirs: tuple = flag("run folders (and every run under a folder)", positional=True, metavar="RUN_DIR", nargs="+")
    tag: str = flag("a label kept with these runs (an A/A series, an injected slowdown)")
    db: str = flags.db()


def add(request: AddRequest) -> int:
    from rlbench.results.history import History, run_folders
    folders = run_folders(request.dirs)
    counts = {}
    db = flags.db_path(request.db)
    with History(db) as history:
        for path in folders:
            added = history.add(path, tag=request.tag)
            counts[added.outcome] = counts.get(added.outcome, 0) + 1
            print(f"{added.outcome:<9} {path}" + (f" ({added.repeats} repeats)" if added.repeats else "")
                  + (f": {added.why}" if added.why else ""))
    outcomes = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    print(f"{len(folders)} run(s): {outcomes}; history: {db}")
    return 0


@dataclass(frozen=True)
class ShowRequest(Request):
    suite: str = flag("only this suite (default: every suite in the history)")
    machine: str = flag("only this machine class (its id, or a part of its label)")
    alpha: float = flags.alpha("significance of a change point")
    out: str = flag("where the pages go", os.path.join(REPORTS, "history"))
    db: str = flags.db()


def _series(history, suite, machine_class, alpha):
    """The history's points and, per series, its noise and change points."""
    from rlbench.results.changes import SERIES, change_points, noise, points
    pts = points(history.repeats(suite, machine_class))
    noises = noise(pts)
    changes = {key: change_points(series.reset_index(drop=True), noises[key].sd, alpha)
               for key, series in pts.groupby(list(SERIES), sort=False)}
    return pts, noises, changes


def show(request: ShowRequest) -> int:
    from rlbench.report.history_page import export_history, open_regressions
    from rlbench.report.writer import write_files
    from rlbench.results.history import History
    db = flags.db_path(request.db)
    with History(db, create=False) as history:
        suites, machines = history.suites(), history.machines()
        if request.suite and request.suite not in suites:
            raise UsageError(f"history show: no suite {request.suite!r} in {db} (valid: {', '.join(suites)})")
        cls = _machine_class(request.machine, machines) if request.machine else None
        pts, noises, changes = _series(history, request.suite, cls, request.alpha)
    os.makedirs(request.out, exist_ok=True)
    for suite in sorted(pts["suite"].unique()):
        mine = {k: v for k, v in changes.items() if k[0] == suite}
        paths = write_files(request.out, export_history(suite, pts[pts["suite"] == suite], mine, noises))
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


@dataclass(frozen=True)
class CheckRequest(Request):
    dir: str = flag("the new run's folder", positional=True, metavar="RUN_DIR")
    threshold: str = flags.threshold("2%")
    alpha: float = flags.alpha("false-alarm rate over the run's cells")
    window: int = flag("runs since the last change that set the level (default 20)", 20, type=positive_int)
    confirm: bool = flag("run the cells found slower again (RUN_DIR's plan, only them) and keep only those slower "
                         "twice", False)
    add: bool = flag("add RUN_DIR to the history after checking it", False)
    out: str = flags.gate_out("RUN_DIR: history-check.csv")
    db: str = flags.db()


def _confirmed(request: CheckRequest, folder, changes, past, threshold) -> list:
    """The changes again, where a cell found slower stays slower only if a second run says so too
    (rlbench.results.gate.confirmed): the cells found slower run again (the run's own plan, only those cells, into a
    confirm-N folder beside it) and are checked again. The second run's cells are matched to the first's by their
    place in the plan (cell_index). New CellChange values; the first ones are left as they were."""
    from rlbench.results.changes import check, noise, points
    from rlbench.results.gate import confirmed
    from rlbench.results.history import History
    from rlbench.results.store import RESULTS, read_rows
    slow = {c.cell_id for c in changes if c.verdict == "slower"}
    plan = rundir.read_plan(folder)
    index = {r["cell_id"]: r["cell_index"] for r in read_rows(os.path.join(folder, RESULTS)) if r["cell_id"] in slow}
    planned = {plan["cells"][i]: cell for cell, i in index.items()}
    base = request.out or folder
    out = next(os.path.join(base, f"confirm-{k}") for k in range(1, 1000)
               if not os.path.exists(os.path.join(base, f"confirm-{k}")))
    print(f"confirming {len(slow)} slower cell(s) in a second run: {out}")
    pipeline.run(RunRequest.from_plan(plan, out=out, only=tuple(glob.escape(c) for c in planned), allow_errors=True))
    with History(":memory:") as scratch:
        scratch.add(out)
        again = points(scratch.repeats())
    again["cell_id"] = again["cell_id"].map(lambda c: planned.get(c, c))
    second = {c.cell_id: c for c in check(past, again, noise(past), request.alpha, threshold, request.window)}
    return [confirmed(c, second.get(c.cell_id)) if c.verdict == "slower" else c for c in changes]


def check(request: CheckRequest) -> int:
    from rlbench.report.csv_reporter import frame_to_csv
    from rlbench.report.writer import write_files
    from rlbench.results.changes import CHECK_COLUMNS, check, noise, points
    from rlbench.results.gate import counts_label, exit_code, parse_threshold, regressions, table
    from rlbench.results.history import History, run_folders
    threshold = parse_threshold(request.threshold)
    alpha = flags.checked_alpha(request.alpha)
    folders = run_folders([request.dir])
    if len(folders) != 1:
        raise UsageError(f"history check: {request.dir!r} holds {len(folders)} runs (valid: one run folder)")
    folder = folders[0]
    with History(":memory:") as scratch:
        scratch.add(folder)
        new = points(scratch.repeats())
        failed_cells = scratch.failed_cells()
    if new.empty:
        raise UsageError(f"history check: {folder!r} has no ok repeat to check")
    suite, cls = new["suite"].iloc[0], new["machine_class"].iloc[0]
    db = flags.db_path(request.db)
    with History(db, create=False) as history:
        past = points(history.repeats(suite, cls))
    past = past[past["run_key"] != new["run_key"].iloc[0]]
    changes = check(past, new, noise(past), alpha, threshold, request.window, failed=failed_cells)
    if request.confirm and any(c.verdict == "slower" for c in changes):
        changes = _confirmed(request, folder, changes, past, threshold)
    os.makedirs(request.out or folder, exist_ok=True)
    csv = frame_to_csv(table(changes, CHECK_COLUMNS))
    path = write_files(request.out or folder, {"history-check.csv": csv.encode()})[0]
    for c in changes:
        if c.verdict != "same":
            print(f"{c.verdict:<11} {c.cell_id}  {c.reason}")
    print(f"{len(changes)} cells against the history of {suite} on this machine class: {counts_label(changes)}"
          f"; suite: {'REGRESSED' if regressions(changes) else 'ok'} (alpha {alpha:g} over the cells, Holm)")
    print(f"check: {path}")
    if request.add:
        with History(db) as history:
            history.add(folder)
    return exit_code(changes)


COMMANDS = (
    Command("history", "the benchmark history across commits and machines: add runs, show each cell's series and "
                       "change points, gate a new run on it", verbs=(
                Command("add", "add run folders (and every run under a folder); idempotent", AddRequest, add),
                Command("show", "history-SUITE.html and .csv: each cell's series over commits, its change points "
                                "and the open regressions", ShowRequest, show),
                Command("check", "is RUN_DIR a significant change against the history? exit 1 when a cell is "
                                 "slower", CheckRequest, check))),
)
