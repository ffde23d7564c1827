"""profiles.csv and the HTML section for `--profile` runs: per profiled cell, the seconds py-spy saw in
each stage (rlbench.results.profiles), drawn as one stacked bar per strategy, setup kept out of the bar."""
import os

from rlbench.report import charts
from rlbench.report.csv_reporter import to_csv
from rlbench.report.format import esc, fixed
from rlbench.report.table import Column, table
from rlbench.results.profiles import STAGES, breakdown

COLOURS = {**charts.STAGE_COLOURS, "learner": charts.STAGE_COLOURS["learn"]}
LABELS = {"env": "env step", "inference": "policy inference", "learner": "learner", "ipc": "IPC / serialization / wait",
          "harness": "harness", "other": "other", "setup": "setup (imports, open, close)"}
RUNNING = [s for s in STAGES if s != "setup"]
COLUMNS = ("cell_id", "profile", *(f"{s}_s" for s in STAGES), *(f"{s}_frac" for s in RUNNING))


def profile_rows(cells, out_dir: str) -> list:
    """One row per cell with a py-spy profile under out_dir: its seconds per stage and their shares of the
    seconds outside setup (a profile that cannot be read is left out)."""
    rows = []
    for cell in cells:
        path = cell.profile and os.path.join(out_dir, cell.profile)
        if not path or not os.path.exists(path):
            continue
        try:
            seconds = breakdown(path)
        except (OSError, ValueError, KeyError):
            continue
        running = sum(seconds[s] for s in RUNNING) or float("nan")
        rows.append({"cell_id": cell.cell_id, "profile": cell.profile,
                     **{f"{s}_s": seconds[s] for s in STAGES},
                     **{f"{s}_frac": seconds[s] / running for s in RUNNING}})
    return rows


def export_profiles(view) -> dict:
    """profiles.csv of a RunView (rlbench.report.view), for a run with --profile."""
    return {"profiles.csv": to_csv(view.profiles, COLUMNS).encode()} if view.profiles else {}


def _seconds(v) -> str:
    return fixed(v, ".2f")


def _stage_column(stage) -> Column:
    return Column(f"{LABELS[stage]} s", lambda r: r[f"{stage}_s"], _seconds)


def _speedscope(row) -> str:
    return f"<a href='{esc(row['profile'])}'>speedscope</a>"


def profiles_section(view) -> str:
    rows = view.profiles
    if not rows:
        return ""
    chart = charts.to_html(profiles_figure(rows), charts.chart_id("profiles", "stages"))
    columns = [Column("cell", lambda r: r["cell_id"]), *map(_stage_column, STAGES),
               Column("profile", lambda r: r["profile"], html=_speedscope)]
    return (f"<h2>Where the time goes (py-spy, every process of the cell)</h2>{chart}"
            f"<p>Shares of the sampled seconds outside setup, summed over the cell's processes; open a file at "
            f"speedscope.app (or any speedscope viewer) for the full flame graph.</p>{table(columns, rows)}")


def profiles_figure(rows):
    """One stacked bar per profiled cell: the shares of its sampled seconds outside setup, per stage."""
    return charts.stacked_bars(
        [(r["cell_id"], {s: r[f"{s}_frac"] for s in RUNNING},
          "py-spy: " + ", ".join(f"{LABELS[s]} {_seconds(r[f'{s}_s'])} s" for s in RUNNING)) for r in rows],
        [(s, LABELS[s], COLOURS[s]) for s in RUNNING])
