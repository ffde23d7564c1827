"""index.html has a section per family present: env stepping (throughput with CI bands, unit latency,
winners with speedup and parallel efficiency, scaling with workers beside the ideal) and learners (throughput,
lag, time split). Charts are plotly figures (rlbench.report.charts), plotly.js inlined once per page; numbers
go through rlbench.report.format."""
import json
import re
from dataclasses import replace

import pandas as pd
import pytest
from support.result_rows import _row, results

from rlbench.families.learners.report import split_figure
from rlbench.families.replay.report import bandwidth_figure, replay_rows
from rlbench.families.stepping.report import latency_figure, throughput_figure, winners, winners_table, workers_figure
from rlbench.report import charts, export
from rlbench.report.format import esc, grouped, pct, rate, si, size
from rlbench.report.html import export_html
from rlbench.results.decision import Fate
from rlbench.results.model import ResultSet, frames
from rlbench.results.text import speedup

PLOTLYJS = "* plotly.js v"   # the bundle's own header comment


def _page(tmp_path, res=None) -> str:
    export(res or results(), str(tmp_path), [export_html])
    return (tmp_path / "index.html").read_text()


def _figures(page) -> dict:
    """div id -> the traces plotly is given for it, read back from the page."""
    return {m.group(1): json.loads(m.group(2))
            for m in re.finditer(r'Plotly\.newPlot\(\s*"([^"]+)",\s*(\[.*?\]),\s*\{', page)}


def _stepping(res=None) -> list:
    return [c for c in (res or results()).cells.values() if c.kind == "vector_env"]


def _parallel_results(workers=2) -> ResultSet:
    """results() with gymnasium-async (the winner at num_envs=4) in `workers` processes, the loops in one."""
    rows = [_row("serial", n, rep, 1000.0, workers=1) for rep in range(3) for n in (1, 4)]
    rows += [_row("gymnasium-async", 4, rep, 1600.0, workers=workers) for rep in range(3)]
    return ResultSet.from_rows(rows, {"cpu_model": "x"})


def test_winner_has_speedup_and_parallel_efficiency():
    w = {x.num_envs: x for x in winners(_parallel_results().cells.values())}[4]
    assert w.winner.startswith("gymnasium-async")
    assert abs(w.speedup_over_serial - 1.6) < 0.05 and abs(w.efficiency - 0.8) < 0.03  # 1.6x on 2 cores


def test_a_one_process_winner_has_no_parallel_efficiency():
    """The serial loop winning (or any one-process winner) used one core: its speedup / cores is no
    inefficiency, so the table shows a dash that says why instead of 50% on 2 cores."""
    res = _parallel_results()
    loop = {x.num_envs: x for x in winners(res.cells.values(), res)}[1]
    assert loop.winner.startswith("serial") and loop.workers == 1 and loop.speedup_over_serial == 1.0
    assert (loop.efficiency, loop.efficiency_ci_low, loop.efficiency_ci_high) == (None, None, None)
    assert "one process" in loop.efficiency_note
    one = {x.num_envs: x for x in winners(_parallel_results(workers=1).cells.values())}[4]
    assert one.efficiency is None and one.speedup_over_serial == pytest.approx(1.6, abs=0.05)
    table = winners_table(_stepping(res), res)
    assert re.search(r"<td><span title='one process[^']*'>—</span></td>", table)
    assert "50%" not in table and re.search(r"<td data-v='[\d.]+'>80% \[7\d%, 8\d%\]</td>", table)
    unknown = {x.num_envs: x for x in winners(results().cells.values())}[4]   # rows without a worker count
    assert unknown.efficiency is None and "not reported" in unknown.efficiency_note


