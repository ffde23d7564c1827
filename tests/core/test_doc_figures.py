"""Figures in the docs are read back from the committed runs they come from (issue 66, part 6).

A measured figure in docs/ or README.md is marked right after it with the run it comes from:

    8.13k<!--fig cpu-2core-xeon/mujoco "mujoco-rollout/Ant-v4/n=16/random/num_threads=2" steps_per_s_median-->
    1.95x<!--fig cpu-2core-xeon/mujoco "envpool-sync/Ant-v4/n=16/random" / "serial/Ant-v4/n=16/random" steps_per_s_median-->

(a folder under reports/reference/, a cell of its summary.csv, optionally ` / ` a second cell for a ratio, and the
column; or a CSV file there, a row named by its first column: `check-tune-real/check-tune.csv "pong" ratio_to_best`). The comment is invisible on the page. This test fails where the figure shown is not the run's value as
rounded to the digits shown (k = 1e3, M = 1e6), where the run, cell or column is missing, and where a page says
"not from a committed run".
"""
import csv
import re

import pytest
from support import REPO

REFERENCE = REPO / "reports" / "reference"
MARK = re.compile(r'(?P<shown>\d[\d,]*(?:\.\d+)?)(?P<unit>[kMG]?)x?(?:\*\*)?\s*<!--fig\s+(?P<run>\S+)\s+"(?P<a>[^"]+)"'
                  r'(?:\s*/\s*"(?P<b>[^"]+)")?\s+(?P<column>\w+)\s*-->')
UNITS = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9}


def pages() -> list:
    return sorted(REPO.glob("docs/**/*.md")) + [REPO / "README.md"]


def marks() -> list:
    found = []
    for page in pages():
        text = page.read_text()
        for m in MARK.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            found.append(pytest.param(m, id=f"{page.relative_to(REPO)}:{line}"))
    return found


def summary(run: str) -> dict:
    """A run's summary.csv by cell_id, or a committed CSV's rows by their first column."""
    path = REFERENCE / run if run.endswith(".csv") else REFERENCE / run / "summary.csv"
    assert path.exists(), f"{path.relative_to(REPO)}: no such committed run"
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        key = "cell_id" if path.name == "summary.csv" else reader.fieldnames[0]
        return {r[key]: r for r in reader}


def value(rows: dict, run: str, cell: str, column: str) -> float:
    assert cell in rows, f"{run}: no cell {cell}"
    assert column in rows[cell], f"{run}: no column {column}"
    return float(rows[cell][column])


def test_the_docs_mark_figures_and_none_says_it_is_not_from_a_committed_run():
    assert len(marks()) >= 6
    said = [f"{p.relative_to(REPO)}" for p in pages() if "not from a committed run" in p.read_text()]
    assert not said, f"figures not from a committed run: {said}"


@pytest.mark.parametrize("mark", marks())
def test_a_marked_figure_is_its_runs_value(mark):
    rows = summary(mark["run"])
    got = value(rows, mark["run"], mark["a"], mark["column"])
    if mark["b"]:
        got /= value(rows, mark["run"], mark["b"], mark["column"])
    shown = mark["shown"].replace(",", "")
    scale = UNITS[mark["unit"]]
    digits = len(shown.split(".")[1]) if "." in shown else 0
    assert round(got / scale, digits) == pytest.approx(float(shown)), \
        f"shown {mark['shown']}{mark['unit']}, the run has {got:.6g} ({mark['run']} {mark['a']} {mark['column']})"
