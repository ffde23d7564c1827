"""The report in a real browser: headless Chromium (Debian's, `make browser`) driven by Playwright, network
cut off. plotly.js inlined once, every chart drawn with the traces its div announces, hover shows median / CI /
n / CV, a legend click hides a series, no console error, every table filled, sorting works; the screenshot is
kept in reports/artifacts/ as a test artifact."""
import importlib.util
from types import SimpleNamespace

from support import REPO
from support.result_rows import results

from rlbench.families.replay.report import bandwidth_figure
from rlbench.report import charts, export
from rlbench.report import compare_page as compare_report
from rlbench.report.html import export_html
from rlbench.results.compare import compare

ARTIFACTS = REPO / "reports" / "artifacts"
spec = importlib.util.spec_from_file_location("check_report", REPO / "scripts" / "check_report.py")
check_report = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_report)



def test_report_renders_in_chromium(tmp_path):
    assert check_report.chromium_path(), "Chromium is missing: run `make browser` (part of `make test`)"
    export(results(), str(tmp_path), [export_html])
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "report.png"
    assert check_report.check(str(tmp_path / "index.html"), str(shot)) == []
    assert shot.stat().st_size > 10_000


def test_comparison_renders_in_chromium(tmp_path):
    res = results()
    compare_report.write(compare(res, res), "base", "new", str(tmp_path))
    assert check_report.check(str(tmp_path / "compare.html"), require_charts=False) == []


def test_history_page_renders_in_chromium(tmp_path, capsys):
    """12 A/A runs, then 6 runs of a commit with one cell 15% slower: a chart per cell, the change point drawn,
    the open regression listed."""
    import numpy as np
    from support import run_cli
    from support.history_runs import CELLS, aa_runs, make_run, quick_cells
    runs = aa_runs(tmp_path / "runs", 12)
    rng = np.random.default_rng(1)
    runs += [make_run(tmp_path / "runs", f"b{i}", np.exp(rng.normal(0, 0.02, CELLS)), commit="b" * 40,
                      slow_cell=quick_cells()[1], slow=0.85, started=f"2026-11-27T05:{i:02d}:00+00:00")[0]
             for i in range(6)]
    db = str(tmp_path / "h.sqlite")
    assert run_cli(["history", "add", str(tmp_path / "runs"), "--db", db]).rc == 0
    assert run_cli(["history", "show", "--db", db, "--out", str(tmp_path / "pages")]).rc == 0
    assert "1 change point(s), 1 open regression(s)" in capsys.readouterr().out
    page = tmp_path / "pages" / "history-quick.html"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    assert check_report.check(str(page), str(ARTIFACTS / "history.png")) == []
    assert page.read_text().count("-15.") >= 1   # the change's size, on the chart and in the regressions table


def test_a_broken_page_is_caught(tmp_path):
    page = tmp_path / "bad.html"
    page.write_text("<html><body><div class='chart' data-traces='2'><div id='c' class='plotly-graph-div'></div>"
                    "<script>Plotly.newPlot('c', [{x: [1], y: [2]}], {})</script></div><table><tbody></tbody></table>"
                    "<img src='http://example.com/x.png'></body></html>")
    problems = check_report.check(str(page))
    assert any("page error" in p and "Plotly is not defined" in p for p in problems), problems
    assert any("network request: http://example.com/x.png" in p for p in problems), problems
    assert any("chart 0 (c) is not rendered" in p for p in problems), problems
    assert any("is empty" in p for p in problems) and any("loads from outside itself" in p for p in problems)


def test_a_chart_missing_traces_or_plotly_twice_is_caught(tmp_path):
    """A chart drawing fewer traces than its div says, and plotly.js inlined twice, are problems."""
    fig = charts.scaling([{"s": "a", "x": 1, "y": 2.0}, {"s": "a", "x": 2, "y": 3.0}], x="x", y="y", series="s",
                         x_title="x", y_title="y")
    div = charts.to_html(fig, "one").replace("data-traces='1'", "data-traces='2'")
    js = charts.plotlyjs_for(div)
    page = tmp_path / "twice.html"
    page.write_text(f"<html><head>{js}{js}</head><body>{div}</body></html>")
    problems = check_report.check(str(page))
    assert any("inlined 2 times" in p for p in problems), problems
    assert any("has 1 traces, its div says 2" in p for p in problems), problems


def test_replay_bandwidth_chart_renders_and_hovers(tmp_path):
    """The replay family's chart (the same module) in a page of its own: drawn, hover and legend work."""
    rows = [SimpleNamespace(mode="max-sample", series=s, workload="DQN-Qbert", cell_id=f"{s}/{i}", item_bytes=i,
                            mb_per_s=mb, mb_per_s_ci_low=mb * 0.9, mb_per_s_ci_high=mb * 1.1, n=3, cv=0.04)
            for s, i, mb in (("numpy-ring", 1000, 900.0), ("numpy-ring", 10**6, 9000.0),
                                          ("sb3-replay", 1000, 300.0), ("sb3-replay", 10**6, 1200.0))]
    div = charts.to_html(bandwidth_figure(rows, {"memcpy_1core_gbps": {"median": 10.0}}), "bw")
    page = tmp_path / "replay.html"
    page.write_text(f"<html><head>{charts.plotlyjs_for(div)}</head><body>{div}</body></html>")
    assert check_report.check(str(page)) == []