def test_speedup_over_serial_has_a_bootstrap_ci_from_the_repeats():
    res = results()
    w = {x.num_envs: x for x in winners(res.cells.values(), res)}[4]
    assert w.speedup_ci_low < w.speedup_over_serial < w.speedup_ci_high
    assert 1.5 < w.speedup_ci_low and w.speedup_ci_high < 1.7
    cell = speedup(w.speedup_over_serial, w.speedup_ci_low, w.speedup_ci_high)
    assert re.fullmatch(r"1\.60x \[1\.\d\d, 1\.\d\d\]", cell)
    table = winners_table(_stepping(res), res)
    assert "speedup over serial [95% CI]" in table and cell in table
    assert "1.60x</td>" in winners_table(_stepping(res))     # without the repeats: the ratio alone


def test_sections_charts_and_learners(tmp_path):
    page = _page(tmp_path)
    assert "Env stepping" in page and "Learners and training" in page
    head, body = page.split("</head>", 1)
    assert page.count(PLOTLYJS) == 1 and PLOTLYJS in head      # plotly.js inlined once, in the head
    assert "<svg" not in body and "class='value'" not in body  # no hand-drawn SVG, no printed point labels
    figures = _figures(page)
    assert len(figures) == 4 and body.count('class="plotly-graph-div"') == 4
    # throughput, latency, agents, learners' time split, in page order
    throughput, latency, agents, split = figures.values()
    assert [t["name"] for t in throughput if t.get("showlegend") is not False] == \
        ["gymnasium-async random", "serial random"]
    band = next(t for t in throughput if t.get("fill") == "toself")   # the CI band of the series with 2 points
    assert band["showlegend"] is False and band["legendgroup"] == "serial random"
    assert [t["line"]["dash"] for t in latency if t.get("mode") == "lines+markers"] == \
        ["solid", "dash", "solid", "dash"]                    # p99 dashed beside p50
    assert [t["name"] for t in agents if t.get("mode") == "lines+markers"] == ["purejaxrl-ppo CartPole-v1 n=4"]
    assert agents[-1]["x"] == [1, 8]
    assert [t["name"] for t in split] == ["env step", "inference", "learn"] and split[1]["text"] == ["50%"]
    assert "learn" in page and "[10, 20, 5]" in page and "Time split per stage" in page
    assert "compile time apart from the rate" in page
    assert re.search(r"<td data-v='2\.5'>2\.50?</td>", page)   # compile s, in the registry's format (or 0.2f)


def test_points_carry_their_ci_and_hover_shows_median_ci_n_and_cv():
    res = results()
    rows = _stepping(res)
    fig = throughput_figure(rows)
    line = next(t for t in fig.data if t.name == "gymnasium-async random")
    [cell] = [c for c in rows if c.adapter == "gymnasium-async"]
    s = cell.steps_per_s
    assert line.y[0] == s.median
    assert line.y[0] + line.error_y.array[0] == pytest.approx(s.ci_high)
    assert line.y[0] - line.error_y.arrayminus[0] == pytest.approx(s.ci_low)
    for word in ("median", "95% CI", "n:", "CV"):
        assert word in line.hovertemplate
    assert list(line.customdata[0]) == [cell.cell_id, "4", si(s.median), f"[{si(s.ci_low)}, {si(s.ci_high)}]",
                                       "3", pct(s.cv)]
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert all("text" not in (t.mode or "") for t in fig.data)   # nothing printed beside the points
    # latency: the CI of each median comes from the cell's repeats
    lat = latency_figure(rows)
    p50 = next(t for t in lat.data if t.name == "serial random p50")
    assert list(p50.y) == [1.0, 1.0] and p50.error_y.array[0] == pytest.approx(0.0)


def test_a_dataframe_draws_the_same_chart_as_dicts():
    points = [{"s": "a", "x": 1, "y": 10.0, "lo": 9.0, "hi": 11.0, "n": 3, "cv": 0.05, "label": "a/1"},
              {"s": "a", "x": 4, "y": 30.0, "lo": 28.0, "hi": 33.0, "n": 3, "cv": 0.04, "label": "a/4"},
              {"s": "b", "x": 4, "y": 0.0, "lo": None, "hi": None, "n": 3, "cv": None, "label": "b/4"}]  # not on a log axis
    kw = dict(x="x", y="y", series="s", lo="lo", hi="hi", n="n", cv="cv", label="label", x_title="n", y_title="y")
    from_dicts = charts.scaling(points, **kw)
    assert from_dicts.to_json() == charts.scaling(pd.DataFrame(points), **kw).to_json()
    assert [t.name for t in from_dicts.data] == ["a 95% CI", "a"]


