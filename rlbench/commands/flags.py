"""The regression gates' flags (compare, history check, history show, bisect), each declared once here and
called by every request that takes it, as rlbench.planning.request declares the sweep's and the build's."""
import os

from rlbench.errors import UsageError
from rlbench.planning.request import flag
from rlbench.results.history import DEFAULT_DB


def threshold(default: str):
    return flag(f"smallest slowdown that counts (default {default.replace('%', '%%')})", default)


def alpha(what: str):
    """The gate's significance level; `what` says what it bounds (one U test, the false alarms over a run)."""
    return flag(f"{what} (default 0.05)", 0.05)


def gate_out(default: str):
    return flag(f"where the gate's files go (default {default})")


def db():
    return flag(f"the history file (default $RLBENCH_HISTORY, else {DEFAULT_DB})")


def db_path(given: str) -> str:
    """--db as given, else $RLBENCH_HISTORY (read when the command runs), else the default file."""
    return given or os.environ.get("RLBENCH_HISTORY") or DEFAULT_DB


def checked_alpha(value: float) -> float:
    if not 0 < value < 1:
        raise UsageError(f"--alpha {value:g} must be between 0 and 1")
    return value
