"""results.jsonl is the source of truth: appended one line per repeat, robust to a cut last line, and
`rlbench report DIR` rebuilds results.csv, summary.csv and index.html from it."""
import csv
import dataclasses
import json

import pytest
from support import TINY

from rlbench import cli
from rlbench.results.model import RUN_COLUMNS, ResultSet, frames
from rlbench.results.store import ResultStore, read_rows


def _row(cell, index, repeat, status="ok", rate=1000.0, **extra):
    row = {"schema": 1, "run_id": "r", "suite": "hand", "cell_id": cell, "cell_index": index, "adapter": cell,
           "kind": "vector_env", "env": "CartPole-v1", "env_kwargs": {}, "num_envs": 4, "workers": 1,
           "batch_size": None, "policy": "random", "device": "cpu", "options": {}, "frameskip": 1, "seed": 0,
           "repeat": repeat, "profiled": False, "status": status, "error": None}
    if status == "ok":
        row.update(env_steps=int(rate), units=int(rate) // 4, seconds=1.0, steps_per_s=rate,
                   latency_p50_ms=0.1, latency_p99_ms=0.2, policy_s=0.25, env_s=0.75, cpu_util=1.0,
                   peak_rss_mb=50.0 + repeat)
    return frames({**row, **extra})


def _write(run_dir, rows, tail=""):
    store = ResultStore(str(run_dir))
    for r in rows:
        store.append(r)
    store.close()
    if tail:
        with open(run_dir / "results.jsonl", "a") as f:
            f.write(tail)


def test_store_appends_one_line_per_row(tmp_path):
    _write(tmp_path, [_row("a", 0, 0), _row("a", 0, 1)])
    _write(tmp_path, [_row("a", 0, 2)])  # a second store on the same directory appends
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(line)["cell_id"] == "a" for line in lines)
    assert [r["repeat"] for r in read_rows(str(tmp_path / "results.jsonl"))] == [0, 1, 2]


@pytest.mark.parametrize("tail", ['{"schema": 1, "run_id": "r", "cell', "\n\n", "garbage\n", "{"])
def test_cut_or_blank_lines_are_ignored(tmp_path, tail):
    _write(tmp_path, [_row("a", 0, 0), _row("b", 1, 0)], tail=tail)
    assert [r["cell_id"] for r in read_rows(str(tmp_path / "results.jsonl"))] == ["a", "b"]


def test_summary_of_hand_written_rows(tmp_path, capsys):
    rows = ([_row("slow", 1, r, rate=v) for r, v in enumerate([100.0, 300.0, 200.0])]
            + [_row("fast", 0, 0, rate=1000.0), _row("fast", 0, 1, status="error", error="RuntimeError: x"),
               _row("fast", 0, 2, rate=1000.0)]
            + [_row("fast", 0, 3, rate=5.0, profiled=True, profile="profiles/fast.json")]
            + [_row("never", 2, 0, status="timeout", error="no result after 3s")])
    _write(tmp_path, rows, tail='{"cut')
    assert cli.main(["report", str(tmp_path)]) == 0
    assert "report:" in capsys.readouterr().out
    with open(tmp_path / "summary.csv", newline="") as f:
        summary = list(csv.DictReader(f))
    assert [s["cell_id"] for s in summary] == ["fast", "slow", "never"]  # suite order, not first-seen
    fast, slow, never = summary
    assert (slow["n"], slow["status"], float(slow["steps_per_s_median"])) == ("3", "ok", 200.0)
    assert float(slow["steps_per_s_min"]) == 100.0 and float(slow["steps_per_s_max"]) == 300.0
    assert float(slow["peak_rss_mb_max"]) == 52.0
    assert float(slow["policy_frac_median"]) == 0.25
    assert "CV 50.0% > 10%" in slow["warning"]
    # the profiled run is kept out of the statistics; the failed repeat is reported
    assert (fast["n"], fast["status"], fast["error"]) == ("2", "ok+error", "RuntimeError: x")
    assert float(fast["steps_per_s_median"]) == 1000.0 and fast["profile"] == "profiles/fast.json"
    assert (never["n"], never["status"], never["steps_per_s_median"]) == ("0", "timeout", "")
    with open(tmp_path / "results.csv", newline="") as f:
        assert len(list(csv.DictReader(f))) == len(rows)
    page = (tmp_path / "index.html").read_text()
    assert "no result after 3s" in page and "plotly-graph-div" in page


def test_report_rebuilds_a_real_run(cli_run, capsys):
    run = cli_run(["run", "--adapter", "serial", "--adapter", "gymnasium-sync", "--env", "CartPole-v1",
                   "--num-envs", "2", *TINY])
    assert run.rc == 0
    outputs = ("results.csv", "summary.csv", "index.html")
    before = {name: (run.out / name).read_text() for name in outputs}
    for name in outputs:
        (run.out / name).unlink()
    with open(run.out / "results.jsonl", "a") as f:
        f.write('{"schema": 1, "cell_id": "half a li')  # as if the machine died mid-write
    capsys.readouterr()
    assert cli.main(["report", str(run.out)]) == 0
    assert {name: (run.out / name).read_text() for name in outputs} == before
    assert len(ResultSet.load(str(run.out)).runs) == 2