def test_workers_swept_at_one_num_envs_scale_against_the_ideal(tmp_path):
    rows = []
    for rep in range(3):
        rows += [_row("serial", 8, rep, 1000.0)]
        for threads, rate_ in ((1, 900.0), (2, 1500.0), (4, 2000.0)):
            rows.append(_row("envpool-sync", 8, rep, rate_, workers=threads, options={"num_threads": threads},
                             cell_id=f"envpool-sync/CartPole-v1/n=8/random/num_threads={threads}"))
    res = ResultSet.from_rows(rows, {"cpu_model": "x"})
    page = _page(tmp_path, res)
    assert "env steps/s vs workers at a fixed num_envs" in page
    fig = workers_figure(res.cells.values())
    assert fig.layout.xaxis.title.text == "workers (log scale)"
    lines = {t.name: t for t in fig.data if t.mode == "lines+markers"}
    assert set(lines) == {"envpool-sync random n=8", "envpool-sync random n=8 ideal"}   # measured and ideal
    measured, ideal = lines["envpool-sync random n=8"], lines["envpool-sync random n=8 ideal"]
    assert measured.line.dash == "solid" and ideal.line.dash == "dash"
    assert list(ideal.y) == pytest.approx([909.0, 1818.0, 3636.0])
    assert measured.error_y.array is not None and ideal.error_y.array is None   # no CI for the ideal
    assert "median" in measured.hovertemplate and "median" not in ideal.hovertemplate
    assert not any("serial" in t.name for t in fig.data)   # one worker count only: no line of its own


def test_the_page_is_its_sections_in_order_and_a_new_one_needs_no_edit_of_the_page(tmp_path, monkeypatch):
    from rlbench.report import sections
    names = [s.name for s in sections.sections()]
    assert names[:4] == ["recommendation", "training recommendation", "headlines", "about"]  # a tune's answer on top
    assert names[-4:] == ["summary", "not run", "dropped", "machine"]
    assert names.index("stepping") < names.index("replay") < names.index("profiles") < names.index("validation")
    page = _page(tmp_path)
    assert page.index("class='headlines'") < page.index("Bars and shaded bands") < page.index("Env stepping")
    extra = sections.Section("extra", 45, lambda view: f"<h2>Extra: {len(view.cells)} cells</h2>")
    monkeypatch.setattr(sections, "PAGE", (*sections.PAGE, extra))
    (tmp_path / "again").mkdir()
    page = _page(tmp_path / "again")
    assert page.index("Learners and training") < page.index("<h2>Extra: 6 cells</h2>") < page.index("<h2>Summary")


def test_no_workers_chart_without_a_workers_sweep(tmp_path):
    assert "vs workers" not in _page(tmp_path)


def test_the_page_is_self_contained_and_rebuilds_byte_for_byte(tmp_path):
    page = _page(tmp_path)
    outside = page.replace(page[page.index(PLOTLYJS):page.index("</script>")], "")   # all but plotly.js
    assert not re.search(r"https?://|src=|<link", outside)   # no CDN, nothing fetched
    assert '"displaylogo": false' in page and '"showSendToCloud": false' in page
    (tmp_path / "again").mkdir()
    assert _page(tmp_path / "again") == page                 # fixed div ids: same bytes


def test_a_page_without_charts_carries_no_plotly(tmp_path):
    res = ResultSet.from_rows([_row("serial", 1, 0, 0.0, status="unsupported", error="not here")], {})
    page = _page(tmp_path, res)
    assert "not here" in page and PLOTLYJS not in page and "plotly-graph-div" not in page


