"""`rlbench run`, stage by stage: plan the cells, open the run folder,
prepare what the cells need, sweep them (a fresh process per cell and repeat), export the reports and
summarize. Each stage is one call here; what it does lives in its own module.

Exit codes: 0 every row ok or unsupported; 1 an error, timeout or lost row (unless --allow-errors), or rows
that could not be written (disk full); 2 bad input, nothing written; 130 interrupted."""
import contextlib
import os
import signal
import sys
import threading
from dataclasses import dataclass, replace

from rlbench import registry
from rlbench.errors import UsageError
from rlbench.machine.fingerprint import fingerprint, now
from rlbench.planning.drop import drop_impossible
from rlbench.planning.flags import plan_from_args
from rlbench.results.model import ResultSet
from rlbench.results.record import RunRecord
from rlbench.results.store import StoreError
from rlbench.running import rundir
from rlbench.running.cluster.join import join, leave
from rlbench.running.rundir import RunDir

HANDLED = (signal.SIGTERM, signal.SIGHUP)  # like Ctrl-C: the running cell is killed, every finished row kept
FAILED = ("error", "timeout", "lost")


@dataclass
class Outcome:
    """How the sweep ended, for the exit code: what was cut short still gets its report."""
    interrupted: bool = False
    store_failed: bool = False


def run(args, resume: str = None) -> tuple:
    """(exit code, run folder) of the rlbench.planning.request.RunRequest `args`.
    Cells that cannot run anywhere (an adapter's supports() says why) leave the plan first; none left is a
    UsageError, before anything is written."""
    suite, dropped = drop_impossible(plan_from_args(args))
    folder = RunDir.choose(suite.name, args.out, resume or args.resume)
    machine = fingerprint()
    plan = {**rundir.plan_record(args, suite, folder.run_id, machine), "dropped": [d.to_dict() for d in dropped]}
    saved = folder.check_resumable(plan)
    outcome = Outcome()
    with on_cluster(suite, folder, saved) as cluster, folder:
        done = open_run(folder, suite, plan, machine, saved, cluster)
        with stops_early(outcome, folder.path):
            envs = prepare(suite, folder, build=not args.no_build)
            sweep(suite, folder, envs, done, args.profile, cluster)
        view = folder.export(ray_cluster=ray_cluster(folder.path))
    return finish(view, outcome, folder.path, args.allow_errors), folder.path


@contextlib.contextmanager
def on_cluster(suite, folder, saved):
    """The class of cluster nodes the cells run on (None: here), joined before anything is written (nodes
    refused or too small: a UsageError), left however the run ends."""
    try:
        cluster = join(suite.settings, suite.cells)
        if saved and cluster is not None:
            same_class(folder.path, cluster)
        yield cluster
    finally:
        leave()


def same_class(out_dir, cluster) -> None:
    """A resumed cluster run goes on on nodes of the class it started on: rows of two classes never pool."""
    started = (rundir.read_record(out_dir).cluster or {}).get("class")
    if started and started != cluster.class_id:
        raise UsageError(f"resume {out_dir}: it ran on nodes of class {started}, the cluster's nodes now are of class "
                         f"{cluster.class_id}; resume it when nodes of class {started} are in the cluster")


def open_run(folder, suite, plan, machine, saved, cluster=None) -> set:
    """A new run writes its plan and record; a resumed one keeps its id, its record and the rows it has (but
    `lost` ones). Returns the (cell, repeat, profiled) triples already done."""
    if saved:
        kept = folder.read_record()
        record, done = replace(kept, resumed_at=(*kept.resumed_at, now())), folder.done()
    else:
        record = RunRecord(machine, folder.run_id, suite_path=suite.path, suite_sha256=suite.sha256,
                           settings=suite.settings.__dict__, cells=len(suite.cells), dropped=plan["dropped"])
        done = set()
    if cluster is not None:
        record = replace(record, cluster=cluster.record())
    folder.begin(record, None if saved else plan)
    todo = f" ({len(done)} rows kept, running the rest)" if done else ""
    print(f"rlbench: {len(suite.cells)} cells x {suite.settings.repeats} repeats -> {folder.path}{todo}",
          file=sys.stderr)
    return done


@contextlib.contextmanager
def stops_early(outcome, out_dir):
    """Ctrl-C, SIGTERM, SIGHUP and a full disk end the stages inside early, every finished row kept; the
    outcome says which, for the exit code."""
    previous = _handle_signals()
    try:
        yield
    except KeyboardInterrupt:
        outcome.interrupted = True
        print("rlbench: interrupted; every finished repeat is kept "
              f"(`rlbench resume {out_dir}` runs the rest)", file=sys.stderr)
    except (StoreError, OSError) as exc:
        outcome.store_failed = True
        print(f"rlbench: error: {exc}; every earlier row is kept. Free space, then `rlbench resume {out_dir}` "
              "runs the rest", file=sys.stderr)
    finally:
        _restore_signals(previous)


def prepare(suite, folder, build: bool) -> dict:
    """What each family needs first (the replay family: the machine's limits), then the environments of
    adapters that cannot share this one, built once and cached; env.json records both. A build that fails
    turns its cells into error rows."""
    from rlbench.running import adapter_envs
    record = folder.record
    measured = {k: v for f in registry.families() for k, v in f.before_sweep(suite, folder.path, record).items()}
    prepared = adapter_envs.prepare({registry.get(c.adapter) for c in suite.cells}, build=build)
    folder.write(replace(record, measured={**record.measured, **measured},
                         adapter_envs=adapter_envs.records(prepared)))
    return prepared


def sweep(suite, folder, envs, done, profile: bool, cluster=None) -> None:
    """Every (cell, repeat) not done, a fresh process each, repeats interleaved (rlbench.running.sweep)."""
    from rlbench.running.sweep import run_sweep
    run_sweep(folder.run_id, suite.name, suite.cells, suite.settings, folder.path, profile, envs, done,
              cluster=cluster)


def ray_cluster(out_dir):
    """The Ray cluster the cells' actors ran on, as the last cell saw it, and where each cell's actors ran;
    None when no cell used one."""
    actors = [r for r in ResultSet.load(out_dir).runs if r.get("cluster")]
    if not actors:
        return None
    return {**actors[-1]["cluster"], "placements": {r["cell_id"]: r.get("placement") for r in actors}}


def finish(view, outcome: Outcome, out_dir: str, allow_errors: bool) -> int:
    """The summary, then the exit code; a report that could not be written: 1 (130 if interrupted)."""
    if view is None:
        return 130 if outcome.interrupted else 1
    print_summary(view, out_dir)
    return exit_code(outcome, view.results, allow_errors)


def exit_code(outcome: Outcome, results: ResultSet, allow_errors: bool) -> int:
    if outcome.interrupted:
        return 130
    if outcome.store_failed:
        return 1
    failed = [r for r in results.runs if r["status"] in FAILED]
    if failed and not allow_errors:
        print(f"rlbench: {len(failed)} row(s) with status error, timeout or lost: exit 1 (--allow-errors: exit 0)",
              file=sys.stderr)
        return 1
    return 0


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


def _handle_signals() -> dict:
    """A signal the run was started ignoring stays ignored, as Python leaves SIGINT: `nohup rlbench run ...` is
    not stopped by the terminal's hangup."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.signal(sig, _interrupt) for sig in HANDLED if signal.getsignal(sig) != signal.SIG_IGN}


def _restore_signals(previous: dict) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)


def _interrupt(signum, frame):
    raise KeyboardInterrupt
