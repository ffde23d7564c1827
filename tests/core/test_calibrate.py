"""The calibration `rlbench tune` predicts from: each strategy's env steps/s on the zero-cost synthetic env,
cached per machine (another machine's figures are never read), merged under a lock, and what it predicts:
an upper bound no faster than the strategy's ceiling or than its cores doing the env's and policy's work."""
import json
import os

import pytest

from rlbench.cli import main
from rlbench.tuning import calibrate
from rlbench.tuning.figures import Figure, Figures
from rlbench.tuning.profile import EnvProfile

PROFILE = EnvProfile.from_json({"step": {"median_us": 100.0}, "reset_share": 0.0, "rss_per_env_mb": 2.0, "process_rss_mb": 60.0,
           "policy_us_per_batch": {"1": 10.0, "64": 64.0}})


def test_the_cache_is_keyed_by_the_machine_and_merges(tmp_path, monkeypatch):
    monkeypatch.setenv("RLBENCH_CACHE", str(tmp_path))
    key = calibrate.machine_key({"cpu_model": "x", "cpu_logical_cores": 2, "ram_gb": 24, "packages": {"numpy": "2"}})
    other = {**key, "cpu_model": "y"}
    assert calibrate.load(key) == Figures()
    calibrate.store(key, Figures.from_json({"serial": {"16": {"steps_per_s": 5e5, "workers": 1, "wall_s": 1.0}}}))
    calibrate.store(key, Figures.from_json({"sb3-subproc": {"16": {"steps_per_s": None, "status": "error",
                                                                   "reason": "boom"}}}))
    have = calibrate.load(key)
    assert set(have) == {"serial", "sb3-subproc"} and calibrate.load(other) == Figures()
    assert calibrate.missing(have, ["serial", "sb3-subproc", "rlpyt-cpu"], [16]) == ["rlpyt-cpu"]
    assert calibrate.missing(have, ["serial"], [2]) == ["serial"]
    assert have.ceiling("sb3-subproc") is None and have.ceiling("serial") == 1e6
    assert json.loads(open(calibrate.cache_path(key)).read())["key"] == key


def test_a_figure_measured_under_other_code_is_measured_again():
    serial = calibrate.code_of("serial")
    assert len(serial) == 16 and serial == calibrate.code_of("serial") != calibrate.code_of("rlpyt-cpu")
    # rlpyt-cpu's helpers (adapters/_kit/procs.py, its worker processes) are in its code, not serial's
    before = calibrate.code_of("rlpyt-cpu")
    calibrate.code_of.cache_clear()
    import adapters._kit.procs as procs
    real = procs.__file__
    try:
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as changed:
            changed.write(open(real).read() + "\n# changed\n")
        procs.__file__ = changed.name
        assert calibrate.code_of("rlpyt-cpu") != before and calibrate.code_of("serial") == serial
    finally:
        procs.__file__ = real
        calibrate.code_of.cache_clear()
        os.remove(changed.name)
    figure = {"steps_per_s": 5e5, "workers": 1}
    have = {"serial": {"16": {**figure, "code": serial}}, "gymnasium-sync": {"16": {**figure, "code": "0" * 16}}}
    assert calibrate.missing(Figures.from_json(have), ["serial", "gymnasium-sync"], [16]) == ["gymnasium-sync"]
    rows = [{"adapter": "serial", "num_envs": 16, "status": "ok", "steps_per_s": 5e5, "wall_s": 1.0}]
    assert calibrate.figures(rows).at("serial", 16).code == serial


