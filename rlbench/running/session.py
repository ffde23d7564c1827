"""The lifecycle every measuring command shares (`rlbench run`, rlbench.pipeline; `rlbench tune`, rlbench.tuning).
`session(job)` chooses the run folder and joins the cluster (nothing written yet: a refusal is still bad input);
`Session.open` locks the folder, writes the record, and from there on owns the run's end: Ctrl-C, SIGTERM, SIGHUP
and a full disk stop what is inside early, every finished row kept, and the report is exported whatever
happened. Exit codes: 0 every row ok or unsupported; 1 an error, timeout or lost row (unless allowed), or rows
that could not be written (disk full); 130 interrupted."""
import contextlib
import signal
import sys
import threading
from dataclasses import dataclass, field, replace

from rlbench import registry
from rlbench.errors import UsageError
from rlbench.machine.fingerprint import fingerprint, now
from rlbench.results.model import ResultSet
from rlbench.results.record import RunRecord
from rlbench.results.store import StoreError
from rlbench.running import rundir
from rlbench.running.cluster.join import join, leave
from rlbench.running.rundir import RunDir
from rlbench.running.runner import remove_temp_folders

HANDLED = (signal.SIGTERM, signal.SIGHUP)  # like Ctrl-C: the running cell is killed, every finished row kept
FAILED = ("error", "timeout", "lost")


@dataclass(frozen=True)
class Job:
    """What a command asks of its session: where its folder goes and what its plan.json keeps."""
    name: str                     # the run id's suffix: the suite's name, or "tune"
    command: str                  # run | tune: plan.json says which, so that `rlbench resume` goes on with it
    settings: object              # rlbench.planning.plan.Settings
    args: dict                    # the request's planned fields (resume, rerun)
    cells: tuple = ()             # the planned cells (a tune's are found as it searches: none)
    suite_text: str = None
    out: str = None
    resume: str = None            # the folder of an interrupted run to go on with
    plan_extra: dict = field(default_factory=dict)   # plan.json's further keys (a run's dropped cells)


@dataclass
class Outcome:
    """How the stages inside ended, for the exit code and the record: what was cut short still gets its report."""
    interrupted: str = ""   # the signal that stopped it (SIGINT for Ctrl-C), "" if none
    store_failed: str = ""  # the write that failed (a full disk), "" if none


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where the run is, like Ctrl-C; names the signal."""

    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signal = signal.Signals(signum).name


class Session:
    """One command's run folder between `session` and the report: its cluster, record, rows already done (a
    resumed run's) and how it ended."""

    def __init__(self, job: Job, folder: RunDir, machine: dict, plan: dict, saved, cluster):
        self.job, self.folder, self.machine, self.plan, self.saved = job, folder, machine, plan, saved
        self.cluster = cluster          # the class of nodes the cells run on; None: here
        self.outcome = Outcome()
        self.done, self.view = set(), None
        self._end = lambda outcome: ({}, {})

    @property
    def path(self) -> str:
        return self.folder.path

    @property
    def run_id(self) -> str:
        return self.folder.run_id

    @property
    def resuming(self) -> bool:
        return self.saved is not None

    @contextlib.contextmanager
    def open(self, **record):
        """Lock the folder and write the record (a new run: `record`'s fields and plan.json; a resumed one keeps
        its own, its rows but `lost` ones counted done). Inside, signals and a full disk end the stages early;
        then the report is exported, with what `at_end`'s function adds."""
        with self.folder:
            self._begin(record)
            with stops_early(self.outcome, self.path):
                yield self
            end, files = self._end(self.outcome)
            self.view = self.folder.export(files=files, ray_cluster=ray_cluster(self.path), **end)

    def _begin(self, fields: dict) -> None:
        if self.resuming:
            kept = self.folder.read_record()
            record, self.done = replace(kept, resumed_at=(*kept.resumed_at, now())), self.folder.done()
        else:
            record = RunRecord(self.machine, self.run_id, command=self.job.command,
                               settings=self.job.settings.__dict__, **fields)
        if self.cluster is not None:
            record = replace(record, cluster=self.cluster.record())
        self.folder.begin(record, None if self.resuming else self.plan)

    def prepare(self, suite, build: bool = True) -> dict:
        """What each family needs first (the replay family: the machine's limits), then the environments of
        adapters that cannot share this one, built once and cached; env.json records both. A build that fails
        turns its cells into error rows."""
        from rlbench.running import adapter_envs
        record = self.folder.record
        measured = {k: v for f in registry.families() for k, v in f.before_sweep(suite, self.path, record).items()}
        envs = adapter_envs.prepare({registry.get(c.adapter) for c in suite.cells}, build=build)
        self.folder.write(replace(record, measured={**record.measured, **measured},
                                  adapter_envs=adapter_envs.records(envs)))
        return envs

    def at_end(self, end) -> None:
        """end(outcome) -> (record fields, {file name: text}): what the command concludes from the rows, however
        the stages ended (a tune's decision), written with the report."""
        self._end = end

    def exit_code(self, allow_errors: bool) -> int:
        return exit_code(self.outcome, self.view.results if self.view is not None else None, allow_errors)


