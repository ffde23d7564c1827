"""A real tiny run of every built-in adapter through `rlbench run` with flags: the row, the
accounting and the files a run directory must hold."""
import csv

import pytest
from support import TINY, run_cli

from rlbench.results.model import RUN_COLUMNS, SUMMARY_COLUMNS

NUM_ENVS = 4
CONFIGS = {
    "serial": ["--adapter", "serial"],
    "gymnasium-sync": ["--adapter", "gymnasium-sync"],
    "gymnasium-async-shm": ["--adapter", "gymnasium-async", "--opt", "shared_memory=true"],
    "gymnasium-async-pipes": ["--adapter", "gymnasium-async", "--opt", "shared_memory=false"],
    "envpool-sync": ["--adapter", "envpool-sync"],
    "envpool-async": ["--adapter", "envpool-async"],
}


@pytest.fixture(scope="session")
def adapter_runs(tmp_path_factory):
    """One `rlbench run` per configuration, shared by every test of this module."""
    base = tmp_path_factory.mktemp("adapter-runs")
    return {name: run_cli(["run", *flags, "--env", "CartPole-v1", "--num-envs", NUM_ENVS, *TINY], base / name)
            for name, flags in CONFIGS.items()}


@pytest.fixture(params=sorted(CONFIGS))
def run(request, adapter_runs):
    return adapter_runs[request.param]


def test_run_exits_zero_with_one_ok_row(run):
    assert run.rc == 0
    assert len(run.rows) == 1
    row = run.rows[0]
    assert row["status"] == "ok", row.get("error")
    assert not row.get("error")
    assert row["env"] == "CartPole-v1" and row["num_envs"] == NUM_ENVS and row["repeat"] == 0


def test_env_steps_are_whole_units(run):
    row = run.rows[0]
    assert row["env_steps"] > 0
    assert row["units"] >= 1
    # one unit is one vector step of every env, or one recv of batch_size envs for envpool-async
    unit = row["batch_size"] if row["adapter"] == "envpool-async" else NUM_ENVS
    if row["adapter"].startswith("envpool"):  # EnvPool's auto-reset steps are not transitions
        assert row["units"] * unit / 2 < row["env_steps"] <= row["units"] * unit
    else:
        assert unit and row["env_steps"] % unit == 0
        assert row["env_steps"] == row["units"] * unit


def test_frames_are_env_steps_times_frameskip(run):
    row = run.rows[0]
    assert row["frameskip"] == 1
    assert row["frames"] == row["env_steps"] * row["frameskip"]
    assert row["frames_per_s"] == pytest.approx(row["steps_per_s"] * row["frameskip"])
    assert row["steps_per_s"] == pytest.approx(row["env_steps"] / row["seconds"])


def test_measured_fields_are_sane(run):
    row = run.rows[0]
    assert row["seconds"] >= 0.05
    assert row["workers"] >= 1
    assert 0 < row["latency_p50_ms"] <= row["latency_p99_ms"] <= row["latency_max_ms"]
    assert row["policy_s"] is not None and 0 <= row["policy_s"] <= row["seconds"]
    assert row["env_s"] == pytest.approx(row["seconds"] - row["policy_s"])
    assert row["peak_rss_mb"] > 0
    assert row["log"].startswith("logs/") and (run.out / row["log"]).exists()


def test_run_directory_holds_every_file(run):
    for name in ("results.jsonl", "results.csv", "summary.csv", "index.html", "env.json"):
        assert (run.out / name).is_file(), name
    assert "plotly-graph-div" in (run.out / "index.html").read_text()


def test_results_csv_has_the_run_columns(run):
    with open(run.out / "results.csv", newline="") as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames) == RUN_COLUMNS
        rows = list(reader)
    assert len(rows) == 1
    assert rows[0]["status"] == "ok"
    assert int(rows[0]["env_steps"]) == run.rows[0]["env_steps"]
    assert int(rows[0]["frames"]) == run.rows[0]["frames"]


def test_summary_csv_has_one_row_per_cell(run):
    with open(run.out / "summary.csv", newline="") as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames) == SUMMARY_COLUMNS
        rows = list(reader)
    assert [r["cell_id"] for r in rows] == [run.rows[0]["cell_id"]]
    assert rows[0]["n"] == "1" and rows[0]["status"] == "ok"
    assert "n=1 < 3" in rows[0]["warning"]


def test_adapter_specific_fields(adapter_runs):
    async_shm = adapter_runs["gymnasium-async-shm"].rows[0]
    pipes = adapter_runs["gymnasium-async-pipes"].rows[0]
    assert async_shm["workers"] == NUM_ENVS  # one subprocess per env
    assert async_shm["options"] == {"shared_memory": True}
    assert pipes["options"] == {"shared_memory": False}
    assert pipes["cell_id"].endswith("/shared_memory=false")
    assert adapter_runs["envpool-async"].rows[0]["batch_size"] == NUM_ENVS // 2  # default num_envs // 2
    assert adapter_runs["envpool-sync"].rows[0]["batch_size"] == NUM_ENVS
    assert adapter_runs["serial"].rows[0]["workers"] == 1
    assert adapter_runs["serial"].rows[0]["kind"] == "vector_env"


def test_repeats_append_one_line_each(cli_run):
    run = cli_run(["run", "--adapter", "serial", "--env", "CartPole-v1", "--num-envs", "2", "--repeats", "2",
                   "--duration", "0.05"])
    assert run.rc == 0
    assert [r["repeat"] for r in run.rows] == [0, 1]
    assert len((run.out / "results.jsonl").read_text().splitlines()) == 2
    assert all(r["status"] == "ok" and r["env_steps"] % 2 == 0 for r in run.rows)
    assert len({r["run_id"] for r in run.rows}) == 1
