"""index.html has a section per family present: env stepping (throughput with CI bands, unit latency,
winners with speedup and parallel efficiency, scaling with workers beside the ideal) and learners (throughput, lag, time split)."""
import re

from rlbench.report.html import HtmlReporter, winners
from rlbench.results import ResultSet, frames


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
        for agents, rate in ((1, 50000.0), (8, 300000.0)):
            rows.append(_row("purejaxrl-ppo", 4, rep, rate, kind="learner", compile_s=2.5, setup_s=3.0,
                             options={"num_agents": agents}, updates_per_s=10.0,
                             cell_id=f"purejaxrl-ppo/CartPole-v1/n=4/random/num_agents={agents}"))
    return ResultSet.from_rows(rows, {"cpu_model": "x"})


def test_winner_has_speedup_and_parallel_efficiency():
    w = {x["num_envs"]: x for x in winners(results().summary_rows())}[4]
    assert w["winner"].startswith("gymnasium-async")
    assert abs(w["speedup_over_serial"] - 1.6) < 0.05 and abs(w["efficiency"] - 0.8) < 0.03  # 1.6x on 2 cores


def test_sections_charts_and_learners(tmp_path):
    HtmlReporter().report(results(), str(tmp_path))
    page = (tmp_path / "index.html").read_text()
    assert "Env stepping" in page and "Learners and training" in page
    charts = re.findall(r"<svg.*?</svg>", page)
    assert len(charts) == 4                              # throughput, latency, agents, learners' time split
    throughput, latency, agents, split = charts
    assert "<polygon" in throughput                       # the CI band of a series with two points
    assert throughput.count("<circle") == 3 and "1.62k" in throughput   # every point drawn and labelled
    assert "stroke-dasharray" in latency                  # p99 dashed beside p50
    assert "50%" in split and "learn" in page and "[10, 20, 5]" in page
    assert "Time split per stage" in page
    assert "compile time apart from the rate" in page and "<td>2.50</td>" in page
    assert "num_agents (log scale)" in agents and agents.count("<circle") == 2 and "<polyline" in agents


def test_workers_swept_at_one_num_envs_scale_against_the_ideal(tmp_path):
    rows = []
    for rep in range(3):
        rows += [_row("serial", 8, rep, 1000.0)]
        for threads, rate in ((1, 900.0), (2, 1500.0), (4, 2000.0)):
            rows.append(_row("envpool-sync", 8, rep, rate, workers=threads, options={"num_threads": threads},
                             cell_id=f"envpool-sync/CartPole-v1/n=8/random/num_threads={threads}"))
    HtmlReporter().report(ResultSet.from_rows(rows, {"cpu_model": "x"}), str(tmp_path))
    page = (tmp_path / "index.html").read_text()
    assert "env steps/s vs workers at a fixed num_envs" in page
    chart = re.search(r"vs workers at a fixed num_envs.*?(<svg.*?</svg>)", page).group(1)
    assert "workers (log scale)" in chart and "envpool-sync random n=8" in chart
    assert chart.count("<polyline") == 2 and "stroke-dasharray='3,4'" in chart   # measured and ideal
    assert chart.count("<circle") == 3 and chart.count("class='value'") == 3   # measured points labelled, not the ideal
    # serial has one worker count only: no line of its own
    assert "serial" not in chart


def test_no_workers_chart_without_a_workers_sweep(tmp_path):
    HtmlReporter().report(results(), str(tmp_path))
    assert "vs workers" not in (tmp_path / "index.html").read_text()
