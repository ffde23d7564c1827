"""A first tune is as good as a later one (issue 43): the machine's calibration runs apart from the budget (its own
time reported, or the cache's date and the command that measured it), each calibration cell is bounded to seconds
(more for a strategy that starts a Ray cluster), and a strategy whose calibration failed or timed out is named with
the reason and raced without a prediction, never pruned for lacking one."""
import json
import os

import pytest
from support.result_rows import _row
from support.tune_race import RateMeasurer

from rlbench.cli import main
from rlbench.errors import UsageError
from rlbench.results.decision import Decision
from rlbench.results.model import ResultSet
from rlbench.tuning import calibrate, calibration
from rlbench.tuning.candidates import Space
from rlbench.tuning.clock import Clock
from rlbench.tuning.decide import decide, lines
from rlbench.tuning.figures import Figures
from rlbench.tuning.profile import EnvProfile
from rlbench.tuning.search import Search
from rlbench.workload import PolicySpec, Workload

PROFILE = EnvProfile.from_json({"step": {"median_us": 1.0, "p99_us": 2.0, "cv": 0.1}, "reset_share": 0.0,
                                "obs_bytes": 16, "rss_per_env_mb": 0.01, "process_rss_mb": 50.0,
                                "policy_us_per_batch": {"1": 1.0, "64": 2.0}})
TIMED_OUT = {"steps_per_s": None, "status": "timeout", "reason": "no result after 10s; process tree killed",
             "wall_s": 10.4}


class _FakeTime:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def test_the_budget_clock_leaves_the_calibration_out_even_while_it_runs():
    now = _FakeTime()
    clock = Clock(now.t, used_before=5.0, apart_before=7.0, now=now)  # a resumed tune: 5 s used, 7 s calibrating
    now.t += 2
    assert clock.elapsed() == pytest.approx(7.0)
    with clock.apart():
        now.t += 40
        assert clock.elapsed() == pytest.approx(7.0)        # a signal mid-calibration: still not charged
        assert clock.apart_s() == pytest.approx(47.0)
    now.t += 3
    assert clock.elapsed() == pytest.approx(10.0) and clock.apart_s() == pytest.approx(47.0)
    with pytest.raises(KeyboardInterrupt), clock.apart():  # however the calibration ends
        now.t += 1
        raise KeyboardInterrupt
    assert clock.elapsed() == pytest.approx(10.0) and clock.apart_s() == pytest.approx(48.0)


def test_each_calibration_cell_is_bounded_and_a_ray_strategy_gets_its_start_up(monkeypatch):
    monkeypatch.delenv(calibrate.BOUND_ENV["cell"], raising=False)
    monkeypatch.delenv(calibrate.BOUND_ENV["startup"], raising=False)
    bound = {c.adapter: dict(c.protocol)["timeout_s"] for c in calibrate.cells(["serial", "ray-actors"], [4])}
    assert bound == {"serial": calibrate.CELL_S, "ray-actors": calibrate.CELL_S + calibrate.STARTUP_S}
    assert calibrate.CELL_S <= 10 and calibrate.CELL_S + calibrate.STARTUP_S <= 30   # seconds, not a minute
    monkeypatch.setenv(calibrate.BOUND_ENV["cell"], "4")
    monkeypatch.setenv(calibrate.BOUND_ENV["startup"], "0")
    assert {dict(c.protocol)["timeout_s"] for c in calibrate.cells(["serial", "ray-actors"], [4])} == {4.0}
    for var, raw in ((calibrate.BOUND_ENV["cell"], "0"), (calibrate.BOUND_ENV["startup"], "soon")):
        monkeypatch.setenv(var, raw)
        with pytest.raises(UsageError, match=rf"\${var}='{raw}' \(valid: seconds"):
            calibrate.bounds()
        monkeypatch.delenv(var)


def test_the_cache_says_who_measured_it_and_a_timeout_is_retried_once_its_bound_is_raised(tmp_path, monkeypatch):
    monkeypatch.setenv("RLBENCH_CACHE", str(tmp_path))
    monkeypatch.setenv(calibrate.BOUND_ENV["cell"], "10")
    key = calibrate.machine_key({"cpu_model": "x", "cpu_logical_cores": 2, "ram_gb": 24, "packages": {}})
    calibrate.store(key, Figures.from_json({"serial": {"16": {"steps_per_s": 5e5, "workers": 1}}}),
                    by="rlbench calibrate")
    [figure] = calibrate.load(key)["serial"].values()
    assert figure.by == "rlbench calibrate" and figure.measured_at > 0
    have = {"serial": {"16": {**TIMED_OUT, "bound_s": 10.0}}, "gymnasium-sync": {"16": {**TIMED_OUT, "bound_s": 5.0}},
            "sb3-subproc": {"16": {"steps_per_s": None, "status": "error", "reason": "boom"}}}
    assert calibrate.missing(Figures.from_json(have), ["serial", "gymnasium-sync", "sb3-subproc"], [16]) \
        == ["gymnasium-sync"]
    rows = [{"adapter": "serial", "num_envs": 16, "status": "timeout", "error": "no result after 10s", "wall_s": 10.2}]
    assert calibrate.figures(rows, {"serial": 10.0}).at("serial", 16).bound_s == 10.0