def test_replay_bandwidth_is_a_chart_of_the_same_module():
    def cell(store, item, rate_, repeat):
        return frames({"schema": 1, "run_id": "r", "suite": "hand", "cell_id": f"{store}/{item}", "cell_index": 0,
                       "adapter": store, "kind": "replay", "env": "replay/DQN-Qbert",
                       "env_kwargs": {"mode": "max-sample"}, "num_envs": 1, "frameskip": 1, "repeat": repeat,
                       "profiled": False, "status": "ok", "error": None, "env_steps": int(rate_), "units": 1,
                       "seconds": 1.0, "steps_per_s": rate_ * (1 + 0.02 * repeat), "latency_p50_ms": 0.1,
                       "latency_p99_ms": 0.2, "cpu_util": 1.0, "peak_rss_mb": 50.0, "item_bytes": item,
                       "bound": "memcpy_1core"})
    runs = [cell(s, item, r, k) for k in range(3) for s, item, r in
            (("numpy-ring", 1000, 1e6), ("numpy-ring", 10**6, 5e3), ("sb3-replay", 1000, 2e5))]
    limits = {"memcpy_1core_gbps": {"median": 10.0}, "memcpy_allcore_gbps": {"median": 20.0}}
    res = ResultSet.from_rows(runs, {"limits": limits})
    rows = replay_rows(res)
    fig = bandwidth_figure(rows, limits)
    ring = next(t for t in fig.data if t.name == "numpy-ring")
    row = next(r for r in rows if r.store == "numpy-ring" and r.item_bytes == 1000)
    assert list(ring.x) == [1000, 10**6] and ring.y[0] == pytest.approx(row.mb_per_s)
    assert ring.y[0] + ring.error_y.array[0] == pytest.approx(row.mb_per_s_ci_high)
    first = next(iter(res.cells.values()))
    assert row.mb_per_s_ci_high == pytest.approx(first.steps_per_s.ci_high * 1000 / 1e6)
    assert "median" in ring.hovertemplate and "CV" in ring.hovertemplate
    assert list(fig.layout.xaxis.ticktext) == ["1 KB", "1 MB"]
    refs = [t.name for t in fig.data if t.line.dash == "dash"]
    assert refs == ["memcpy 1 core: 10,000 MB/s", "memcpy all cores: 20,000 MB/s"]
    assert ring.line.color == charts.PALETTE[0] and refs and fig.data[-1].line.color == charts.REFERENCE_COLOURS[1]


def test_stacked_bars_show_a_share_only_where_it_fits():
    runs = [_row("impala", 4, rep, 100.0, kind="learner", env_frac=0.25, learn_frac=0.25, cell_id="a")
            for rep in range(3)]
    fig = split_figure(ResultSet.from_rows(runs).cells.values())
    assert [t.name for t in fig.data] == ["env step", "learn"] and list(fig.data[0].x) == [0.5]
    assert fig.layout.uniformtext.mode == "hide" and fig.layout.barmode == "stack"
    assert "median of n=3" in fig.data[0].customdata[0][1]


def test_one_set_of_number_formatters():
    rates = [rate(v) for v in (None, float("nan"), 12.345, 999.9, 12345.0, 2_500_000.0)]
    assert rates == ["-", "-", "12.3", "999.9", "12.35k", "2.50M"]  # the console prints these too
    assert (si(1_234_567.0), si(12_345.0), si(12.345), si(None)) == ("1.23M", "12.35k", "12.3", "-")
    assert (pct(0.1234), pct(0.5, 0), grouped(123456.7), grouped(0.01234)) == ("12.3%", "50%", "123,457", "0.0123")
    assert (size(10_000_000), size(1500), size(64)) == ("10 MB", "1.5 KB", "64 B")
    assert speedup(1.29, 1.1, 1.523) == "1.29x [1.10, 1.52]" and speedup(1.29, float("nan"), 2) == "1.29x"
    assert speedup(None) == "-"
    assert speedup(0.00078, 0.00075, 0.00081) == "0.00078x [0.00075, 0.00081]" and speedup(0.054) == "0.054x"


