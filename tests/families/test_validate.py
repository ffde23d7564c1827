"""Validation against published figures, computed from hand-made runs with known answers."""
import math
import re

import pytest

from rlbench.families.validation import reference
from rlbench.families.validation.checks import _interpolate, validation_rows
from rlbench.results.model import ResultSet, frames


def _cell(adapter, env, n, rate, batch=None, frameskip=1, kw=None, repeats=3, workers=None):
    cell_id = f"{adapter}/{env}{kw or ''}/n={n}/b={batch}" + (f"/w={workers}" if workers else "")
    base = {"cell_id": cell_id, "cell_index": 0, "adapter": adapter, "env": env, "env_kwargs": kw or {},
            "num_envs": n, "workers": workers, "batch_size": batch, "policy": "random", "device": "cpu",
            "options": {}, "frameskip": frameskip, "status": "ok", "profiled": False, "suite": "v", "schema": 1}
    return [frames({**base, "repeat": r, "env_steps": int(rate), "units": 1, "seconds": 1.0,
                    "steps_per_s": rate, "latency_p50_ms": 1.0, "latency_p99_ms": 1.0, "policy_s": None,
                    "cpu_util": 1.0, "peak_rss_mb": 1.0}) for r in range(repeats)]


def _published_run(scale=1.0):
    """A run whose Pong frames/s are exactly the published ones (times `scale` for every strategy)."""
    pub = reference.ENVPOOL_LAPTOP_FPS["Pong-v5"]
    rows = []
    for w in (1, 2):
        rows += _cell("serial", "Pong-v5", w, pub["for-loop"][w] * scale / 4, frameskip=4)
        rows += _cell("gymnasium-async", "Pong-v5", w, pub["subprocess"][w] * scale / 4, frameskip=4)
        rows += _cell("sample-factory", "Pong-v5", w, pub["sample-factory"][w] * scale / 4, frameskip=4, workers=w)
        rows += _cell("sample-factory", "Pong-v5", 2 * w, pub["sample-factory"][w] * scale / 5, frameskip=4,
                      workers=w)
        rows += _cell("envpool-sync", "Pong-v5", w, pub["envpool-sync"][w] * scale / 4, batch=w, frameskip=4)
        rows += _cell("envpool-async", "Pong-v5", 3 * w, pub["envpool-async"][w] * scale / 4, batch=w, frameskip=4)
        rows += _cell("envpool-async", "Pong-v5", 4 * w, pub["envpool-async"][w] * scale / 8, batch=w, frameskip=4)
    return ResultSet.from_rows(rows)


def test_published_numbers_validate_with_ratio_one():
    rows = [r for r in validation_rows(_published_run(scale=3.0)) if r["quantity"].startswith("ratio")]
    assert len(rows) == 2 * 7
    for r in rows:
        assert r["measured_over_published"] == pytest.approx(1.0)
        assert r["verdict"] == "within tolerance"


def test_async_column_is_the_best_over_num_envs_and_fps_are_frames():
    rows = validation_rows(_published_run())
    fps = {(r["workers"], r["quantity"]): r for r in rows if r["quantity"].startswith("frames/s")}
    assert fps[(2, "frames/s envpool-async")]["measured"] == pytest.approx(18880.65)
    assert "n=6" in fps[(2, "frames/s envpool-async")]["cells"]  # 3 x batch beat 4 x batch
    assert fps[(1, "frames/s for-loop")]["verdict"].startswith("context only")


def test_all_five_columns_of_envpools_table_at_1_and_2_workers():
    rows = validation_rows(_published_run())
    for w in (1, 2):
        shown = {r["quantity"] for r in rows if r["workers"] == w and r["quantity"].startswith("frames/s")}
        assert shown == {f"frames/s {s}" for s in ("for-loop", "subprocess", "sample-factory", "envpool-sync",
                                                   "envpool-async")}
    fps = {(r["workers"], r["quantity"]): r for r in rows}
    sf = fps[(2, "frames/s sample-factory")]
    assert sf["measured"] == pytest.approx(11148.0)  # workers=2: the 2-env cell beat the 4-env one
    assert "n=2/" in sf["cells"] and "w=2" in sf["cells"]


def test_a_ratio_off_by_more_than_the_tolerance_is_flagged():
    doubled = "envpool-sync/Pong-v5/n=2/b=2"  # runs are immutable: the run is rebuilt from edited rows
    run = ResultSet.from_rows([{**r, "frames_per_s": r["frames_per_s"] * (2 if r["cell_id"] == doubled else 1)}
                               for r in _published_run().runs])
    verdicts = {r["quantity"]: r["verdict"] for r in validation_rows(run) if r["workers"] == 2}
    assert verdicts["ratio envpool-sync / subprocess"] == "outside tolerance"
    assert verdicts["ratio envpool-async / subprocess"] == "within tolerance"


def test_baselines_608_direction():
    run = ResultSet.from_rows(_cell("sb3-dummy", "CartPole-v1", 16, 100_000)
                              + _cell("sb3-subproc", "CartPole-v1", 16, 20_000))
    [row] = validation_rows(run)
    assert row["measured"] == pytest.approx(0.2) and row["verdict"] == "same direction (< 1)"


