"""`rlbench report DIR --format pytest-benchmark`: a run exported in pytest-benchmark's saved-JSON schema, read
back by `pytest-benchmark compare` itself; one round per ok repeat, valued in seconds per env step."""
import json
import os
import random
import statistics
import subprocess
import sys

import pytest
from support import run_cli

from rlbench import cli
from rlbench.report.pytest_benchmark import FILENAME, stats, to_json
from rlbench.results.model import ResultSet

CELLS = ("serial/CartPole-v1/n=1/random", "serial/CartPole-v1/n=2/random")


def _tiny_run(out, repeats: int):
    run = run_cli(["run", "--adapter", "serial", "--env", "CartPole-v1", "--num-envs", "1,2",
                   "--repeats", repeats, "--duration", "0.2", "--warmup", "0.05"], out)
    assert run.rc == 0, run.rows
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two small real runs: A with 3 repeats a cell (an odd count), B with 2."""
    root = tmp_path_factory.mktemp("pb")
    return _tiny_run(root / "A", 3), _tiny_run(root / "B", 2)


def _files(path) -> dict:
    """Every file under path and when it was last written, but the run lock's own files."""
    return {p: p.stat().st_mtime_ns for p in path.rglob("*") if p.name not in (".rlbench.lock", ".rlbench.owner")}


def test_export_is_read_by_pytest_benchmark_compare(runs, tmp_path, capsys):
    for run in runs:
        assert not (run / FILENAME).exists()  # not part of the default report
        before = _files(run)
        assert cli.main(["report", str(run), "--format", "pytest-benchmark"]) == 0
        assert f"pytest-benchmark: {run / FILENAME}" in capsys.readouterr().out
        after = _files(run)
        assert set(after) - set(before) == {run / FILENAME}  # that file only; results.csv etc. untouched
        assert all(after[p] == t for p, t in before.items())
    proc = subprocess.run([sys.executable, "-m", "pytest_benchmark", "compare", *(str(r / FILENAME) for r in runs)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "COLUMNS": "250"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for cell_id in CELLS:
        assert f"benchmark '{cell_id.split('/', 1)[1]}': 2 tests" in proc.stdout  # one group per workload
        assert proc.stdout.count(f"{cell_id} (") == 2, proc.stdout                # A's row and B's row
    assert "Rounds" in proc.stdout and "Traceback" not in proc.stderr


@pytest.mark.parametrize("which, repeats", [(0, 3), (1, 2)])
def test_rounds_are_the_ok_repeats_in_seconds_per_step(runs, which, repeats):
    run = runs[which]
    if not (run / FILENAME).exists():
        assert cli.main(["report", str(run), "--format", "pytest-benchmark"]) == 0
    doc = json.loads((run / FILENAME).read_text(), parse_constant=pytest.fail)  # strict JSON: no NaN
    results = ResultSet.load(str(run))
    summary = {r["cell_id"]: r for r in results.summary_rows()}
    env = json.loads((run / "env.json").read_text())
    assert [b["name"] for b in doc["benchmarks"]] == list(CELLS) and doc["rlbench"]["left_out"] == []
    for bench in doc["benchmarks"]:
        rates = [r["steps_per_s"] for r in results.benchmarks[bench["name"]].ok_runs]
        s = bench["stats"]
        assert s["rounds"] == len(rates) == repeats
        assert s["data"] == pytest.approx([1 / v for v in rates], rel=1e-15)
        assert s["median"] == pytest.approx(statistics.median(1 / v for v in rates), rel=1e-12)
        if repeats % 2:  # odd: the median per-step time is exactly 1 / the median rate
            assert s["median"] == pytest.approx(1 / summary[bench["name"]]["steps_per_s_median"], rel=1e-12)
        assert s["iterations"] == 1 and s["ops"] == pytest.approx(repeats / sum(1 / v for v in rates))
        assert bench["fullname"] == bench["param"] == bench["name"]
        assert bench["group"] == bench["name"].split("/", 1)[1]
        assert bench["params"] == {"adapter": "serial", "env": "CartPole-v1", "policy": "random", "options": {},
                                   "num_envs": int(bench["name"].split("n=")[1].split("/")[0])}
        extra = bench["extra_info"]
        assert extra["steps_per_s_median"] == pytest.approx(summary[bench["name"]]["steps_per_s_median"])
        assert extra["status"] == "ok" and extra["n"] == repeats and extra["adapter"] == "serial"
        assert extra["steps_per_s_ci_low"] < extra["steps_per_s_median"] < extra["steps_per_s_ci_high"]
        assert bench["options"]["repeats"] == repeats
    assert doc["machine_info"]["processor"] == env["cpu_model"]
    assert doc["machine_info"]["python_version"] == env["python"]
    assert doc["machine_info"]["platform"] == env["os"]
    assert doc["commit_info"]["id"] == (env["git"]["commit"] or "unversioned")
    assert doc["datetime"] == env["ended_at"] and doc["version"] == "5.3.1"


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 17])
def test_stats_are_computed_as_pytest_benchmark_computes_them(n):
    from pytest_benchmark.stats import Stats
    rng = random.Random(n)
    data = [rng.lognormvariate(-10, 0.3) for _ in range(n)] + ([1e-3] if n > 6 else [])  # an outlier too
    theirs = Stats()
    for v in data:
        theirs.update(v)
    ours = stats(data)
    assert list(ours) == list(Stats.fields)
    for key, value in theirs.as_dict().items():
        assert ours[key] == (pytest.approx(value, rel=1e-12) if isinstance(value, float) else value), key