def test_profiles_share_the_stage_colours_of_the_learners():
    from rlbench.families.learners.report import SPLIT
    from rlbench.report.profiles_section import RUNNING, profiles_figure
    row = {"cell_id": "serial/x", "profile": "p.json", **{f"{s}_s": 1.0 for s in RUNNING + ["setup"]},
           **{f"{s}_frac": 1 / len(RUNNING) for s in RUNNING}}
    fig = profiles_figure([row])
    colours = {t.name: t.marker.color for t in fig.data}
    assert colours["env step"] == dict((t, c) for _, t, c in SPLIT)["env step"] == charts.STAGE_COLOURS["env"]
    assert "py-spy: env step 1.00 s" in fig.data[0].customdata[0][1]


# -- the view model, bytes out, one formatter for a ratio and its CI ------------------------------------

def test_every_exporter_reads_one_view_and_returns_bytes(tmp_path, monkeypatch):
    from rlbench.report import exporters, view
    res = results()
    built = []
    real = view.RunView.__init__
    monkeypatch.setattr(view.RunView, "__init__", lambda self, *a, **kw: (built.append(1), real(self, *a, **kw))[1])
    paths = export(res, str(tmp_path))
    assert len(built) == 1                                    # one view for every exporter
    assert {p.rsplit("/", 1)[1] for p in paths} >= {"results.csv", "summary.csv", "index.html"}
    v = view.RunView(res, str(tmp_path))
    for render in exporters():
        for name, content in render(v).items():
            assert isinstance(content, bytes), name
            assert (tmp_path / name).read_bytes() == content   # the writer wrote exactly those bytes
    assert list(v.summaries.columns)[:3] == ["schema", "suite", "cell_id"] and len(v.summaries) == len(v.cells)
    from rlbench.report.view import run_view
    assert len(v.runs) == len(res.runs) and v.headlines == run_view(res).headlines
    assert v.headlines[0].startswith("CartPole-v1")
    assert not list(tmp_path.glob("*.tmp"))


def test_without_plotly_the_tables_are_written_and_the_page_is_left_to_where_plotly_is(tmp_path, monkeypatch,
                                                                                       capsys):
    """A bare GPU machine (the device kit) may lack plotly: the run keeps its CSVs, says so, writes no page."""
    from rlbench.report import charts
    monkeypatch.setattr(charts, "go", None)
    paths = export(results(), str(tmp_path))
    assert {p.rsplit("/", 1)[1] for p in paths} >= {"results.csv", "summary.csv"}
    assert not (tmp_path / "index.html").exists()
    assert "plotly is not installed here: CSVs written, no index.html" in capsys.readouterr().err


def test_the_writer_writes_bytes_whole_and_text_as_utf8(tmp_path, monkeypatch):
    from rlbench.report import writer
    target = tmp_path / "f.csv"
    writer.write_atomic(str(target), b"a,b\n1,2\n")
    assert target.read_bytes() == b"a,b\n1,2\n"
    writer.write_atomic(str(target), "x \u00b7 y\n")          # a family's text export
    assert target.read_bytes() == "x \u00b7 y\n".encode()

    def fail(fd):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(writer.os, "fsync", fail)
    with pytest.raises(OSError):
        writer.write_atomic(str(target), b"new")
    assert target.read_bytes() == "x \u00b7 y\n".encode() and [p.name for p in tmp_path.iterdir()] == ["f.csv"]
    with pytest.raises(TypeError):
        writer.as_bytes(1.0)


def test_a_ratio_and_its_ci_have_one_format():
    from rlbench.report.format import with_ci
    nan = float("nan")
    assert with_ci(0.6667, 0.612, 0.7249) == "0.67 [0.61, 0.72]"
    assert with_ci(0.67, nan, nan) == "0.67 [-]" and with_ci(0.67) == "0.67 [-]"   # n < 2: no CI
    assert with_ci(None) == with_ci(nan, 0.1, 0.2) == "-"
    assert with_ci(1.6, 1.52, 1.69, unit="x") == "1.60x [1.52, 1.69]" == speedup(1.6, 1.52, 1.69)
    assert with_ci(0.8, 0.76, 0.84, fmt=lambda v: pct(v, 0)) == "80% [76%, 84%]"


