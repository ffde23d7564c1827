"""index.html has a section per family present: env stepping (throughput with CI bands, unit latency,
winners with speedup and parallel efficiency, scaling with workers beside the ideal) and learners (throughput,
lag, time split). Charts are plotly figures (rlbench.report.charts), plotly.js inlined once per page; numbers
go through rlbench.report.format."""
import json
import re

import pandas as pd
import pytest

from rlbench.families.learners.report import split_figure
from rlbench.families.replay.report import bandwidth_figure, replay_rows
from rlbench.families.stepping.report import latency_figure, throughput_figure, winners, winners_table, workers_figure
from rlbench.report import charts, export
from rlbench.report.format import grouped, pct, rate, si, size, speedup
from rlbench.report.html import export_html
from rlbench.results.model import ResultSet, frames

PLOTLYJS = "* plotly.js v"   # the bundle's own header comment


def _row(adapter, n, repeat, rate, kind="vector_env", **extra):
    row = {"schema": 1, "run_id": "r", "suite": "hand", "cell_id": f"{adapter}/CartPole-v1/n={n}/random",
           "cell_index": 0, "adapter": adapter, "kind": kind, "env": "CartPole-v1", "env_kwargs": {}, "num_envs": n,
           "workers": None, "batch_size": None, "policy": "random", "device": "cpu", "options": {}, "frameskip": 1,
           "seed": 0, "repeat": repeat, "profiled": False, "status": "ok", "error": None, "cpus": 2,
           "env_steps": int(rate), "units": 10, "seconds": 1.0, "steps_per_s": rate * (1 + 0.01 * repeat),
           "latency_p50_ms": 1.0, "latency_p99_ms": 3.0, "policy_s": 0.1, "cpu_util": 1.0, "peak_rss_mb": 50.0}
    return frames({**row, **extra})


def results() -> ResultSet:
    rows = []
    for rep in range(3):
        rows += [_row("serial", 1, rep, 1000.0), _row("serial", 4, rep, 1000.0),
                 _row("gymnasium-async", 4, rep, 1600.0),
                 _row("impala", 8, rep, 20000.0, kind="learner", updates_per_s=150.0, samples_per_s=20000.0,
                      policy_lag_mean=1.5, policy_lag_max=4, env_frac=0.2, inference_frac=0.5, learn_frac=0.3,
                      policy_lag_hist=[10, 20, 5])]
        for agents, rate_ in ((1, 50000.0), (8, 300000.0)):
            rows.append(_row("purejaxrl-ppo", 4, rep, rate_, kind="learner", compile_s=2.5, setup_s=3.0,
                             options={"num_agents": agents}, updates_per_s=10.0,
                             cell_id=f"purejaxrl-ppo/CartPole-v1/n=4/random/num_agents={agents}"))
    return ResultSet.from_rows(rows, {"cpu_model": "x"})


def _page(tmp_path, res=None) -> str:
    export(res or results(), str(tmp_path), [export_html])
    return (tmp_path / "index.html").read_text()


def _figures(page) -> dict:
    """div id -> the traces plotly is given for it, read back from the page."""
    return {m.group(1): json.loads(m.group(2))
            for m in re.finditer(r'Plotly\.newPlot\(\s*"([^"]+)",\s*(\[.*?\]),\s*\{', page)}


def _stepping(res=None) -> list:
    return [r for r in (res or results()).summary_rows() if r["kind"] == "vector_env"]


def test_winner_has_speedup_and_parallel_efficiency():
    w = {x["num_envs"]: x for x in winners(results().summary_rows())}[4]
    assert w["winner"].startswith("gymnasium-async")
    assert abs(w["speedup_over_serial"] - 1.6) < 0.05 and abs(w["efficiency"] - 0.8) < 0.03  # 1.6x on 2 cores


def test_speedup_over_serial_has_a_bootstrap_ci_from_the_repeats():
    res = results()
    w = {x["num_envs"]: x for x in winners(res.summary_rows(), res)}[4]
    assert w["speedup_ci_low"] < w["speedup_over_serial"] < w["speedup_ci_high"]
    assert 1.5 < w["speedup_ci_low"] and w["speedup_ci_high"] < 1.7
    cell = speedup(w["speedup_over_serial"], w["speedup_ci_low"], w["speedup_ci_high"])
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
    assert "compile time apart from the rate" in page and "<td>2.50</td>" in page