def test_a_bad_bound_is_one_line_exit_2_before_anything_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RLBENCH_CACHE", str(tmp_path))
    monkeypatch.setenv(calibrate.BOUND_ENV["cell"], "-1")
    assert main(["calibrate", "--adapters", "serial"]) == 2
    assert main(["tune", "--env", "CartPole-v1", "--adapters", "serial", "--out", str(tmp_path / "t")]) == 2
    for err in capsys.readouterr().err.strip().splitlines():
        assert "$RLBENCH_CALIBRATION_CELL_S='-1' (valid: seconds > 0" in err
    assert not (tmp_path / "calibration").exists() and not (tmp_path / "t").exists()


def test_the_calibration_says_whether_it_was_measured_now_or_read_from_the_cache():
    rate = {"steps_per_s": 5e5, "workers": 1, "wall_s": 1.0, "measured_at": 1.7e9, "by": "rlbench calibrate"}
    figures = Figures.from_json({"serial": {"16": rate},
                                 "tianshou-ray": {"16": {**TIMED_OUT, "measured_at": 1.7e9, "by": "x"}}})
    cached = calibration.record(figures, "/c.json", [16], [], (10.0, 20.0))
    assert cached.measured_now == () and cached.cached == ("serial", "tianshou-ray")
    assert cached.failed == {"tianshou-ray": "timeout: no result after 10s; process tree killed"}
    assert calibration.Calibration.from_json(json.loads(json.dumps(cached.to_json()))) == cached   # tune.json
    said = calibration.sentence(cached, 180, 0.0)
    assert said.startswith(f"2 strategies cached from {calibrate.stamp(1.7e9)} by rlbench calibrate, x, "
                           "not counted in the 180 s budget")
    assert "no prediction for tianshou-ray (timeout: no result after 10s; process tree killed): raced without one" \
        in said
    rows = [{"adapter": "serial"}]
    now = calibration.record(figures, "/c.json", [16], rows, (10.0, 20.0))
    said = calibration.sentence(now, 180, 41.2)
    assert said.startswith("41 s measuring 1 strategy now and the other 1 strategy cached from")
    assert calibration.sentence(None, 60, 12) == "interrupted after 12 s, not counted in the 60 s budget"
    assert calibration.sentence(calibration.not_calibrated("a JAX env"), 60, 0) == "none (a JAX env)"


class _Flat(RateMeasurer):
    """Every adapter at its rate (x 1 +- 1% alternating)."""

    def value(self, cell, level):
        return self.rates[cell.adapter] * (1.01 if level % 2 else 0.99)


def test_a_strategy_whose_calibration_timed_out_is_raced_without_a_prediction_and_named():
    """sb3-subproc calibrated far below the leader is pruned; gymnasium-async, whose calibration timed out, has no
    prediction: it is raced (not pruned for lacking one, not dropped unseen) and named with the reason."""
    rates = {"serial": 1e6, "gymnasium-async": 8e5, "sb3-subproc": 3e5}
    cal = {"serial": {"16": {"steps_per_s": 1e6, "workers": 1}}, "gymnasium-async": {"16": TIMED_OUT},
           "sb3-subproc": {"16": {"steps_per_s": 2e4, "workers": 16}}}
    space = Space(Workload("CartPole-v1", 1, PolicySpec()), list(rates), 16, 2)
    search = Search(space, _Flat(rates), 1e6, PROFILE, Figures.from_json(cal), 2, stream=open(os.devnull, "w"))
    search.go()
    mine = [c for c in search.candidates if c.adapter == "gymnasium-async"]
    assert mine and all(c.predicted is None and c.status != "pruned" for c in mine)
    assert any(c.tested for c in mine) and "gymnasium-async" in search.measurer.ran
    assert {c.status for c in search.candidates if c.adapter == "sb3-subproc"} == {"pruned"}
    added = [a for r in search.rounds for a in r["added"] if a["config"].startswith("gymnasium-async")]
    assert added and all(a["uncalibrated"].startswith("timeout: no result after 10s") for a in added)
    rows = [{**_row(c.adapter, c.num_envs, i, v, cell_id=c.cell.cell_id, cell_index=c.cell.index,
                    options=c.cell.given_options), "steps_per_s": v}
            for c in search.candidates for i, v in enumerate(c.values)]
    d = decide(search, ResultSet.from_rows(rows), PROFILE, label="CartPole-v1 with policy random",
               calibration="cached from ...; no prediction for gymnasium-async (...)", calibration_s=0.0)
    assert d.winner.adapter == "serial"
    assert dict(d.uncalibrated) == {"gymnasium-async": "timeout: no result after 10s; process tree killed"}
    [fate] = [f for f in d.strategies if f.adapter == "gymnasium-async"]
    assert fate.measured and "raced without a prediction: no calibration (timeout: no result after 10s" in fate.why
    back = Decision.from_json(json.loads(json.dumps(d.to_json())))   # tune.json and env.json keep it
    assert (back.uncalibrated, back.calibration, back.calibration_s) == (d.uncalibrated, d.calibration, 0.0)
    text = "\n".join(lines(d, PROFILE))
    assert "calibration: cached from" in text and "raced without a prediction" in text


