"""Runs every job of a plan and turns each outcome into a results row, appended as it finishes.

Cells an adapter cannot host on this machine (its package is not installed here) get one `unsupported` row each
before anything runs (`error` when the adapter's own environment failed to build); a failing or hanging cell
becomes an `error` or `timeout` row and the sweep goes on.
"""
import os
from dataclasses import dataclass
from typing import Callable, Optional

from rlbench import SCHEMA_VERSION, registry
from rlbench.envs import refusal
from rlbench.planning.plan import interleave
from rlbench.results.model import ResultSet, frames
from rlbench.results.store import ResultStore
from rlbench.running.adapter_envs import environment_of
from rlbench.running.progress import Progress
from rlbench.running.reaper import Reaper
from rlbench.running.runner import Runner


def base_row(run_id: str, suite: str, cell, settings, repeat: int, profiled: bool) -> dict:
    """The cell's fields of a results row: what was measured and how."""
    w = cell.workload
    adapter = registry.get(cell.adapter)
    return {
        "schema": SCHEMA_VERSION, "run_id": run_id, "suite": suite, "cell_id": cell.cell_id, "cell_index": cell.index,
        "adapter": cell.adapter, "kind": adapter.kind, "env": w.env_id, "env_kwargs": w.env_kwargs,
        "num_envs": w.num_envs, "workers": None, "batch_size": cell.options.get("batch_size"),
        "policy": w.policy.label, "device": w.policy.device_label, "options": cell.given_options,
        "frameskip": w.frameskip, "seed": cell.seed(settings, repeat), "repeat": repeat, "profiled": profiled,
        "omp_threads": cell.threads(settings), "affinity": list(cell.cpus(settings)),
        "cpus": len(cell.cpus(settings)) or len(os.sched_getaffinity(0)),
    }


def skip_reason(cell, envs: dict):
    """(status, reason) when the cell cannot run here, else None. An adapter with its own environment
    has its packages there, not here: its `available()` is checked inside the cell process. supports() is
    asked again for callers that hand cells in unplanned (a planned run has dropped what it refuses, but
    for a reason of this machine's, rlbench.planning.drop.MACHINE_REASONS)."""
    cls = registry.get(cell.adapter)
    adapter = cls()
    own = environment_of(cls)   # None also for an environment $RLBENCH_ENVS_HERE runs in this interpreter
    if own is not None:
        prepared = envs.get(own.name)
        if prepared is None or prepared.python is None:
            return (prepared.status, prepared.reason) if prepared else ("unsupported", "environment not prepared")
        reason = refusal(adapter, cell.workload, cell.options)
    else:
        reason = adapter.available() or refusal(adapter, cell.workload, cell.options)
    return ("unsupported", reason) if reason else None


@dataclass(frozen=True)
class SweepRequest:
    """One sweep, as its four callers (run, tune's measurer, the calibration, check_tune) ask for it: the cells and
    the protocol, where the rows go, and what each caller adds.
    `envs`: adapter environment name -> adapter_envs.Prepared (what the prepare step built).
    `done`: (cell_id, repeat, profiled) of the rows the folder already holds (a resumed run): not run again.
    `admit(job)`: whether a job may still start (rlbench tune's budget); one refused is not run, no row.
    `cluster`: the nodes to run on (rlbench.running.cluster.nodes.ClusterView), several jobs at once;
    None: here, one job at a time. `profile`: one extra py-spy repeat per cell."""
    run_id: str
    suite: str
    cells: tuple
    settings: object            # rlbench.planning.plan.Settings
    out_dir: str
    profile: bool = False
    envs: Optional[dict] = None
    done: frozenset = frozenset()
    admit: Optional[Callable] = None
    cluster: object = None


def run_sweep(request: SweepRequest) -> ResultSet:
    """Every job of the request not done, a fresh process each, repeats interleaved; its rows (also appended to
    out_dir's results.jsonl as each finishes). A row that cannot be written (rlbench.results.store.StoreError)
    stops the sweep."""
    run_id, suite_name, cells, settings, out_dir = (request.run_id, request.suite, request.cells, request.settings,
                                                    request.out_dir)
    profile, admit, cluster = request.profile, request.admit, request.cluster
    envs = request.envs or {}
    done = set(request.done)
    store = ResultStore(out_dir)
    runnable, skipped = [], []
    for cell in cells:
        skip = skip_reason(cell, envs)
        if skip and any(d[0] == cell.cell_id for d in done):
            continue
        (skipped if skip else runnable).append((cell, skip))
    jobs = [j for j in interleave([c for c, _ in runnable], settings.repeats, profile)
            if (j.cell.cell_id, j.repeat, j.profile) not in done]
    progress = Progress(len(jobs) + len(skipped))
    rows, reaper = [], None

    def finish(row):
        frames(row)
        store.append(row)
        rows.append(row)
        progress.update(row)

    def finish_job(job, result, **extra):
        if result.get("batch_size") is None:
            result.pop("batch_size", None)
        finish({**base_row(run_id, suite_name, job.cell, settings, job.repeat, job.profile), **result, **extra})

    def admitted(job):
        if admit is None or admit(job):
            return True
        progress.done += 1
        return False

    try:
        for cell, (status, reason) in skipped:
            finish({**base_row(run_id, suite_name, cell, settings, 0, False), "status": status, "error": reason})
        pythons = {a: p.python for p in envs.values() if p.python for a in p.env.adapters}
        first = _next_log_index(out_dir)
        if cluster is not None:
            on_cluster(cluster, settings, out_dir, pythons, list(zip(jobs, range(first, first + len(jobs)))),
                       progress, admitted, lambda job, result: finish_job(job, result, node_class=cluster.class_id))
            return ResultSet.from_rows(rows)
        reaper = Reaper()
        runner = Runner(settings, out_dir, pythons=pythons, reaper=reaper)
        for i, job in enumerate(jobs, first):
            if not admitted(job):
                continue
            progress.start(f"{job.cell.cell_id} r{job.repeat}")
            finish_job(job, runner.run(job, i))
    finally:
        progress.close()
        store.close()
        if reaper is not None:
            reaper.close()
    return ResultSet.from_rows(rows)


def on_cluster(view, settings, out_dir, pythons, jobs, progress, admit, finish) -> None:
    """The jobs on the cluster's nodes, several at once; each result's log (and profile) written here."""
    from rlbench.running.cluster.dispatch import ClusterDispatch

    def finished(job, result):
        for key, field, mode in (("log_text", "log", "w"), ("profile_bytes", "profile", "wb")):
            data = result.pop(key, None)
            if data is not None and result.get(field):
                path = os.path.join(out_dir, result[field])
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, mode) as f:
                    f.write(data)
        finish(job, result)

    ClusterDispatch(view, settings, pythons).run(
        jobs, lambda job: progress.start(f"{job.cell.cell_id} r{job.repeat}"), finished, admit)


def _next_log_index(out_dir: str) -> int:
    """Logs are numbered in run order; a resumed run goes on after the last one."""
    try:
        return 1 + max((int(n.split("-", 1)[0]) for n in os.listdir(os.path.join(out_dir, "logs"))
                        if n.split("-", 1)[0].isdigit()), default=-1)
    except OSError:
        return 0