def test_a_column_takes_a_registered_figures_label_and_format_else_its_own():
    from rlbench.report.format import figure
    from rlbench.results.metrics import metric
    assert figure("not_a_figure_anywhere", "mine", si) == ("mine", si)
    header, fmt = figure("latency_p99_ms_median", "p99 ms", si)
    m = metric("latency_p99_ms")
    assert header == (getattr(m, "label", None) or "p99 ms") and fmt(1.23456) == m.format(1.23456)


def test_parallel_efficiency_has_the_speedups_ci_over_the_cores():
    res = _parallel_results()
    w = {x.num_envs: x for x in winners(res.cells.values(), res)}[4]
    assert w.efficiency_ci_low == pytest.approx(w.speedup_ci_low / 2)
    assert w.efficiency_ci_low < w.efficiency < w.efficiency_ci_high == pytest.approx(w.speedup_ci_high / 2)
    assert re.search(r"<td data-v='[\d.]+'>80% \[7\d%, 8\d%\]</td>", winners_table(_stepping(res), res))
    assert "80% [-]</td>" in winners_table(_stepping(res))     # without the repeats: no CI


def _replay_cell(store, item, rate_, repeat, workload="DQN-Qbert"):
    return frames({"schema": 1, "run_id": "r", "suite": "hand", "cell_id": f"{store}/{workload}/{item}",
                   "cell_index": 0, "adapter": store, "kind": "replay", "env": f"replay/{workload}",
                   "env_kwargs": {"mode": "max-sample"}, "num_envs": 1, "frameskip": 1, "repeat": repeat,
                   "profiled": False, "status": "ok", "error": None, "env_steps": int(rate_), "units": 1,
                   "seconds": 1.0, "steps_per_s": rate_ * (1 + 0.02 * repeat), "latency_p50_ms": 0.1,
                   "latency_p99_ms": 0.2, "cpu_util": 1.0, "peak_rss_mb": 50.0, "item_bytes": item,
                   "bound": "memcpy_1core"})


def test_replay_targets_and_fractions_have_bootstrap_cis():
    from rlbench.families.replay.report import replay_csv, replay_section, targets
    from rlbench.results.stats import median_ci, ratio_ci
    runs = [_replay_cell(s, item, r, k) for k in range(5) for s, item, r in
            (("shm-ring", 10**7, 800.0), ("sb3-replay", 10**7, 400.0))]
    limits = {"memcpy_1core_gbps": {"median": 10.0}}
    res = ResultSet.from_rows(runs, {"limits": limits})
    rows = replay_rows(res)
    ring = next(r for r in rows if r.store == "shm-ring")
    fracs = [r["steps_per_s"] * 10**7 / 10e9 for r in res.benchmarks[ring.cell_id].ok_runs]
    assert (ring.limit_frac, ring.limit_frac_ci_low, ring.limit_frac_ci_high) == pytest.approx(median_ci(fracs))
    assert ring.limit_frac_ci_low < ring.limit_frac < ring.limit_frac_ci_high
    peer_vs, share = targets(rows)
    sb3 = next(r for r in rows if r.store == "sb3-replay")
    assert (peer_vs.ratio, peer_vs.ratio_ci_low, peer_vs.ratio_ci_high) == \
        pytest.approx(ratio_ci(ring.mb_per_s_repeats, sb3.mb_per_s_repeats))
    assert share.ratio == ring.limit_frac and share.ratio_ci_low == ring.limit_frac_ci_low
    page = replay_section(res)
    assert re.search(r">2\.0\d \[1\.\d\d, 2\.\d\d\]</td>", page) and "ratio [95% CI]" in page
    assert re.search(r">8\d\.\d% \[8\d\.\d%, 8\d\.\d%\]</td>", page)   # the fraction of memcpy, with its CI
    header, first = replay_csv(res)["replay.csv"].splitlines()[:2]
    assert header.split(",") == [                     # replay.csv's columns, in their order, and no more
        "workload", "mode", "store", "actors", "item_bytes", "capacity_items", "capacity_scale", "page_cache", "n",
        "status", "items_per_s", "mb_per_s", "add_items_per_s", "sample_items_per_s", "bound", "limit_gbps",
        "limit_frac", "limit_frac_ci_low", "limit_frac_ci_high", "sample_latency_p99_ms", "sample_latency_p999_ms",
        "add_latency_p99_ms", "keeps_up", "sample_lag_max_ms", "add_lag_max_ms", "max_reuse", "reuse_mean",
        "reuse_max", "error"]
    assert first.startswith("DQN-Qbert,max-sample,shm-ring,1,10000000,")   # written like every other CSV


