"""validation.csv and its console and HTML views: measured vs published, with a verdict per check; a
measured ratio with its bootstrap 95% CI."""

from rlbench.families.validation.checks import COLUMNS, validation_rows
from rlbench.report.csv_reporter import to_csv
from rlbench.report.format import data_v, esc, si, with_ci


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


def validation_table(rows) -> str:
    head = "".join(f"<th>{h}</th>" for h in ("check", "env", "workers", "quantity", "measured [95% CI]",
                                               "published", "measured / published", "verdict", "conditions"))
    body = []
    for r in rows:
        bad = "outside" in r["verdict"] or "opposite" in r["verdict"]
        cells = [f"<td>{esc(v)}</td>" for v in (r["check"], r["env"], r["workers"], r["quantity"])]
        cells += [f"<td data-v='{data_v(r['measured'])}'>{esc(measured(r))}</td>"]
        cells += [f"<td data-v='{data_v(v)}'>{si(v)}</td>" for v in (r["published"], r["measured_over_published"])]
        cells += [f"<td>{esc(r['verdict'])}</td>", f"<td><small>{esc(r['conditions'])}</small></td>"]
        body.append(f"<tr{' class=bad' if bad else ''}>" + "".join(cells) + "</tr>")
    return f"<table class='sortable'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def validation_text(rows) -> str:
    lines = [f"{'check':<14} {'env':<34} {'w':>2}  {'quantity':<52} {'measured [95% CI]':>24} {'published':>9}  "
             "verdict"]
    for r in rows:
        lines.append(f"{r['check']:<14} {r['env'][:34]:<34} {r['workers']:>2}  {r['quantity'][:52]:<52} "
                     f"{measured(r):>24} {si(r['published']):>9}  {r['verdict']}")
    return "\n".join(lines)
