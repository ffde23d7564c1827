"""validation.csv and its console and HTML views: measured vs published, with a verdict per check; a
measured ratio with its bootstrap 95% CI."""

from rlbench.families.validation.checks import COLUMNS, validation_rows
from rlbench.report.csv_reporter import to_csv
from rlbench.report.format import esc, si, with_ci
from rlbench.report.table import Column, bad_if, table


def validation_csv(results) -> dict:
    rows = validation_rows(results)
    return {"validation.csv": to_csv(rows, COLUMNS)} if rows else {}


def validation_section(results) -> str:
    rows = validation_rows(results)
    return "<h2>Validation: measured vs published</h2>" + validation_table(rows) if rows else ""


def _is_ratio(row) -> bool:
    """A measured ratio carries its CI bounds (NaN when unknown); another quantity None."""
    return row.get("measured_ci_low") is not None


def measured(row) -> str:
    """The measured figure: a ratio as '0.67 [0.61, 0.72]' ('[-]' with fewer than 2 repeats a side)."""
    if _is_ratio(row):
        return with_ci(row["measured"], row["measured_ci_low"], row["measured_ci_high"], fmt=si)
    return si(row["measured"])


def _text_column(header: str, key: str) -> Column:
    return Column(header, lambda r: r[key])


def _conditions(row) -> str:
    return f"<small>{esc(row['conditions'])}</small>"


TABLE = (_text_column("check", "check"), _text_column("env", "env"), _text_column("workers", "workers"),
         _text_column("quantity", "quantity"),
         Column("measured [95% CI]", lambda r: r["measured"], html=lambda r: esc(measured(r))),
         Column("published", lambda r: r["published"], si),
         Column("measured / published", lambda r: r["measured_over_published"], si),
         _text_column("verdict", "verdict"), Column("conditions", lambda r: r["conditions"], html=_conditions))


def _off(row) -> bool:
    """A check whose measurement lands outside the published range, or points the opposite way."""
    return "outside" in row["verdict"] or "opposite" in row["verdict"]


def validation_table(rows) -> str:
    return table(TABLE, rows, bad_if(_off))


def validation_text(rows) -> str:
    lines = [f"{'check':<14} {'env':<34} {'w':>2}  {'quantity':<52} {'measured [95% CI]':>24} {'published':>9}  "
             "verdict"]
    for r in rows:
        lines.append(f"{r['check']:<14} {r['env'][:34]:<34} {r['workers']:>2}  {r['quantity'][:52]:<52} "
                     f"{measured(r):>24} {si(r['published']):>9}  {r['verdict']}")
    return "\n".join(lines)
