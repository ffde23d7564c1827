"""The run folder: which folders a run may write into, the lock that keeps it to one run at a time, and the plan
it keeps so that it can be reproduced elsewhere or resumed. A run never writes into a folder of someone else's
files; the lock is an advisory lock (filelock) on `.rlbench.lock`, and `.rlbench.owner` says who holds it.
"""
import json
import os
import sys
import time
from dataclasses import replace

from filelock import FileLock, Timeout

from rlbench.errors import UsageError
from rlbench.machine.fingerprint import now
from rlbench.report.writer import write_atomic
from rlbench.results.model import ENV, ResultSet
from rlbench.results.record import RunRecord
from rlbench.results.store import ResultStore

REPORTS = "reports"  # where runs go by default; reports/latest points at the last one
PLAN = "plan.json"
LOCK, OWNER = ".rlbench.lock", ".rlbench.owner"
OURS = {LOCK, OWNER}
RUN_MARKERS = ("results.jsonl", PLAN)
# what must match for rows of two sessions to stand in one run (rlbench.machine.fingerprint's keys)
MACHINE_KEYS = ("cpu_model", "cpu_logical_cores", "cpu_affinity", "ram_gb", "gpus", "python", "packages",
                "rlbench_version", "git")


class RunDir:
    """One run folder, from choosing it to its report: its id, its lock (held inside `with`), plan.json,
    env.json (the latest RunRecord written), results.jsonl, the reports/latest link and the report.
    `rlbench run` and `rlbench tune` both use it."""

    def __init__(self, path: str, run_id: str, resuming: bool = False):
        self.path, self.run_id, self.resuming = path, run_id, resuming
        self.record = None  # the rlbench.results.record.RunRecord env.json holds
        self._lock = None

    @classmethod
    def choose(cls, name: str, out: str = None, resume: str = None) -> "RunDir":
        """--resume's folder, --out, or reports/<run-id>; nothing is written yet."""
        if resume and out and os.path.abspath(out) != os.path.abspath(resume):
            raise UsageError(f"--out {out} and --resume {resume}: a resumed run writes into its own folder")
        run_id = new_run_id(name)
        return cls(resume or out or os.path.join(REPORTS, run_id), run_id, bool(resume))

    def check_resumable(self, plan: dict):
        """The saved plan of a folder resumed (its run id kept), when it is the same run on the same
        machine; None for a new run. Checked before the lock: a refusal writes nothing."""
        if not self.resuming:
            return None
        saved = check_resumable(self.path, plan)
        self.run_id = saved["run_id"]
        return saved

    def __enter__(self) -> "RunDir":
        self._lock = open_out_dir(self.path, self.resuming)
        return self

    def __exit__(self, *exc) -> None:
        self._lock.release()

    def begin(self, record, plan: dict = None) -> None:
        """plan.json (a new run's), results.jsonl (interrupted from here on, it is still a run, of no rows),
        env.json and the latest link."""
        if plan is not None:
            write_plan(self.path, plan)
        ResultStore(self.path).close()
        self.write(record)
        point_latest(self.path)

    def write(self, record) -> None:
        """env.json: the record, whole and atomically."""
        write_atomic(os.path.join(self.path, ENV), json.dumps(record.to_json(), indent=2, default=str) + "\n")
        self.record = record

    def read_record(self):
        """The RunRecord an earlier session of this run wrote (an empty one when env.json is unreadable)."""
        return read_record(self.path)

    def export(self, files: dict = None, **end):
        """The run's end: the command's own `files` (name -> text: a tune's tune.json), env.json's last record
        with `end` and ended_at, then every file of the report (from results.jsonl, as `rlbench report` makes
        it); returns the run's view (rlbench.report.view.RunView), or None, with one line said, when they
        cannot be written."""
        try:
            for name, text in (files or {}).items():
                write_atomic(os.path.join(self.path, name), text)
            self.write(replace(self.record, ended_at=now(), **end))
            return rebuild_report(self.path)
        except OSError as exc:
            print(f"rlbench: error: cannot write the report: {exc.strerror or exc}; `rlbench report {self.path}` "
                  "rebuilds it from results.jsonl", file=sys.stderr)
            return None

    def done(self) -> set:
        """(cell, repeat, profiled) of the rows it holds, but `lost` ones (a node went away under them)."""
        return {r.job for r in ResultSet.load(self.path).runs if r.status != "lost"}


def is_run(path: str) -> bool:
    return any(os.path.exists(os.path.join(path, m)) for m in RUN_MARKERS)


def refuse_if_held(path: str) -> None:
    """A folder a live run holds is refused first, naming that run (whatever else is wrong with it)."""
    if not os.path.exists(os.path.join(path, LOCK)):
        return
    probe = FileLock(os.path.join(path, LOCK))
    try:
        probe.acquire(timeout=0)
    except Timeout:
        raise UsageError(f"{path} is in use by another rlbench run ({holder(path)})") from None
    except OSError:
        return  # unwritable: the caller says so
    probe.release()