@pytest.mark.slow
def test_a_first_tune_calibrates_apart_from_its_budget_and_races_what_timed_out(tmp_path, monkeypatch, capsys):
    """A real tune on an empty cache: its calibration (slowed here by 6 s) is not charged to the 10 s budget, its
    time is reported, and gymnasium-async, whose calibration cell outlives a 0.05 s bound, is named with the
    timeout and still raced."""
    monkeypatch.setenv("RLBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(calibrate.BOUND_ENV["cell"], "0.05")
    real = calibrate.calibrate

    def slow(*args, **kwargs):
        import time
        time.sleep(6)
        return real(*args, **kwargs)
    monkeypatch.setattr(calibrate, "calibrate", slow)
    out = tmp_path / "tune"
    main(["tune", "--env", "rlbench/Synthetic-v0", "--adapters", "gymnasium-async", "--max-envs", "2",
          "--budget", "10s", "--out", str(out)])
    std = capsys.readouterr()
    record = json.loads((out / "tune.json").read_text())
    cal, decision = record["calibration"], record["decision"]
    assert cal["measured_now"] == ["gymnasium-async"] and cal["seconds"] >= 6 and record["calibration_s"] >= 6
    assert cal["failed"]["gymnasium-async"].startswith("timeout: no result after 0.05s")
    # its first setting timed out: its other one (shared_memory=false) was not tried, it would time out too
    assert [json.loads(line)["status"] for line in (out / "calibration" / "results.jsonl").open()] == ["timeout"]
    # the budget's clock: the search's first round started after the profile only, and it kept to the budget
    assert record["decision"]["rounds"][0]["started_s"] < 5 and record["used_s"] <= record["budget_s"]
    assert decision["calibration"].startswith(f"{cal['seconds']:.0f} s measuring 1 strategy now, not counted "
                                              "in the 10 s budget; no prediction for gymnasium-async (timeout")
    assert decision["uncalibrated"] == {"gymnasium-async": cal["failed"]["gymnasium-async"]}
    raced = [c for c in record["candidates"] if c["ok_repeats"]]
    assert raced and all(c["adapter"] == "gymnasium-async" and c["predicted_max_steps_per_s"] is None for c in raced)
    assert decision["winner"]["adapter"] == "gymnasium-async"
    assert "no calibration of gymnasium-async (timeout: no result after 0.05s" in std.err
    assert "calibration: " in std.out and "not counted in the 10 s budget" in std.out
    assert "Calibration: " in (out / "index.html").read_text()


def test_building_adapter_environments_is_apart_from_the_budget_and_from_the_calibrations_seconds(tmp_path,
                                                                                                  monkeypatch):
    """An adapter environment's first build (minutes for some) is once per machine, as the calibration: a tune
    whose preparation takes 3 s reports them apart, not in its budget nor in the calibration's own seconds."""
    import json
    import time

    from rlbench.running.session import Session
    monkeypatch.setenv("RLBENCH_CACHE", str(tmp_path / "cache"))
    prepare = Session.prepare

    def slow_prepare(self, suite, build=True):
        time.sleep(3.0)
        return prepare(self, suite, build)
    monkeypatch.setattr(Session, "prepare", slow_prepare)
    out = tmp_path / "t"
    main(["tune", "--env", "CartPole-v1", "--adapters", "serial", "--max-envs", "2", "--budget", "10s",
          "--out", str(out)])
    doc = json.loads((out / "tune.json").read_text())
    assert doc["calibration_s"] - doc["calibration"]["seconds"] >= 2.99   # rounded to 0.01 s each
    assert doc["used_s"] <= doc["budget_s"] + 5.0
