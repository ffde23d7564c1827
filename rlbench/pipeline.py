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
from dataclasses import dataclass

from rlbench import registry
from rlbench.errors import UsageError
from rlbench.machine.fingerprint import fingerprint, now
from rlbench.planning.drop import drop_impossible
from rlbench.planning.flags import plan_from_args
from rlbench.results.model import ResultSet
from rlbench.results.store import StoreError
from rlbench.running import rundir
from rlbench.running.cluster.join import join, leave
from rlbench.running.rundir import RunDir

HANDLED = ("SIGTERM", "SIGHUP")  # like Ctrl-C: the running cell is killed, every finished row kept
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
    env = {**fingerprint(), "suite_path": suite.path, "suite_sha256": suite.sha256}  # the text it planned from
    plan = {**rundir.plan_record(args, suite, folder.run_id, env), "dropped": [d.to_dict() for d in dropped]}
    saved = folder.check_resumable(plan)
    outcome = Outcome()
    with on_cluster(suite, folder, saved) as cluster, folder:
        env, done = open_run(folder, suite, plan, env, saved, cluster)
        with stops_early(outcome, folder.path):
            envs = prepare(suite, folder.path, env, build=not args.no_build)
            sweep(suite, folder, envs, done, args.profile, cluster)
        view = export_run(folder, env)
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
    started = (rundir.read_env(out_dir).get("cluster") or {}).get("class")
    if started and started != cluster.class_id:
        raise UsageError(f"resume {out_dir}: it ran on nodes of class {started}, the cluster's nodes now are of class "
                         f"{cluster.class_id}; resume it when nodes of class {started} are in the cluster")


def open_run(folder, suite, plan, env, saved, cluster=None) -> tuple:
    """A new run writes its plan; a resumed one keeps its id and the rows it has (but `lost` ones). Returns
    (env.json contents, the (cell, repeat, profiled) triples already done)."""
    if saved:
        kept = folder.read_env()
        env, done = {**kept, "resumed_at": [*kept.get("resumed_at", []), now()]}, folder.done()
    else:
        done = set()
        env.update(run_id=folder.run_id, settings=suite.settings.__dict__, cells=len(suite.cells),
                   dropped=plan["dropped"])
    if cluster is not None:
        env["cluster"] = cluster.record()
    folder.begin(env, None if saved else plan)
    todo = f" ({len(done)} rows kept, running the rest)" if done else ""
    print(f"rlbench: {len(suite.cells)} cells x {suite.settings.repeats} repeats -> {folder.path}{todo}",
          file=sys.stderr)
    return env, done


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


def prepare(suite, out_dir, env: dict, build: bool) -> dict:
    """What each family needs first (the replay family: the machine's limits), then the environments of
    adapters that cannot share this one, built once and cached; env.json records each one's interpreter and
    package versions. A build that fails turns its cells into error rows."""
    from rlbench.running import adapter_envs
    for family in registry.families():
        family.before_sweep(suite, out_dir, env)
        rundir.write_env(out_dir, env)
    prepared = adapter_envs.prepare({registry.get(c.adapter) for c in suite.cells}, build=build)
    env["adapter_envs"] = {name: p.record or {"status": p.status, "reason": p.reason} for name, p in prepared.items()}
    rundir.write_env(out_dir, env)
    return prepared


def sweep(suite, folder, envs, done, profile: bool, cluster=None) -> None:
    """Every (cell, repeat) not done, a fresh process each, repeats interleaved (rlbench.running.sweep)."""
    from rlbench.running.sweep import run_sweep
    run_sweep(folder.run_id, suite.name, suite.cells, suite.settings, folder.path, profile, envs, done,
              cluster=cluster)


def export_run(folder, env):
    """env.json's end (and the Ray cluster the cells' actors ran on), then the reports; None, with one line
    said, when they cannot be written (`rlbench report` rebuilds them later from results.jsonl)."""
    env["ended_at"] = now()
    actors = [r for r in ResultSet.load(folder.path).rows if r.get("cluster")]
    if actors:  # the cluster as the last cell saw it, and where each cell's actors ran
        env["ray_cluster"] = {**actors[-1]["cluster"], "placements": {r["cell_id"]: r.get("placement") for r in actors}}
    try:
        folder.write_env(env)
        return rebuild_report(folder.path)
    except OSError as exc:
        print(f"rlbench: error: cannot write the report: {exc.strerror or exc}; `rlbench report {folder.path}` "
              "rebuilds it from results.jsonl", file=sys.stderr)
        return None


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
    failed = [r for r in results.rows if r["status"] in FAILED]
    if failed and not allow_errors:
        print(f"rlbench: {len(failed)} row(s) with status error, timeout or lost: exit 1 (--allow-errors: exit 0)",
              file=sys.stderr)
        return 1
    return 0


def rebuild_report(out_dir):
    """Every file of the report, from results.jsonl alone (as `rlbench report` does); the run's view
    (rlbench.report.view.RunView), built once, which the summary printed after it reads too."""
    from rlbench import report
    from rlbench.report.view import run_view
    results = ResultSet.load(out_dir)
    if results.skipped:
        print(f"rlbench: warning: {out_dir}/results.jsonl: line(s) {', '.join(map(str, results.skipped[:10]))} "
              "are not results rows; left out", file=sys.stderr)
    view = run_view(results, out_dir)
    report.export(view, out_dir)
    return view


def print_summary(view, out_dir) -> None:
    """The medians table, the row count and the report's path, then the answer: each family's headline
    sentences (rlbench.contract.Family.headlines), last."""
    from rlbench.report.console import medians_table
    print(medians_table(view))
    counts = {}
    for r in view.results.rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    print(f"\n{len(view.results.rows)} rows ({', '.join(f'{v} {k}' for k, v in sorted(counts.items()))})")
    page = os.path.join(out_dir, "index.html")
    print(f"report: {page if os.path.exists(page) else os.path.join(out_dir, 'results.csv')}")
    lines = view.headlines
    if lines:
        print("\nSummary")
        for line in lines:
            print(f"  {line}")


def _handle_signals() -> dict:
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.signal(getattr(signal, sig), _interrupt) for sig in HANDLED}


def _restore_signals(previous: dict) -> None:
    for sig, handler in previous.items():
        signal.signal(getattr(signal, sig), handler)


def _interrupt(signum, frame):
    raise KeyboardInterrupt