def test_html_names_the_fastest_strategy_per_size_and_its_speedup_over_serial():
    from rlbench.families.stepping.report import winners
    results = ResultSet.from_rows(
        [_row("serial", 0, r, rate=1000.0 + r) for r in range(3)]
        + [_row("envpool-async", 1, r, rate=3000.0 + 10 * r) for r in range(3)]
        + [_row("gymnasium-async", 2, r, rate=2990.0 + 10 * r) for r in range(3)])
    [w] = winners(results.cells.values(), results)
    assert w.winner == "envpool-async random" and w.runner_up == "gymnasium-async random"
    assert w.speedup_over_serial == pytest.approx(3010.0 / 1001.0)
    assert w.lead == "lead not significant (the 95% CI includes 1x)"
    [alone] = winners(results.cells.values())  # without the repeats: no CI to tell
    assert alone.lead == "lead untested (fewer than 2 repeats)"


def test_winners_compare_like_with_like_policies_and_leave_runners_out():
    from rlbench.families.stepping.report import winners
    runs = ([_row("rlpyt-serial", 0, r, rate=1000.0 + r) for r in range(3)]
            + [_row("rlpyt-gpu", 1, r, rate=1500.0 + r) for r in range(3)]
            + [_row("gpu-mlp", 2, r, rate=9000.0 + r, adapter="rlpyt-gpu", policy="mlp64x64-cpu-t1") for r in range(3)]
            + [_row("rlpyt-async", 3, r, rate=5000.0 + r, kind="runner") for r in range(3)])
    by_policy = {w.policy: w for w in winners(ResultSet.from_rows(runs).cells.values())}
    assert set(by_policy) == {"random", "mlp64x64-cpu-t1"}
    assert by_policy["random"].winner == "rlpyt-gpu random"
    assert by_policy["random"].speedup_over_serial == pytest.approx(1501.0 / 1001.0)
    assert by_policy["mlp64x64-cpu-t1"].speedup_over_serial is None


def _cell_row(repeat, rate, **extra):
    row = {"schema": 1, "run_id": "r", "suite": "s", "cell_id": "c", "cell_index": 0, "adapter": "serial",
           "kind": "vector_env", "env": "CartPole-v1", "env_kwargs": {"a": 1}, "num_envs": 4, "workers": 1,
           "batch_size": None, "policy": "random", "device": "cpu", "options": {"x": True}, "frameskip": 1,
           "seed": 0, "repeat": repeat, "profiled": False, "status": "ok", "error": None, "env_steps": int(rate),
           "units": 10, "seconds": 1.0, "steps_per_s": rate, "latency_p50_ms": 0.1, "latency_p99_ms": 0.2,
           "policy_s": 0.5, "cpu_util": 1.0, "peak_rss_mb": 50.0 + repeat, "affinity": [0, 1],
           "placement": [{"pid": 1}], "updates_per_s": 2.0 * rate, "close_s": 0.01, "latency_mean_ms": 0.12}
    return frames({**row, **extra})


def test_runs_and_benchmarks_are_immutable_and_summarised_once():
    results = ResultSet.from_rows([_cell_row(r, 100.0 * (r + 1)) for r in range(3)], {})
    bench = results.benchmarks["c"]
    run = bench.runs[0]
    assert isinstance(bench.runs, tuple) and isinstance(bench.ok_runs, tuple)
    with pytest.raises(AttributeError):
        bench.runs = ()
    with pytest.raises(TypeError):
        results.benchmarks["d"] = bench
    with pytest.raises(TypeError):
        run["options"]["x"] = False
    with pytest.raises(TypeError):
        run.fields["status"] = "error"
    assert run["affinity"] == (0, 1) and run["options"] == {"x": True}
    assert json.dumps(run.to_row()) == json.dumps(_cell_row(0, 100.0))  # the row as it was read
    assert run.counters["updates_per_s"] == 200.0 and run.info["affinity"] == (0, 1)
    assert results.cells["c"] is bench.summary is results.cells["c"]  # computed once
    with pytest.raises(dataclasses.FrozenInstanceError):
        bench.summary.n = 0
    row = results.summary_rows()[0]
    row["n"] = 99  # a copy: the cached summary is untouched
    cell = bench.summary
    assert cell.n == 3 and cell.steps_per_s.median == 200.0 and cell.value("steps_per_s_median") == 200.0
    assert cell.stat("updates_per_s").median == 400.0 and cell.stat("peak_rss_mb").maximum == 52.0
    assert cell.stat("policy_frac").median == 0.5 and cell.steps_per_s.ci_method == "student-t-log"
    frame = results.runs_frame()
    assert list(frame.columns) == list(RUN_COLUMNS) and frame["close_s"].tolist() == [0.01] * 3
