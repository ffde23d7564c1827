"""The report's number formatters, one set for every section (tables, chart ticks and hover text):
each gives '-' for a missing value (None or NaN) so a table never shows 'nan'."""
import html
import re

# the pure ones a verdict speaks in (is_num, plain, sig, speedup) live below the report, in rlbench.results.text
from rlbench.results.text import is_num, plain


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


def with_ci(value, low=None, high=None, fmt=plain, unit: str = "") -> str:
    """A ratio (or fraction) and its bootstrap 95% CI in one format: '0.67 [0.61, 0.72]'; with unit='x',
    '1.60x [1.52, 1.69]' (as `speedup`); with fmt=pct, '80% [76%, 84%]'. The value and '[-]' without a CI
    (fewer than 2 repeats a side); '-' without a value."""
    if not is_num(value):
        return "-"
    return f"{fmt(value)}{unit} {ci(low, high, fmt) if is_num(low) and is_num(high) else '[-]'}"


def data_v(v) -> str:
    """A table cell's sort key (its data-v attribute): the number itself, '' when missing."""
    return str(v) if is_num(v) and not isinstance(v, bool) else ""


def figure(name: str, header: str, fmt=si) -> tuple:
    """(header, formatter) of a table column showing `name` (a results.csv column such as latency_p99_ms, or a
    summary.csv one such as latency_p99_ms_median or steps_per_s_ci_low): its label and format from the one
    registry (rlbench.results.metrics.metric); `header` and `fmt` only for a column that is no registered figure."""
    from rlbench.results import metrics
    try:
        m = metrics.metric(name)
    except KeyError:
        return header, fmt
    return m.label, m.format


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