def exit_code(outcome: Outcome, results, allow_errors: bool) -> int:
    """130 interrupted; 1 rows or the report not written (results None), or (unless allow_errors) failed rows;
    else 0."""
    if outcome.interrupted:
        return 130
    if outcome.store_failed or results is None:
        return 1
    failed = [r for r in results.runs if r.status in FAILED]
    if failed and not allow_errors:
        print(f"rlbench: {len(failed)} row(s) with status error, timeout or lost: exit 1 (--allow-errors: exit 0)",
              file=sys.stderr)
        return 1
    return 0


@contextlib.contextmanager
def session(job: Job):
    """The run folder chosen (a resumed one checked: the same plan on the same machine) and the cluster joined,
    left however the command ends. Nothing is written until `Session.open`."""
    folder = RunDir.choose(job.name, job.out, job.resume)
    machine = fingerprint()
    plan = rundir.plan_record(job.command, job.args, job.suite_text, job.settings, job.cells, folder.run_id,
                              machine, **job.plan_extra)
    saved = folder.check_resumable(plan)
    try:
        cluster = join(job.settings, job.cells)
        if saved and cluster is not None:
            same_class(folder.path, cluster)
        yield Session(job, folder, machine, plan, saved, cluster)
    finally:
        leave()


def same_class(out_dir, cluster) -> None:
    """A resumed cluster run goes on on nodes of the class it started on: rows of two classes never pool."""
    started = (rundir.read_record(out_dir).cluster or {}).get("class")
    if started and started != cluster.class_id:
        raise UsageError(f"resume {out_dir}: it ran on nodes of class {started}, the cluster's nodes now are of class "
                         f"{cluster.class_id}; resume it when nodes of class {started} are in the cluster")


@contextlib.contextmanager
def stops_early(outcome, out_dir):
    """Ctrl-C, SIGTERM, SIGHUP and a full disk end the stages inside early, every finished row kept; the
    outcome says which, for the exit code."""
    previous = _handle_signals()
    try:
        yield
    except KeyboardInterrupt as exc:
        outcome.interrupted = getattr(exc, "signal", "SIGINT")
        remove_temp_folders()   # what the interrupt cut short of a repeat's cleanup
        print("rlbench: interrupted; every finished repeat is kept "
              f"(`rlbench resume {out_dir}` runs the rest)", file=sys.stderr)
    except (StoreError, OSError) as exc:
        outcome.store_failed = str(exc)
        print(f"rlbench: error: {exc}; every earlier row is kept. Free space, then `rlbench resume {out_dir}` "
              "runs the rest", file=sys.stderr)
    finally:
        _restore_signals(previous)


def ray_cluster(out_dir):
    """The Ray cluster the cells' actors ran on, as the last cell saw it, and where each cell's actors ran;
    None when no cell used one."""
    actors = [r for r in ResultSet.load(out_dir).runs if r.get("cluster")]
    if not actors:
        return None
    return {**actors[-1]["cluster"], "placements": {r.cell_id: r.get("placement") for r in actors}}


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
    raise Interrupted(signum)
