"""The benchmark history: `history add` is idempotent (a run known by host, id and start; a resumed run's new
repeats replace its old ones), refuses a file of another schema and what is not a run; series over commits find
a step beyond the learned run-to-run noise and none in A/A runs; `history check` flags a slowed cell and passes
A/A runs and a cell without history; `history show` writes a page with a chart per cell and a CSV of the points."""
import json
import shutil
import sqlite3

import numpy as np
import pytest
from support import run_cli
from support.history_runs import CELLS, aa_runs, make_run, quick_cells

from rlbench.errors import UsageError
from rlbench.results.changes import check, holm, noise, points
from rlbench.results.history import SCHEMA, History, run_folders


def test_add_is_idempotent_and_a_grown_run_replaces_its_repeats(tmp_path):
    run, cells = make_run(tmp_path, "r1")
    db = str(tmp_path / "h.sqlite")
    with History(db) as h:
        first = h.add(str(run))
        again = h.add(str(run))
        copy = tmp_path / "elsewhere"
        shutil.copytree(run, copy)
        moved = h.add(str(copy))                 # the same run in another folder: the same run
        with open(run / "results.jsonl", "a") as f:
            row = json.loads((run / "results.jsonl").read_text().splitlines()[0])
            f.write(json.dumps({**row, "repeat": 99}) + "\n")
        grown = h.add(str(run))
        n_rows = h.db.execute("SELECT count(*) FROM repeats").fetchone()[0]
        n_runs = h.db.execute("SELECT count(*) FROM runs").fetchone()[0]
    assert (first.outcome, again.outcome, moved.outcome, grown.outcome) == ("new", "unchanged", "unchanged",
                                                                            "updated")
    assert n_runs == 1 and n_rows == first.repeats + 1
    assert sqlite3.connect(db).execute("PRAGMA user_version").fetchone()[0] == SCHEMA


def test_a_file_of_another_schema_and_what_is_no_run_are_refused(tmp_path):
    db = tmp_path / "old.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE runs (x)")
    con.execute(f"PRAGMA user_version = {SCHEMA + 1}")
    con.commit()
    con.close()
    with pytest.raises(UsageError, match=rf"has schema {SCHEMA + 1} \(valid: {SCHEMA}"):
        History(str(db))
    with pytest.raises(UsageError, match="no run under"):
        run_folders([str(tmp_path)])
    with pytest.raises(UsageError, match="no history at"):
        History(str(tmp_path / "missing.sqlite"), create=False)


def _points(tmp_path, runs):
    with History(str(tmp_path / "h.sqlite")) as h:
        for r in runs:
            h.add(str(r))
        return points(h.repeats())


def test_noise_is_learned_from_aa_runs_and_a_step_is_found_where_it_is(tmp_path):
    """20 A/A runs at 2% noise learn about 2%; then 6 runs of a commit 10% slower on one cell: one change point,
    at the first of them, about 0.9x; the other cells have none."""
    runs = aa_runs(tmp_path, 20)
    cells = quick_cells()
    rng = np.random.default_rng(1)
    runs += [make_run(tmp_path, f"b{i}", np.exp(rng.normal(0, 0.02, CELLS)), commit="b" * 40, slow_cell=cells[1],
                      slow=0.9, started=f"2026-11-27T05:{i:02d}:00+00:00")[0] for i in range(6)]
    pts = _points(tmp_path, runs)
    noises = noise(pts)
    from rlbench.results.changes import change_points
    found = {}
    for key, series in pts.groupby(["suite", "cell_id", "machine_class"]):
        assert 0.01 <= noises[key].sd <= 0.04 and noises[key].source.startswith("A/A")
        found[key[1]] = change_points(series.reset_index(drop=True), noises[key].sd)
    assert [c.index for c in found[cells[1]]] == [20]
    assert found[cells[1]][0].ratio == pytest.approx(0.9, abs=0.03) and found[cells[1]][0].commit == "b" * 40
    assert all(found[c] == [] for c in cells if c != cells[1])


@pytest.mark.parametrize("slow, verdict", [(0.85, "slower"), (1.0, "same")])
def test_check_flags_a_slowed_cell_and_passes_an_aa_run(tmp_path, slow, verdict):
    runs = aa_runs(tmp_path, 12)
    history = _points(tmp_path, runs)
    cells = quick_cells()
    new_run, _ = make_run(tmp_path / "new", "new", slow_cell=cells[2], slow=slow, started="2026-11-27T06:00:00+00:00")
    with History(":memory:") as scratch:
        scratch.add(str(new_run))
        new = points(scratch.repeats())
    changes = {c.cell_id: c for c in check(history, new, noise(history))}
    assert changes[cells[2]].verdict == changes[cells[2]].first_verdict == verdict
    assert [c.verdict for cell, c in changes.items() if cell != cells[2]] == ["same"] * (CELLS - 1)
    assert changes[cells[2]].window == 12 and changes[cells[2]].noise_source.startswith("A/A")