def test_points_carry_their_ci_and_hover_shows_median_ci_n_and_cv():
    res = results()
    rows = _stepping(res)
    fig = throughput_figure(rows)
    line = next(t for t in fig.data if t.name == "gymnasium-async random")
    [cell] = [r for r in rows if r["adapter"] == "gymnasium-async"]
    assert line.y[0] == cell["steps_per_s_median"]
    assert line.y[0] + line.error_y.array[0] == pytest.approx(cell["steps_per_s_ci_high"])
    assert line.y[0] - line.error_y.arrayminus[0] == pytest.approx(cell["steps_per_s_ci_low"])
    for word in ("median", "95% CI", "n:", "CV"):
        assert word in line.hovertemplate
    assert list(line.customdata[0]) == [cell["cell_id"], "4", si(cell["steps_per_s_median"]),
                                       f"[{si(cell['steps_per_s_ci_low'])}, {si(cell['steps_per_s_ci_high'])}]",
                                       "3", pct(cell["steps_per_s_cv"])]
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert all("text" not in (t.mode or "") for t in fig.data)   # nothing printed beside the points
    # latency: the CI of each median comes from the cell's repeats
    lat = latency_figure(rows, res)
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
    fig = workers_figure(res.summary_rows())
    assert fig.layout.xaxis.title.text == "workers (log scale)"
    lines = {t.name: t for t in fig.data if t.mode == "lines+markers"}
    assert set(lines) == {"envpool-sync random n=8", "envpool-sync random n=8 ideal"}   # measured and ideal
    measured, ideal = lines["envpool-sync random n=8"], lines["envpool-sync random n=8 ideal"]
    assert measured.line.dash == "solid" and ideal.line.dash == "dash"
    assert list(ideal.y) == pytest.approx([909.0, 1818.0, 3636.0])
    assert measured.error_y.array is not None and ideal.error_y.array is None   # no CI for the ideal
    assert "median" in measured.hovertemplate and "median" not in ideal.hovertemplate
    assert not any("serial" in t.name for t in fig.data)   # one worker count only: no line of its own


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
    row = next(r for r in rows if r["store"] == "numpy-ring" and r["item_bytes"] == 1000)
    assert list(ring.x) == [1000, 10**6] and ring.y[0] == pytest.approx(row["mb_per_s"])
    assert ring.y[0] + ring.error_y.array[0] == pytest.approx(row["mb_per_s_ci_high"])
    assert row["mb_per_s_ci_high"] == pytest.approx(res.summary_rows()[0]["steps_per_s_ci_high"] * 1000 / 1e6)
    assert "median" in ring.hovertemplate and "CV" in ring.hovertemplate
    assert list(fig.layout.xaxis.ticktext) == ["1 KB", "1 MB"]
    refs = [t.name for t in fig.data if t.line.dash == "dash"]
    assert refs == ["memcpy 1 core: 10,000 MB/s", "memcpy all cores: 20,000 MB/s"]
    assert ring.line.color == charts.PALETTE[0] and refs and fig.data[-1].line.color == charts.REFERENCE_COLOURS[1]


def test_stacked_bars_show_a_share_only_where_it_fits():
    fig = split_figure([{"cell_id": "a", "n": 3, "env_frac_median": 0.25, "learn_frac_median": 0.25,
                         "inference_frac_median": float("nan")}])
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


def test_profiles_share_the_stage_colours_of_the_learners():
    from rlbench.families.learners.report import SPLIT
    from rlbench.report.profiles import RUNNING, profiles_figure
    row = {"cell_id": "serial/x", "profile": "p.json", **{f"{s}_s": 1.0 for s in RUNNING + ["setup"]},
           **{f"{s}_frac": 1 / len(RUNNING) for s in RUNNING}}
    fig = profiles_figure([row])
    colours = {t.name: t.marker.color for t in fig.data}
    assert colours["env step"] == dict((t, c) for _, t, c in SPLIT)["env step"] == charts.STAGE_COLOURS["env"]
    assert "py-spy: env step 1.00 s" in fig.data[0].customdata[0][1]
