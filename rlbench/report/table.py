"""The report's one HTML table: a header per column, a row per item. Every sortable table of the page (and
of compare.html) is drawn here, so the sort script (rlbench.report.html.SORT_JS) meets the same markup
everywhere: a number's cell carries its value as `data-v`, because its text ('1.60x [1.52, 1.69]', '12.35k',
'80%') does not sort as the number it shows."""
from dataclasses import dataclass
from typing import Callable, Optional

from rlbench.report.format import data_v, esc


def _text(v) -> str:
    return "" if v is None else str(v)


@dataclass(frozen=True)
class Column:
    """One column: `value` gives a row's figure (a number is its sort key), `format` its text; `html` gives
    the cell's own markup where it says more than the figure (a CI, a note, a link), the figure still
    sorting it. Text is escaped; `html` is written as given."""
    header: str
    value: Callable
    format: Callable = _text
    html: Optional[Callable] = None

    def td(self, row) -> str:
        v = self.value(row)
        body = self.html(row) if self.html is not None else esc(self.format(v))
        key = data_v(v)
        return f"<td data-v='{key}'>{body}</td>" if key else f"<td>{body}</td>"


def table(columns, rows, row_attrs: Callable = None, cls: str = "sortable") -> str:
    """`<table class='sortable'>` of rows (in the order given) under the columns' headers; row_attrs(row) the
    attributes of a row's <tr> ('' for none: "class='bad'" marks a failed one)."""
    head = "".join(f"<th>{esc(c.header)}</th>" for c in columns)
    body = []
    for row in rows:
        attrs = row_attrs(row) if row_attrs is not None else ""
        body.append(f"<tr{' ' + attrs if attrs else ''}>{''.join(c.td(row) for c in columns)}</tr>")
    cls_attr = f" class='{cls}'" if cls else ""
    return f"<table{cls_attr}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def bad_if(failed: Callable) -> Callable:
    """row_attrs that mark the rows `failed` picks (the page's CSS shades tr.bad)."""
    return lambda row: "class='bad'" if failed(row) else ""