def test_confirm_runs_the_slower_cell_again_and_clears_a_passing_hiccup(tmp_path, capsys):
    """A real one-cell run, 8 A/A copies of it, and a copy whose cell lost 70% (a hiccup of the host): the check
    finds it slower, `--confirm` runs that cell again from the run's plan, which is not slower: the verdict is
    `same`, the first one kept. The threshold is 50%: the second run is a real measurement, and on a machine that
    other tests load it may be slower than the first by more than the default's 2%."""
    real = tmp_path / "real"
    assert run_cli(["run", "--adapter", "serial", "--env", "rlbench/Synthetic-v0", "--env-kwarg", "step_cost_us=200",
                    "--num-envs", "1", "--repeats", "3", "--duration", "0.2"], real).rc == 0
    rng = np.random.default_rng(0)
    db = str(tmp_path / "h.sqlite")
    with History(db) as h:
        for i in range(8):
            h.add(str(make_run(tmp_path / "aa", f"aa{i}", np.exp(rng.normal(0, 0.02, CELLS)), source=real,
                               started=f"2026-11-27T04:{i:02d}:00+00:00")[0]))
    cell = json.loads((real / "results.jsonl").read_text().splitlines()[0])["cell_id"]
    hiccup, _ = make_run(tmp_path, "hiccup", slow_cell=cell, slow=0.3, source=real,
                         started="2026-11-27T05:00:00+00:00")
    assert run_cli(["history", "check", str(hiccup), "--db", db, "--confirm", "--threshold", "50%"]).rc == 0
    out = capsys.readouterr().out
    assert "confirming 1 slower cell(s) in a second run" in out and "suite: ok" in out
    import pandas as pd
    row = pd.read_csv(hiccup / "history-check.csv").iloc[0]
    assert (row["verdict"], row["first_verdict"]) == ("same", "slower") and row["confirm_ratio"] > 0.5
    assert "not in its confirmation run" in row["reason"] and (hiccup / "confirm-1" / "results.jsonl").exists()


def test_a_cell_without_history_is_not_judged(tmp_path):
    history = _points(tmp_path, aa_runs(tmp_path, 1))
    new_run, _ = make_run(tmp_path / "n", "new", started="2026-11-27T06:00:00+00:00")
    with History(":memory:") as scratch:
        scratch.add(str(new_run))
        new = points(scratch.repeats())
    assert {c.verdict for c in check(history, new, noise(history))} == {"no history"}


def test_holm_adjusts_step_down():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([]) == []


def test_the_commands_add_check_and_show(tmp_path, capsys):
    runs = aa_runs(tmp_path / "runs", 8)
    db = str(tmp_path / "h.sqlite")
    assert run_cli(["history", "add", str(tmp_path / "runs"), "--db", db]).rc == 0
    assert "8 run(s): 8 new" in capsys.readouterr().out
    assert run_cli(["history", "add", str(runs[0]), "--db", db]).rc == 0
    assert "1 unchanged" in capsys.readouterr().out
    cells = quick_cells()
    slowed, _ = make_run(tmp_path / "new", "new", slow_cell=cells[0], slow=0.8, started="2026-11-27T07:00:00+00:00")
    check_run = run_cli(["history", "check", str(slowed), "--db", db])
    out = capsys.readouterr().out
    assert check_run.rc == 1 and f"slower      {cells[0]}" in out and "suite: REGRESSED" in out
    assert (slowed / "history-check.csv").exists()
    show = run_cli(["history", "show", "--db", db, "--out", str(tmp_path / "pages")])
    assert show.rc == 0
    page = (tmp_path / "pages" / "history-quick.html").read_text()
    assert page.count("class='chart'") == CELLS and "Open regressions" in page
    csv = (tmp_path / "pages" / "history-quick.csv").read_text().splitlines()
    assert len(csv) == 1 + 8 * CELLS
    assert run_cli(["history", "show", "--db", db, "--suite", "nope"]).rc == 2
    assert "no suite 'nope'" in capsys.readouterr().err


def test_history_check_csv_keeps_its_columns_and_values(tmp_path):
    """history-check.csv is read by scripts (check_history.py reads its verdict and first_verdict): one gate's
    CellChanges (rlbench.results.gate) write the header and the values the row dicts wrote before them."""
    aa_runs(tmp_path / "runs", 8)
    db = str(tmp_path / "h.sqlite")
    assert run_cli(["history", "add", str(tmp_path / "runs"), "--db", db]).rc == 0
    cells = quick_cells()
    slowed, _ = make_run(tmp_path / "new", "new", slow_cell=cells[0], slow=0.8, started="2026-11-27T07:00:00+00:00")
    assert run_cli(["history", "check", str(slowed), "--db", db]).rc == 1
    lines = (slowed / "history-check.csv").read_text().splitlines()
    assert lines[0] == ("cell_id,verdict,new_median,level_median,ratio,p_value,p_holm,window,noise_sd,noise_source,"
                        "first_verdict,confirm_ratio,reason")
    assert lines[2] == ("serial/CartPole-v1/n=1/random,slower,77207,95628.3,0.807365,5.61198e-06,2.24479e-05,8,"
                        "0.0183031,A/A: 8 runs of this cell,slower,,\"19.3% below the level of the last 8 runs, "
                        "p=2.24e-05 (Holm)\"")
    assert lines[1] == ("gymnasium-sync/CartPole-v1/n=1/random,same,70322.7,70432.5,0.998441,0.460038,1,8,0.014144,"
                        "A/A: 8 runs of this cell,same,,within 2%")
