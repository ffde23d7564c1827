"""`rlbench compare`: the U test (scipy) is exact for small samples, a regression needs both the threshold
and significance, runs on different machines are not comparable rather than failed, and every compared cell
carries its new/base ratio with a bootstrap CI."""
import csv
import itertools
import json
import math

import pytest

from rlbench import cli
from rlbench.errors import UsageError
from rlbench.results.compare import mann_whitney_u, min_p
from rlbench.results.gate import CellChange, parse_threshold, ratio_label

MACHINE = {"cpu_model": "EPYC", "cpu_logical_cores": 2, "ram_gb": 23.5, "gpus": []}


def write_run(path, cells: dict, env=None):
    """cells: cell_id -> list of steps/s (None = a failed repeat)."""
    path.mkdir(parents=True)
    rows = []
    for index, (cell_id, values) in enumerate(cells.items()):
        for rep, v in enumerate(values):
            rows.append({"cell_id": cell_id, "cell_index": index, "adapter": cell_id.split("/")[0], "repeat": rep,
                         "status": "ok" if v is not None else "error", "steps_per_s": v, "profiled": False,
                         "cpus": 2, "device": "cpu", "omp_threads": 1})
    (path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (path / "env.json").write_text(json.dumps(env or MACHINE))
    return path


def run_compare(tmp_path, base: dict, new: dict, *flags, base_env=None, capsys=None):
    b = write_run(tmp_path / "base", base, base_env)
    n = write_run(tmp_path / "new", new)
    rc = cli.main(["compare", str(b), str(n), *flags])
    with open(n / "compare.csv") as f:
        rows = {r["cell_id"]: r for r in csv.DictReader(f)}
    assert (n / "compare.html").stat().st_size > 0
    return rc, rows


def brute_force_p(x, y) -> float:
    """Two-sided exact p by enumerating every split of the pooled sample."""
    pooled, m = x + y, len(x)
    u = lambda a, b: sum(p > q for p in a for q in b)  # noqa: E731
    observed = u(x, y)
    centre = m * len(y) / 2
    hits = total = 0
    for idx in itertools.combinations(range(len(pooled)), m):
        a = [pooled[i] for i in idx]
        b = [pooled[i] for i in range(len(pooled)) if i not in idx]
        total += 1
        hits += abs(u(a, b) - centre) >= abs(observed - centre)
    return hits / total


@pytest.mark.parametrize("x,y", [([1.0, 2, 3], [4.0, 5, 6]), ([1.0, 5, 9, 2], [3.0, 4, 8]),
                                 ([10.0, 11, 12, 13, 14], [1.0, 12.5, 13.5, 2, 3])])
def test_exact_u_test_matches_enumeration(x, y):
    _, p, method = mann_whitney_u(x, y)
    assert method == "mann-whitney-exact"
    assert p == pytest.approx(brute_force_p(x, y))


def test_normal_approximation_for_large_samples():
    x = [float(i) for i in range(20)]
    _, p, method = mann_whitney_u(x, [v + 100 for v in x])
    assert method == "mann-whitney-normal" and p < 1e-6


def hand_normal_p(x, y) -> float:
    """The normal approximation rlbench computed by hand before scipy: tie-corrected variance, continuity 0.5."""
    m, n = len(x), len(y)
    u = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in x for b in y)
    values = sorted(x + y)
    tie_term = sum(t ** 3 - t for t in (values.count(v) for v in set(values)))
    sigma = math.sqrt(m * n / 12 * ((m + n + 1) - tie_term / ((m + n) * (m + n - 1))))
    if sigma == 0:
        return 1.0
    z = (abs(u - m * n / 2) - 0.5) / sigma
    return min(1.0, math.erfc(max(z, 0) / math.sqrt(2)))


@pytest.mark.parametrize("x,y", [([1.0, 2, 2, 3], [2.0, 3, 4, 4, 5]),                  # ties: never exact
                                 ([float(i % 7) for i in range(15)], [float(i % 5) + 1 for i in range(14)]),
                                 ([float(i) for i in range(13)], [i + 0.5 for i in range(13)]),  # > 12 a side
                                 ([3.0] * 4, [3.0] * 5)])                                 # all tied: p = 1
