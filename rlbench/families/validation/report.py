"""validation.csv and its console and HTML views: measured vs published, with a verdict per check."""

from rlbench.families.validation.checks import COLUMNS, validation_rows
from rlbench.report.csv_reporter import to_csv
from rlbench.report.format import esc as _e
from rlbench.report.format import si


def validation_csv(results) -> dict:
    rows = validation_rows(results)
    return {"validation.csv": to_csv(rows, COLUMNS)} if rows else {}


def validation_section(results) -> str:
    rows = validation_rows(results)
    return "<h2>Validation: measured vs published</h2>" + validation_table(rows) if rows else ""


def validation_table(rows) -> str:
    head = "".join(f"<th>{h}</th>" for h in ("check", "env", "workers", "quantity", "measured", "published",
                                               "measured / published", "verdict", "conditions"))
    body = []
    for r in rows:
        bad = "outside" in r["verdict"] or "opposite" in r["verdict"]
        nums = [r["measured"], r["published"], r["measured_over_published"]]
        cells = [_e(r["check"]), _e(r["env"]), _e(r["workers"]), _e(r["quantity"])]
        cells += [si(v) for v in nums]
        cells += [_e(r["verdict"]), f"<small>{_e(r['conditions'])}</small>"]
        body.append(f"<tr{' class=bad' if bad else ''}>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return f"<table class='sortable'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def validation_text(rows) -> str:
    lines = [f"{'check':<14} {'env':<34} {'w':>2}  {'quantity':<52} {'measured':>9} {'published':>9}  verdict"]
    for r in rows:
        lines.append(f"{r['check']:<14} {r['env'][:34]:<34} {r['workers']:>2}  {r['quantity'][:52]:<52} "
                     f"{si(r['measured']):>9} {si(r['published']):>9}  {r['verdict']}")
    return "\n".join(lines)