def test_jax_share_of_device_copy_has_a_bootstrap_ci():
    from rlbench.families.jax.report import jax_section
    from rlbench.results.stats import median_ci
    rows = [_row("purejaxrl-ppo", 4, rep, 5e4, kind="learner", compile_s=2.5, setup_s=3.0,
                 state_gb_per_s=5.0 + rep, device_copy_gbps=20.0, state_bw_frac=(5.0 + rep) / 20.0)
            for rep in range(4)]
    section = jax_section(ResultSet.from_rows(rows, {}))
    median, low, high = median_ci([(5.0 + rep) / 20.0 for rep in range(4)])
    assert f">{pct(median)} [{pct(low)}, {pct(high)}]</td>" in section and "[95% CI]</th>" in section
    one = jax_section(ResultSet.from_rows(rows[:1], {}))
    assert f">{pct(0.25)} [-]</td>" in one                      # one repeat: the value, no CI


def test_tune_strategies_show_their_share_of_the_winner_with_a_ci_and_the_search_as_a_chart():
    from support.tune_race import PROFILE, _five, _searched

    from rlbench.report.recommendation import of_winner, recommendation_section
    from rlbench.results.stats import ratio_ci
    from rlbench.tuning.decide import decide, lines
    rates = {("serial", n): _five(100) for n in (1, 2, 4, 8)}
    rates.update({("sb3-subproc", n): _five(r) for n, r in ((1, 80), (2, 150), (4, 200), (8, 190))})
    search, res = _searched(rates, ["serial", "sb3-subproc"])
    d = decide(search, res, PROFILE, label="CartPole-v1")
    s = next(s for s in d.strategies if s.adapter == "serial")
    win = next(c for c in search.candidates if c.cell.cell_id == d.winner.cell_id)
    serial = next(c for c in search.candidates if c.cell.cell_id == s.best)
    ratio, low, high = ratio_ci(serial.values, win.values)
    assert s.ratio_to_winner == pytest.approx(ratio) and (s.ratio_ci_low, s.ratio_ci_high) == (low, high)
    assert of_winner(s) == f"0.50x [{low:.2f}, {high:.2f}]"
    assert of_winner(replace(s, ratio_ci_low=float("nan"))) == "0.50x [-]"
    assert of_winner(Fate("x", "pruned", "pruned: ...")) == ""
    section = recommendation_section(d)
    assert "of the winner [95% CI]" in section and of_winner(s) in section and esc(d.verdict) in section
    assert "The search: env steps/s vs num_envs" in section and "winner: sb3-subproc (num_envs=4)" in section
    assert "cut short" not in section
    assert "The search was cut short (interrupted after 9 s (SIGTERM))" in recommendation_section(
        replace(d, interrupted="interrupted after 9 s (SIGTERM)"))
    assert f"({of_winner(s)} of the winner)" in "\n".join(lines(d, PROFILE))


def test_the_console_table_reads_the_view():
    from rlbench.report.console import medians_table
    from rlbench.report.view import RunView
    res = results()
    text = medians_table(res)
    assert text == medians_table(RunView(res)) and text.splitlines()[0].startswith("cell")
    serial = next(line for line in text.splitlines() if line.startswith("serial/CartPole-v1/n=1/random"))
    assert "1.0%" in serial and "3.000" in serial and "1.01k" in serial