def test_normal_approximation_matches_the_hand_formula(x, y):
    u, p, method = mann_whitney_u(x, y)
    assert method == "mann-whitney-normal"
    assert u == sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in x for b in y)
    assert p == pytest.approx(hand_normal_p(x, y), rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("m", range(1, 13))
@pytest.mark.parametrize("n", range(1, 13))
def test_min_p_is_what_scipy_gives_fully_separated_samples(m, n):
    from scipy.stats import mannwhitneyu
    below, above = [float(i) for i in range(m)], [float(m + i) for i in range(n)]
    for x, y in ((below, above), (above, below)):
        assert mannwhitneyu(x, y, alternative="two-sided", method="exact").pvalue == pytest.approx(min_p(m, n),
                                                                                                   rel=1e-12)
        assert mann_whitney_u(x, y)[1] == pytest.approx(min_p(m, n), rel=1e-12)


def test_clear_slowdown_is_a_regression_and_exits_1(tmp_path):
    base = {"a/CartPole-v1/n=4/random": [100.0, 101, 99, 100.5, 99.5]}
    new = {"a/CartPole-v1/n=4/random": [80.0, 81, 79, 80.5, 79.5]}
    rc, rows = run_compare(tmp_path, base, new)
    row = rows["a/CartPole-v1/n=4/random"]
    assert rc == 1
    assert row["verdict"] == "slower" and row["test"] == "mann-whitney-exact"
    assert float(row["change_pct"]) == pytest.approx(-20.0) and float(row["p_value"]) < 0.05
    assert float(row["ratio"]) == pytest.approx(0.8)
    assert 0.78 < float(row["ratio_ci_low"]) <= 0.8 <= float(row["ratio_ci_high"]) < 0.82
    assert "new/base" not in row["reason"]  # the ratio has its own columns; the console adds it


def test_big_but_noisy_change_is_uncertain_not_a_regression(tmp_path):
    base = {"a/x/n=1/random": [100.0, 60, 140, 90, 110]}
    new = {"a/x/n=1/random": [80.0, 130, 50, 85, 70]}
    rc, rows = run_compare(tmp_path, base, new)
    assert rc == 0 and rows["a/x/n=1/random"]["verdict"] == "uncertain"


def test_small_change_is_the_same_even_when_significant(tmp_path):
    base = {"a/x/n=1/random": [100.0, 100.1, 100.2, 100.3, 100.4]}
    new = {"a/x/n=1/random": [95.0, 95.1, 95.2, 95.3, 95.4]}
    rc, rows = run_compare(tmp_path, base, new, "--threshold", "10%")
    assert rc == 0 and rows["a/x/n=1/random"]["verdict"] == "same"
    rc, rows = run_compare(tmp_path / "strict", base, new, "--threshold", "0.02")
    assert rc == 1 and rows["a/x/n=1/random"]["verdict"] == "slower"


def test_three_repeats_fall_back_to_confidence_intervals(tmp_path):
    base = {"a/x/n=1/random": [100.0, 101, 99], "b/x/n=1/random": [100.0, 130, 70]}
    new = {"a/x/n=1/random": [70.0, 71, 69], "b/x/n=1/random": [70.0, 100, 40]}
    rc, rows = run_compare(tmp_path, base, new)
    assert rows["a/x/n=1/random"]["verdict"] == "slower" and rows["a/x/n=1/random"]["test"].startswith("ci-overlap")
    assert rows["b/x/n=1/random"]["verdict"] == "uncertain"
    assert rc == 1


def test_faster_only_missing_and_failed_cells_do_not_fail(tmp_path):
    base = {"a/x/n=1/random": [100.0, 101, 99, 100, 100.5], "gone/x/n=1/random": [1.0, 1, 1],
            "f/x/n=1/random": [5.0, 5, 5], "u/x/n=1/random": [None]}
    new = {"a/x/n=1/random": [150.0, 151, 149, 150, 150.5], "added/x/n=1/random": [1.0, 1, 1],
           "f/x/n=1/random": [None, None, None], "u/x/n=1/random": [None]}
    rc, rows = run_compare(tmp_path, base, new)
    assert rc == 0
    assert rows["a/x/n=1/random"]["verdict"] == "faster"
    assert rows["gone/x/n=1/random"]["verdict"] == "only in base"
    assert rows["added/x/n=1/random"]["verdict"] == "only in new"
    assert rows["f/x/n=1/random"]["verdict"] == "failed" and "(error)" in rows["f/x/n=1/random"]["reason"]
    assert rows["u/x/n=1/random"]["verdict"] == "not run"


def test_different_machines_are_not_comparable(tmp_path):
    base = {"a/x/n=1/random": [100.0, 101, 99, 100.5, 99.5]}
    new = {"a/x/n=1/random": [50.0, 51, 49, 50.5, 49.5]}
    rc, rows = run_compare(tmp_path, base, new, base_env={**MACHINE, "cpu_model": "Xeon"})
    row = rows["a/x/n=1/random"]
    assert rc == 0 and row["verdict"] == "not comparable" and "cpu_model: Xeon vs EPYC" in row["reason"]


@pytest.mark.parametrize("text,value", [("10%", 0.10), ("0.05", 0.05), ("2.5%", 0.025)])
def test_threshold_parsing(text, value):
    assert math.isclose(parse_threshold(text), value)


@pytest.mark.parametrize("text", ["abc", "-5%", "0"])
def test_bad_threshold_is_a_usage_error(text):
    with pytest.raises(UsageError, match="--threshold"):
        parse_threshold(text)


def test_bad_inputs_exit_2_and_write_nothing(tmp_path, capsys):
    run = write_run(tmp_path / "run", {"a/x/n=1/random": [1.0, 1, 1]})
    assert cli.main(["compare", str(tmp_path / "nope"), str(run)]) == 2
    assert "no results.jsonl" in capsys.readouterr().err
    assert cli.main(["compare", str(run), str(run), "--threshold", "ten"]) == 2
    assert "--threshold 'ten'" in capsys.readouterr().err
    assert not (run / "compare.csv").exists()


def test_ratio_ci_is_the_bootstrap_of_the_medians_ratio(tmp_path, capsys):
    from rlbench.results.stats import ratio_ci
    base, new = [100.0, 104, 97, 101, 99], [130.0, 125, 131, 128, 135]
    rc, rows = run_compare(tmp_path, {"a/x/n=1/random": base}, {"a/x/n=1/random": new})
    row = rows["a/x/n=1/random"]
    ratio, low, high = ratio_ci(new, base)
    assert rc == 0 and row["verdict"] == "faster"
    assert float(row["ratio"]) == pytest.approx(ratio) == pytest.approx(130.0 / 100.0)
    assert (float(row["ratio_ci_low"]), float(row["ratio_ci_high"])) == pytest.approx((low, high), rel=1e-5)
    assert low < ratio < high
    label = ratio_label(CellChange("a/x/n=1/random", "faster", ratio=ratio, ratio_low=low, ratio_high=high))
    assert label == f"1.30x [{low:.2f}, {high:.2f}]"
    out = capsys.readouterr().out
    assert f"a/x/n=1/random  30.0% faster, significant (mann-whitney-exact); new/base {label}" in out
    html = (tmp_path / "new" / "compare.html").read_text()
    assert "<th>new/base [95% CI]</th>" in html and f">{label}</td>" in html


def test_ratio_without_a_ci_and_cells_without_a_ratio(tmp_path):
    base = {"one/x/n=1/random": [100.0], "f/x/n=1/random": [5.0, 5, 5]}
    new = {"one/x/n=1/random": [150.0, 151, 149], "f/x/n=1/random": [None]}
    rc, rows = run_compare(tmp_path, base, new)
    one = rows["one/x/n=1/random"]
    assert float(one["ratio"]) == pytest.approx(1.5) and one["ratio_ci_low"] == one["ratio_ci_high"] == ""
    low, high = (float(one[k] or "nan") for k in ("ratio_ci_low", "ratio_ci_high"))
    assert ratio_label(CellChange("one", "uncertain", ratio=float(one["ratio"]), ratio_low=low, ratio_high=high)) \
        == "1.50x"
    assert rows["f/x/n=1/random"]["ratio"] == "" and ratio_label(CellChange("f", "failed")) == ""
    assert ratio_label(CellChange("x", "same", ratio=2.0, ratio_low=float("nan"), ratio_high=3.0)) == "2.00x"


def test_compare_page_and_csv_render_from_one_view_as_bytes(tmp_path):
    from rlbench.report.compare_page import export_compare
    from rlbench.report.view import CompareView
    from rlbench.results.compare import COLUMNS, compare
    from rlbench.results.model import ResultSet
    b = write_run(tmp_path / "base", {"a/x/n=1/random": [100.0, 104, 97], "gone/x/n=1/random": [5.0, 5, 5]})
    n = write_run(tmp_path / "new", {"a/x/n=1/random": [130.0, 125, 131]})
    view = CompareView(compare(ResultSet.load(str(b)), ResultSet.load(str(n))), "base", "new")
    assert list(view.rows.columns) == list(COLUMNS) and len(view.rows) == 2
    assert [(c.cell_id, c.verdict) for c in view.changes] == [("a/x/n=1/random", "faster"),
                                                               ("gone/x/n=1/random", "only in base")]
    files = export_compare(view)
    assert set(files) == {"compare.csv", "compare.html"} and all(isinstance(v, bytes) for v in files.values())
    assert files["compare.csv"].decode().splitlines()[0] == ",".join(COLUMNS)
    page = files["compare.html"].decode()
    assert "1.30x [" in page and "<td>0 / 0</td>" in page and ">-</td>" in page   # a missing figure shows "-"


def test_each_runs_verdict_is_its_headline_and_a_changed_winner_is_said(tmp_path, capsys):
    from support.result_rows import _row

    from rlbench.families.stepping.report import headlines
    from rlbench.report.compare_page import export_compare
    from rlbench.report.view import CompareView
    from rlbench.results.compare import compare
    from rlbench.results.model import ResultSet

    def run(path, rates):
        rows = [{**_row(a, n, rep, r), "cell_index": i} for rep in range(3) for i, (a, n, r) in enumerate(rates)]
        path.mkdir()
        (path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (path / "env.json").write_text(json.dumps(MACHINE))
        return ResultSet.load(str(path))

    base = run(tmp_path / "base", [("serial", 1, 100.0), ("gymnasium-async", 4, 300.0), ("sb3-subproc", 4, 200.0)])
    new = run(tmp_path / "new", [("serial", 1, 100.0), ("gymnasium-async", 4, 150.0), ("sb3-subproc", 4, 200.0)])
    [(label, b, n, changed)] = CompareView(compare(base, new), "base", "new", base, new).winners
    assert changed and (b.winner.adapter, n.winner.adapter) == ("gymnasium-async", "sb3-subproc")
    assert [f"{label}: {b.sentence()}"] == headlines(base) and [f"{label}: {n.sentence()}"] == headlines(new)
    page = export_compare(CompareView(compare(base, new), "base", "new", base, new))["compare.html"].decode()
    assert "Fastest per workload" in page and "<td>yes</td>" in page
    assert cli.main(["compare", str(tmp_path / "base"), str(tmp_path / "new"), "--out", str(tmp_path / "c")]) == 1
    assert "winner changed  CartPole-v1 · random: base gymnasium-async (num_envs=4), new sb3-subproc (num_envs=4)" \
        in capsys.readouterr().out


def test_compare_csv_keeps_its_columns_and_values(tmp_path):
    """compare.csv is read by scripts and people: one gate's CellChanges (rlbench.results.gate) write the header
    and the values the row dicts wrote before them, byte for byte."""
    base = {"a/x/n=4/random": [100.0, 101, 99, 100.5, 99.5], "f/x/n=1/random": [5.0, 5, 5],
            "gone/x/n=1/random": [1.0, 1, 1]}
    new = {"a/x/n=4/random": [80.0, 81, 79, 80.5, 79.5], "f/x/n=1/random": [None, None, None]}
    run_compare(tmp_path, base, new)
    assert (tmp_path / "new" / "compare.csv").read_text().splitlines() == [
        "cell_id,verdict,base_median,new_median,ratio,ratio_ci_low,ratio_ci_high,change_pct,p_value,test,base_n,"
        "new_n,base_ci_low,base_ci_high,new_ci_low,new_ci_high,reason",
        "a/x/n=4/random,slower,100,80,0.8,0.787129,0.813131,-20,0.00793651,mann-whitney-exact,5,5,99.0207,100.984,"
        '79.0212,80.9846,"20.0% slower, significant (mann-whitney-exact)"',
        "f/x/n=1/random,failed,5,,,,,,,,3,0,5,5,,,no ok repeat in new (error)",
        "gone/x/n=1/random,only in base,,,,,,,,,,,,,,,"]


def test_a_change_must_clear_the_run_to_run_noise_too(tmp_path, capsys):
    """12% slower and significant over 8 repeats a side: a regression at the 1% floor of run-to-run noise, but
    `uncertain` where A/A runs show this machine's runs differ by 10% with nothing changed."""
    base = {"a/x/n=1/random": [1000.0 + i for i in range(8)]}
    new = {"a/x/n=1/random": [880.0 + i for i in range(8)]}
    rc, rows = run_compare(tmp_path / "floor", base, new)
    assert rc == 1 and rows["a/x/n=1/random"]["verdict"] == "slower"
    aa = [write_run(tmp_path / f"aa-{i}", {"a/x/n=1/random": [v * s] * 3})
          for i, (v, s) in enumerate(((1000.0, 1.0), (1000.0, 1.12), (1000.0, 0.9)))]
    rc, rows = run_compare(tmp_path / "noisy", base, new, "--noise-from", *map(str, aa))
    row = rows["a/x/n=1/random"]
    assert rc == 0 and row["verdict"] == "uncertain" and "within the run-to-run noise" in row["reason"]
    assert cli.main(["compare", str(tmp_path / "floor" / "base"), str(tmp_path / "floor" / "new"), "--noise-from",
                     str(tmp_path / "nothing")]) == 2