def test_predictions_are_upper_bounds_from_the_ceiling_and_the_work():
    cal = {"serial": {"16": {"steps_per_s": 4e5, "workers": 1}},
           "gymnasium-async": {"16": {"steps_per_s": 2e4, "workers": 16}},
           "rlpyt-cpu": {"16": {"steps_per_s": 6e5, "workers": 2}}}
    cal = Figures.from_json(cal)
    work_us = 100.0 + 1.0   # the env's step, and the policy at its cheapest batch (64 us / 64)
    assert calibrate.predict(cal, "serial", 8, PROFILE, 2) == pytest.approx(1e6 / work_us)        # one process
    assert calibrate.predict(cal, "rlpyt-cpu", 8, PROFILE, 2, central=False) == pytest.approx(2e6 / work_us)  # 2 workers
    # a central policy on the CPU beside two workers' envs: at best it overlaps their stepping, and the two cores do
    # the env's and the policy's work together, whoever does which
    assert calibrate.predict(cal, "rlpyt-cpu", 8, PROFILE, 2, central=True) == pytest.approx(2e6 / work_us)
    # on a GPU the policy's work leaves the cores: the overlap alone bounds it (no cuda curve: the CPU's stands in)
    assert calibrate.predict(cal, "rlpyt-cpu", 8, PROFILE, 2, "cuda", central=True) == pytest.approx(1e6 / 50.0)
    assert calibrate.predict(cal, "gymnasium-async", 16, PROFILE, 16) == pytest.approx(4e4)       # its ceiling
    assert calibrate.predict(cal, "envpool-sync", 8, PROFILE, 2) is None                          # not calibrated
    assert cal.workers_at("gymnasium-async", 64, 2) == 64 and cal.workers_at("rlpyt-cpu", 64, 2) == 2
    assert calibrate.memory_mb(cal, "gymnasium-async", 64, PROFILE, 2) == pytest.approx(64 * 2.0 + 63 * 60.0)
    assert calibrate.memory_mb(cal, "serial", 64, PROFILE, 2) == pytest.approx(64 * 2.0)


def test_rlbench_calibrate_measures_once_then_reads_the_cache(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RLBENCH_CACHE", str(tmp_path))
    assert main(["calibrate", "--adapters", "serial,gymnasium-sync", "--max-envs", "2"]) == 0
    out = capsys.readouterr().out
    assert "2 measured now" in out and "serial" in out and "gymnasium-sync" in out
    [path] = list((tmp_path / "calibration").glob("*.json"))
    figures = json.loads(path.read_text())["adapters"]
    assert figures["serial"]["2"]["steps_per_s"] > 0 and figures["serial"]["2"]["wall_s"] > 0
    assert main(["calibrate", "--adapters", "serial", "--max-envs", "2"]) == 0
    assert "0 measured now" in capsys.readouterr().out


def test_bad_calibrate_input_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RLBENCH_CACHE", str(tmp_path))
    assert main(["calibrate", "--adapters", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert "unknown adapter 'nope'" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "calibration").exists()


def test_each_adapter_is_calibrated_under_every_setting_tune_races_and_keeps_its_best():
    """A strategy's default can be its worst setting here (PufferLib's workers busy-waiting on every core):
    the ceiling that prunes it is its best setting's, and the workers bound is the most any setting used."""
    from rlbench import registry
    from rlbench.tuning.calibrate import best_of, cells
    cpus = len(os.sched_getaffinity(0))
    got = [c.options for c in cells(["gymnasium-async"], [8])]
    want = registry.get("gymnasium-async")().tune_space(8, cpus)
    assert len(got) == len(want) == 2 and {c.get("shared_memory", True) for c in got} == {True, False}
    slow = Figure(4e3, 2, {"num_workers": 2}, 3.0)
    fast = Figure(1e5, 1, {"num_workers": 1}, 2.0)
    failed = Figure(None, status="error", reason="x", wall_s=5.0)
    kept = best_of(best_of(best_of(None, slow), fast), failed)
    assert kept == Figure(1e5, 2, {"num_workers": 1}, 5.0)
    assert best_of(None, failed) == failed


def test_a_calibration_cut_short_caches_the_jobs_that_finished(tmp_path, monkeypatch):
    """A signal (or a full disk) mid-calibration: what finished is not lost, the next tune reads it."""
    monkeypatch.setenv("RLBENCH_CACHE", str(tmp_path / "cache"))
    started = []

    def admit(job):
        started.append(job.cell.adapter)
        if len(started) == 2:
            raise KeyboardInterrupt
        return True
    with pytest.raises(KeyboardInterrupt):
        calibrate.calibrate(["serial", "gymnasium-sync"], [2], out_dir=str(tmp_path / "cal"), admit=admit)
    have = calibrate.load(calibrate.machine_key())
    assert set(have) == {started[0]} and have.at(started[0], 2).steps_per_s > 0
