"""The report's number formatters, one set for every section (tables, chart ticks and hover text):
each gives '-' for a missing value (None or NaN) so a table never shows 'nan'."""
import html
import re


def is_num(v) -> bool:
    """A number that is not NaN (None, strings and NaN are not)."""
    return isinstance(v, (int, float)) and v == v


def esc(s) -> str:
    """Text for HTML (and for plotly's hover and legend text, which reads the same entities)."""
    return html.escape(str(s))


def si(v, small: str = ".3g") -> str:
    """1.23M, 12.35k; below 1000 as `small` formats it (12.3, 0.0456)."""
    if not is_num(v):
        return "-"
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if v >= scale:
            return f"{v / scale:.2f}{unit}"
    return format(v, small)


def sig(v, digits: int = 3) -> str:
    """`digits` significant digits with a k/M/G suffix: 412k, 41.2k, 1.23M, 987 (a headline's rate)."""
    if not is_num(v):
        return "-"
    v = float(f"{v:.{digits}g}")  # rounded first: 999.6k is 1M, not 1e+03k
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.{digits}g}{unit}"
    return f"{v:.{digits}g}"


def rate(v) -> str:
    """A rate as the console prints it: 2.50M, 12.35k, 12.3."""
    return si(v, ".1f")


def fixed(v, spec: str) -> str:
    """format(v, spec), '-' when missing."""
    return format(v, spec) if is_num(v) else "-"


def pct(v, digits: int = 1) -> str:
    """A share: 12.3%."""
    return format(v, f".{digits}%") if is_num(v) else "-"


def ms(v) -> str:
    """A duration in milliseconds: 0.123 ms, 12.3 ms, 1,234 ms."""
    return f"{grouped(v)} ms" if is_num(v) else "-"


def grouped(v, digits: int = 3) -> str:
    """12,345 from 1000 up (digits grouped, no decimals), else `digits` significant digits: 12.3."""
    if not is_num(v):
        return "-"
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.{digits}g}"


def size(n) -> str:
    """A byte count: 10 MB, 1.5 KB, 64 B (decimal units)."""
    if not is_num(n):
        return "-"
    for unit, scale in (("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n} B"


def ci(low, high, fmt=si) -> str:
    """A 95% CI as [low, high], '-' when either bound is missing."""
    return f"[{fmt(low)}, {fmt(high)}]" if is_num(low) and is_num(high) else "-"


def speedup(ratio, low=None, high=None) -> str:
    """1.29x [1.10, 1.52]: a ratio with its CI when it has one; '-' without a ratio."""
    if not is_num(ratio):
        return "-"
    return f"{ratio:.2f}x" + (f" [{low:.2f}, {high:.2f}]" if is_num(low) and is_num(high) else "")


_VALUE = re.compile(r"(?<==)-?\d+(?:\.\d+)?(?:e[-+]?\d+)?\b")


def reason_pattern(reason: str) -> str:
    """A reason with each `name=<number>` masked as `name=N`: `envpool-async needs 0 < batch_size < num_envs
    (num_envs=4, batch_size=8)` and its siblings at other sizes are one pattern."""
    return _VALUE.sub("N", reason)


def reason_counts(reasons) -> dict:
    """reason -> how many times it is given, most first (ties in first-given order): a reason as given when
    every one of its pattern (reason_pattern) reads the same, else the pattern."""
    groups = {}
    for reason in reasons:
        groups.setdefault(reason_pattern(reason), []).append(reason)
    out = {(texts[0] if len(set(texts)) == 1 else key): len(texts) for key, texts in groups.items()}
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))