def test_crossover_is_found_between_the_bracketing_costs():
    rows = []
    for cost, serial, sub in ((10, 1000, 200), (100, 500, 400), (1000, 100, 180)):
        kw = {"step_cost_us": float(cost), "obs_bytes": 64}
        rows += _cell("serial", "rlbench/Synthetic-v0", 2, serial, kw=kw)
        rows += _cell("gymnasium-async", "rlbench/Synthetic-v0", 2, sub, kw=kw)
    [row] = validation_rows(ResultSet.from_rows(rows))
    assert 100 < row["measured"] < 1000
    assert "between 100 and 1000 us" in row["verdict"]
    # log-log interpolation: ratio 0.8 at 100 us, 1.8 at 1000 us
    t = -math.log(0.8) / (math.log(1.8) - math.log(0.8))
    assert row["measured"] == pytest.approx(10 ** (2 + t))


def test_interpolation_from_zero_cost_is_linear():
    assert _interpolate((0.0, 0.5), (10.0, 1.5)) == pytest.approx(5.0)


def test_validate_from_an_existing_run_writes_validation_csv(tmp_path, capsys):
    from rlbench import cli
    from rlbench.results.store import ResultStore
    store = ResultStore(str(tmp_path))
    for row in _published_run().runs:
        store.append(row)
    store.close()
    assert cli.main(["validate", "--from", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "ratio envpool-async / subprocess" in out and "within tolerance" in out
    assert (tmp_path / "validation.csv").read_text().startswith("check,env,workers,quantity,measured,published")
    assert "Validation: measured vs published" in (tmp_path / "index.html").read_text()
    assert cli.main(["validate", "--from", str(tmp_path / "nope")]) == 2


def test_gymnax_readme_seconds_per_million_steps_and_their_ratio():
    rows = (_cell("gymnasium-async", "CartPole-v1", 10, 20_000.0) + _cell("gymnax", "CartPole-v1", 10, 2e6)
            + _cell("gymnax", "CartPole-v1", 2048, 5e7))   # a CPU cell: not the README's A100 figure
    got = {r["quantity"]: r for r in validation_rows(ResultSet.from_rows(rows)) if r["check"] == "gymnax-readme"}
    assert got["s per 1M steps: numpy subprocesses, 10 envs"]["measured"] == pytest.approx(50.0)
    assert got["s per 1M steps: gymnax on CPU, 10 envs"]["measured"] == pytest.approx(0.5)
    ratio = got["ratio subprocesses / gymnax CPU (time per 1M)"]
    assert ratio["measured"] == pytest.approx(100.0) and ratio["published"] == pytest.approx(46 / 0.43)
    assert ratio["verdict"] == "same order of magnitude"
    assert not any("A100" in q for q in got)   # only a gpu cell is set beside the A100 figure


def test_measured_ratios_carry_a_bootstrap_ci_from_both_cells_repeats():
    from rlbench.families.validation.report import validation_table, validation_text
    from rlbench.results.stats import ratio_ci
    rows = [dict(r, steps_per_s=r["steps_per_s"] * (1 + 0.01 * r["repeat"]),
                 frames_per_s=r["frames_per_s"] * (1 + 0.01 * r["repeat"])) for r in _published_run().runs]
    res = ResultSet.from_rows(rows)
    checks = validation_rows(res)
    ratio = next(r for r in checks if r["workers"] == 2 and r["quantity"] == "ratio envpool-sync / for-loop")
    num, den = (next(b for b in res.benchmarks.values() if b.first["adapter"] == a and b.first["num_envs"] == 2)
                for a in ("envpool-sync", "serial"))
    expected = ratio_ci([r["frames_per_s"] for r in num.ok_runs], [r["frames_per_s"] for r in den.ok_runs])
    assert (ratio["measured"], ratio["measured_ci_low"], ratio["measured_ci_high"]) == pytest.approx(expected)
    assert ratio["measured_ci_low"] < ratio["measured"] < ratio["measured_ci_high"]
    fps = next(r for r in checks if r["quantity"].startswith("frames/s"))
    assert fps["measured_ci_low"] is None                        # not a ratio: no CI column
    table, text = validation_table(checks), validation_text(checks)
    assert "measured [95% CI]" in table and "measured [95% CI]" in text
    assert re.search(r">\d\.\d+ \[\d\.\d+, \d\.\d+\]</td>", table)
    one = validation_rows(ResultSet.from_rows([r for r in rows if r["repeat"] == 0]))
    assert " [-]" in validation_table(one)                       # one repeat a side: the ratio, no CI


def test_crossover_ratios_carry_their_cis():
    rows = []
    for cost, serial, sub in ((0.0, 1000.0, 500.0), (100.0, 800.0, 1200.0)):
        kw = {"step_cost_us": cost}
        rows += _cell("serial", "rlbench/Synthetic-v0", 4, serial, kw=kw) + _cell("gymnasium-async",
                                                                                  "rlbench/Synthetic-v0", 4, sub, kw=kw)
    rows = [dict(r, steps_per_s=r["steps_per_s"] * (1 + 0.01 * r["repeat"])) for r in rows]
    [cross] = [r for r in validation_rows(ResultSet.from_rows(rows)) if r["check"] == "crossover"]
    assert re.fullmatch(r"ratios: 0us 0\.50x \[0\.\d\d, 0\.\d\d\], 100us 1\.50x \[1\.\d\d, 1\.\d\d\]",
                        cross["conditions"]), cross["conditions"]
