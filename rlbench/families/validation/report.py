"""validation.csv and claims.csv, and their console and HTML views: measured vs published, with a verdict per
check (a measured ratio with its bootstrap 95% CI), and the claims matrix (rlbench.families.validation.claims)."""

import os

from rlbench.families.validation import claims
from rlbench.families.validation.checks import COLUMNS, validation_rows
from rlbench.report.csv_reporter import to_csv
from rlbench.report.format import esc, si, with_ci
from rlbench.report.table import Column, bad_if, table


def validation_csv(results) -> dict:
    rows, matrix = validation_rows(results), judged_claims([results])
    out = {"validation.csv": to_csv(rows, COLUMNS)} if rows else {}
    return {**out, **({"claims.csv": claims_csv(matrix)} if matrix else {})}


def validation_section(results) -> str:
    rows, matrix = validation_rows(results), judged_claims([results])
    out = "<h2>Validation: measured vs published</h2>" + validation_table(rows) if rows else ""
    return out + ("<h2>Claims of the source papers</h2>" + claims_table(matrix) if matrix else "")


def judged_claims(results_list) -> list:
    """The claims matrix over these runs, or [] when no claim could be judged on them (a run of another suite)."""
    rows = claims.matrix(results_list)
    judged = (claims.REPRODUCED, claims.NOT_REPRODUCED, claims.INCONCLUSIVE)
    return rows if any(r.verdict in judged for r in rows) else []


def claims_csv(rows) -> str:
    """claims.csv: a row per JudgedClaim, claims.COLUMNS."""
    return to_csv([r.record() for r in rows], claims.COLUMNS)


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


def _why(row) -> str:
    """Why, and whether the claim compares rlbench's own implementations, each on its line."""
    return f"<small>{esc(row.why)}{'<br>' if row.why and row.own else ''}{esc(row.own_note)}</small>"


# a row: a JudgedClaim (rlbench.families.validation.claims), marked where not reproduced
CLAIMS_TABLE = (Column("claim", lambda r: r.claim), Column("source", lambda r: r.source),
                Column("says", lambda r: r.says), Column("published", lambda r: r.published),
                Column("rule", lambda r: r.rule), Column("verdict", lambda r: r.verdict),
                Column("measured", lambda r: r.measured), Column("why", lambda r: r.why or r.own_note, html=_why))


def claims_table(rows) -> str:
    return table(CLAIMS_TABLE, rows, bad_if(lambda r: r.verdict == claims.NOT_REPRODUCED))


def noise_text(noise) -> str:
    """What run-to-run noise the ratios' CIs hold, and where it came from."""
    return (f"each ratio's 95% CI holds its run's repeats and run-to-run noise of {noise.sd:.1%} a cell median "
            f"({noise.source})" if noise is not None else "each ratio's 95% CI holds its run's repeats only")


def claims_text(rows, noise=None) -> str:
    tally = ", ".join(f"{n} {v}" for v, n in claims.counts(rows).items())
    lines = [f"claims of the source papers: {len(rows)} ({tally}); {noise_text(noise)}",
             f"{'claim':<26} {'verdict':<20} measured / why"]
    for r in rows:
        said = "; ".join(x for x in (r.measured, r.why, r.own_note) if x)
        lines.append(f"{r.claim:<26} {r.verdict:<20} {said}")
    return "\n".join(lines)


def _shown(path: str) -> str:
    """A folder as the reader finds it: relative to where rlbench ran when it lies below, else as given."""
    rel = os.path.relpath(os.path.abspath(path))
    return path if rel.startswith("..") else rel


def claims_markdown(rows, runs, dirs, noise=None) -> str:
    """claims.md: the matrix over these runs as a Markdown page (a reference set's, docs/claims.md's source)."""
    machine = runs[0].record.machine if runs else {}
    gpus = ", ".join(g.get("name", "?") for g in machine.get("gpus") or []) or "no GPU"
    commits = sorted({(r.record.machine.get("git") or {}).get("commit", "?")[:7] for r in runs})
    tally = ", ".join(f"{n} {v}" for v, n in claims.counts(rows).items())
    lines = ["# Claims of the source papers on this machine", "",
             f"{machine.get('cpu_model', '?')}, {machine.get('cpu_logical_cores', '?')} cores, "
             f"{machine.get('ram_gb', 0):.0f} GB, {gpus}. Judged by `rlbench validate --from` over "
             f"{len(dirs)} run(s) at commit(s) {', '.join(commits)}: {', '.join(f'`{_shown(d)}`' for d in dirs)}. "
             f"{len(rows)} claims: {tally}. The claims and their sources: docs/published.md; the rules: "
             f"rlbench/families/validation/claims.py. {noise_text(noise).capitalize()}.", "",
             "| claim | says | published | rule | verdict | measured | why |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        why = "; ".join(x for x in (r.why, r.own_note) if x)
        cells = [r.claim, r.says, r.published, r.rule, f"**{r.verdict}**", r.measured, why]
        lines.append("| " + " | ".join(str(c).replace("|", "/") for c in cells) + " |")
    return "\n".join(lines) + "\n"
