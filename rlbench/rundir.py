"""The run folder: which folders a run may write into, the lock that keeps it to one run at a time, and
the plan it keeps so that it can be reproduced elsewhere or resumed.

`--out` is a new (or empty) folder, or an rlbench run folder being resumed: a run never writes into a
folder of someone else's files. The lock is an advisory lock (filelock) on `.rlbench.lock`, released by
the kernel whatever way the run ends; `.rlbench.owner` says who holds it, for the refusal message.
"""
import json
import os
import sys
import time

from filelock import FileLock, Timeout

from rlbench.errors import UsageError

PLAN = "plan.json"
LOCK, OWNER = ".rlbench.lock", ".rlbench.owner"
OURS = {LOCK, OWNER}
RUN_MARKERS = ("results.jsonl", PLAN)
# what must match for rows of two sessions to stand in one run (rlbench.fingerprint's keys)
MACHINE_KEYS = ("cpu_model", "cpu_logical_cores", "cpu_affinity", "ram_gb", "gpus", "python", "packages",
                "rlbench_version", "git")


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
    from rlbench.report.writer import write_atomic
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