def _row(cell_id, repeat, status, rate=None, **extra):
    adapter, env, n, policy = cell_id.split("/")
    return {"cell_id": cell_id, "cell_index": 0 if adapter == "a" else 1, "adapter": adapter, "env": env,
            "env_kwargs": {"obs_bytes": 64} if adapter == "b" else {}, "num_envs": int(n[2:]), "policy": policy,
            "options": {}, "repeat": repeat, "status": status, "steps_per_s": rate, "profiled": False,
            "env_steps": None if rate is None else 1000, "peak_rss_mb": 40.0,
            "error": None if status == "ok" else "boom", **extra}


def test_cells_without_an_ok_repeat_are_left_out_and_named():
    rows = [_row("a/E-v0/n=1/random", 0, "ok", 200.0), _row("a/E-v0/n=1/random", 1, "error"),
            _row("a/E-v0/n=1/random", 2, "ok", 100.0), _row("a/E-v0/n=1/random", 3, "ok", 1e9, profiled=True),
            _row("b/E-v0/n=4/random", 0, "timeout"), _row("b/E-v0/n=4/random", 1, "error")]
    text = to_json(ResultSet.from_rows(rows, {}))
    assert text == to_json(ResultSet.from_rows(rows, {}))  # the same run exports the same file
    doc = json.loads(text, parse_constant=pytest.fail)
    (bench,) = doc["benchmarks"]
    assert bench["name"] == "a/E-v0/n=1/random" and bench["group"] == "E-v0/n=1/random"
    assert bench["stats"]["data"] == [1 / 200.0, 1 / 100.0]  # error and profiled repeats are not rounds
    assert bench["stats"]["median"] == pytest.approx(0.0075)  # even: the mean of the two per-step times
    assert bench["extra_info"]["status"] == "ok+error" and bench["extra_info"]["steps_per_s_median"] == 150.0
    assert doc["rlbench"]["left_out"] == [{"cell_id": "b/E-v0/n=4/random", "status": "error+timeout",
                                           "error": "boom"}]
    assert doc["commit_info"]["id"] == "unversioned" and doc["machine_info"]["node"] is None
    assert doc["datetime"] is None


def test_env_kwargs_are_part_of_the_group_and_params():
    rows = [_row("b/E-v0/n=4/random", 0, "ok", 50.0)]
    (bench,) = json.loads(to_json(ResultSet.from_rows(rows, {})))["benchmarks"]
    assert bench["group"] == "E-v0(obs_bytes=64)/n=4/random"
    assert bench["params"]["env_kwargs"] == {"obs_bytes": 64}
    assert bench["stats"]["stddev"] == 0 and bench["stats"]["rounds"] == 1  # one round: no spread
    assert bench["extra_info"]["steps_per_s_ci_low"] is None  # NaN in rlbench, null in the file


def test_bad_format_exits_2_names_the_choices_and_writes_nothing(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.jsonl").write_text(json.dumps(_row("a/E-v0/n=1/random", 0, "ok", 10.0)) + "\n")
    (run / "env.json").write_text("{}")
    before = _files(tmp_path)
    assert cli.main(["report", str(run), "--format", "pytest_benchmark"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rlbench: error: ") and "--format" in err[0]
    assert "'html', 'pytest-benchmark'" in err[0]
    assert _files(tmp_path) == before
