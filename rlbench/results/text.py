"""The few words the results model speaks in itself: whether a value is a number, a rate and a ratio as a
verdict gives them, a cell's env, cells grouped under a label. They sit here, below the report, because the
ranking's verdict (rlbench.results.ranking) says its sentence in them wherever it is read (tune, a family's
headline, compare); rlbench.report.format and rlbench.report.points build every other format and label on
these same ones, so a number reads alike in a verdict and in a table."""
from rlbench.workload import kv_label


def is_num(v) -> bool:
    """A number that is not NaN (None, strings and NaN are not)."""
    return isinstance(v, (int, float)) and v == v


def plain(v) -> str:
    """A ratio or fraction as a plain number: 0.67; below 0.1, two significant digits (a CPU backend at
    0.00078x a GPU's rate is not '0.00x'); '-' when missing."""
    if not is_num(v):
        return "-"
    return f"{v:.2g}" if v != 0 and abs(v) < 0.1 else f"{v:.2f}"


def sig(v, digits: int = 3) -> str:
    """`digits` significant digits with a k/M/G suffix: 412k, 41.2k, 1.23M, 987 (a headline's rate)."""
    if not is_num(v):
        return "-"
    v = float(f"{v:.{digits}g}")  # rounded first: 999.6k is 1M, not 1e+03k
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.{digits}g}{unit}"
    return f"{v:.{digits}g}"


def speedup(ratio, low=None, high=None) -> str:
    """1.29x [1.10, 1.52]: a ratio with its CI when it has one; '-' without a ratio."""
    if not is_num(ratio):
        return "-"
    return f"{plain(ratio)}x" + (f" [{plain(low)}, {plain(high)}]" if is_num(low) and is_num(high) else "")


def env_label(cell) -> str:
    """A cell's env and the arguments it was given: what tells two workloads apart (a Run has the same
    attributes, so it takes one too)."""
    return cell.env + (f" ({kv_label(cell.env_kwargs)})" if cell.env_kwargs else "")


def group_by(items, key) -> dict:
    """key(item) -> the items with that key, in the order given (a run's order is its suite's)."""
    groups = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    return groups