def check_new(path: str, flag: str = "--out") -> None:
    """Refuse, before anything is written, a destination that is not a new or empty folder."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"{flag} {path} is a file, not a folder (give a new folder)")
    if not os.path.isdir(path):
        return
    refuse_if_held(path)
    if is_run(path):
        raise UsageError(f"{flag} {path} already holds a run; resume it with `rlbench resume {path}` "
                         "or give a new folder")
    others = sorted(set(os.listdir(path)) - OURS)
    if others:
        shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        raise UsageError(f"{flag} {path} is not empty and not an rlbench run (holds {shown}); give a new folder")


def check_run(path: str, flag: str) -> None:
    if not os.path.isdir(path):
        raise UsageError(f"{flag} {path}: not a folder")
    refuse_if_held(path)
    if not os.path.exists(os.path.join(path, PLAN)):
        raise UsageError(f"{flag} {path}: not a resumable rlbench run (no {PLAN})")


class RunLock:
    """Held for the whole run; a second run into the same folder is refused, naming the holder."""

    def __init__(self, path: str):
        self.path = path
        self._lock = FileLock(os.path.join(path, LOCK))

    def acquire(self) -> "RunLock":
        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            raise UsageError(f"{self.path} is in use by another rlbench run ({holder(self.path)})") from None
        except OSError as exc:
            raise UsageError(f"cannot write to {self.path}: {exc.strerror or exc}") from None
        try:
            with open(os.path.join(self.path, OWNER), "w") as f:
                json.dump({"pid": os.getpid(), "started_at": time.strftime("%Y-%m-%d %H:%M:%S"),
                           "argv": sys.argv}, f)
        except OSError as exc:
            self._lock.release()
            raise UsageError(f"cannot write to {self.path}: {exc.strerror or exc}") from None
        return self

    def release(self) -> None:
        try:
            os.unlink(os.path.join(self.path, OWNER))
        except OSError:
            pass
        self._lock.release()


def holder(path: str) -> str:
    try:
        with open(os.path.join(path, OWNER)) as f:
            owner = json.load(f)
        return f"pid {owner['pid']} since {owner['started_at']}: {' '.join(owner['argv'])}"
    except (OSError, ValueError, KeyError, TypeError):
        return "holder unknown"


def write_plan(path: str, plan: dict) -> None:
    write_atomic(os.path.join(path, PLAN), json.dumps(plan, indent=2, default=str) + "\n")


def read_plan(path: str) -> dict:
    try:
        with open(os.path.join(path, PLAN)) as f:
            plan = json.load(f)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}/{PLAN}: cannot read the run's plan ({exc})") from None
    if not isinstance(plan, dict) or not isinstance(plan.get("args"), dict):
        raise UsageError(f"{path}/{PLAN}: not an rlbench plan (no args)")
    return plan


def differences(saved: dict, now: dict, keys) -> list:
    """'key: saved -> now' for each key whose value differs."""
    return [f"{k}: {_short(saved.get(k))} -> {_short(now.get(k))}" for k in keys if saved.get(k) != now.get(k)]


def _short(value) -> str:
    text = json.dumps(value, default=str, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


def new_run_id(suite_name: str) -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + "".join(c if c.isalnum() else "-" for c in suite_name)


def open_out_dir(out_dir: str, resume: bool) -> "RunLock":
    """Create (or, resuming, reopen) the run folder and lock it; refuse, before writing anything else, a
    folder that is neither new nor a run being resumed, and one another run holds."""
    if resume:
        check_run(out_dir, "resume")
    else:
        check_new(out_dir)
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out_dir}: cannot create it ({exc.strerror or exc})") from None
    lock = RunLock(out_dir).acquire()
    if not resume:
        if is_run(out_dir):  # again, under the lock: another run may have started in between
            lock.release()
            raise UsageError(f"--out {out_dir} already holds a run; give a new folder")
    return lock


def point_latest(out_dir) -> None:
    """reports/latest -> the last run, when the run lives under reports/."""
    parent = os.path.dirname(os.path.abspath(out_dir))
    if os.path.abspath(REPORTS) != parent:
        return
    link = os.path.join(REPORTS, "latest")
    tmp = link + ".tmp"
    if os.path.lexists(tmp):
        os.remove(tmp)
    os.symlink(os.path.basename(os.path.abspath(out_dir)), tmp)
    os.replace(tmp, link)


def plan_record(command: str, args: dict, suite_text, settings, cells, run_id: str, env: dict, **extra) -> dict:
    """plan.json: which command, what it was asked (the request's planned fields, the suite text) and what it
    resolved to (settings, cells; a tune's are found as it searches), and the machine: enough to run it again
    elsewhere, or to resume it here."""
    return _jsonable({"schema": 1, "command": command, "run_id": run_id, "args": args, "suite_text": suite_text,
                      "settings": settings.__dict__, "cells": [c.cell_id for c in cells],
                      "machine": {k: env.get(k) for k in MACHINE_KEYS}, **extra})


def check_resumable(out_dir: str, record: dict) -> dict:
    """The saved plan, when this run is the same run on the same machine; else a UsageError naming what
    differs."""
    saved = read_plan(out_dir)
    differs = []
    if saved.get("cells") != record["cells"]:
        gone = [c for c in saved.get("cells", []) if c not in record["cells"]]
        new = [c for c in record["cells"] if c not in saved.get("cells", [])]
        differs.append("cells: " + "; ".join(filter(None, [f"not planned now: {', '.join(gone[:3])}" if gone else "",
                                                            f"new: {', '.join(new[:3])}" if new else "",
                                                            "" if gone or new else "another order"])))
    differs += [f"settings.{d}" for d in differences(saved.get("settings", {}), record["settings"],
                                                             sorted(record["settings"]))]
    differs += [f"machine.{d}" for d in differences(saved.get("machine", {}), record["machine"],
                                                            MACHINE_KEYS)]
    if differs:
        raise UsageError(f"cannot resume {out_dir}: {' | '.join(differs)}")
    return saved


def _jsonable(value):
    return json.loads(json.dumps(value, default=str))


def read_record(out_dir):
    try:
        with open(os.path.join(out_dir, ENV)) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        doc = {}
    return RunRecord.from_json(doc if isinstance(doc, dict) else {})


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


