"""The output side's types: a cell's summary (CellSummary) read by attribute and written to summary.csv
column for column, and env.json as a RunRecord that round-trips and is written whole."""
import dataclasses
import json
import math

import pytest

from rlbench import registry
from rlbench.results import metrics
from rlbench.results.decision import Decision
from rlbench.results.model import SUMMARY_COLUMNS, ResultSet, Run, frames
from rlbench.results.record import RunRecord
from rlbench.results.summary import CellSummary
from rlbench.running.rundir import RunDir


def _row(cell, repeat, rate, **extra):
    row = {"schema": 1, "run_id": "r", "suite": "s", "cell_id": cell, "cell_index": 0, "adapter": "serial",
           "kind": "vector_env", "env": "CartPole-v1", "env_kwargs": {}, "num_envs": 4, "workers": 1,
           "batch_size": None, "policy": "random", "device": "cpu", "options": {"x": 1}, "frameskip": 1, "seed": 0,
           "repeat": repeat, "profiled": False, "status": "ok", "error": None, "env_steps": int(rate), "units": 10,
           "seconds": 1.0, "steps_per_s": rate, "latency_p50_ms": 0.1 * (repeat + 1), "latency_p99_ms": 0.2,
           "cpu_util": 1.0, "peak_rss_mb": 50.0 + repeat}
    return frames({**row, **extra})


def _replay_row(repeat, rate, **extra):
    return _row("replay-a", repeat, rate, kind="replay", adapter="ours-ring", env="replay/DQN-Qbert", item_bytes=1000,
                capacity_items=10, capacity_scale=1.0, page_cache="", bound="memcpy_1core", **extra)


def test_a_cell_summary_is_read_by_attribute_and_is_summary_csv_column_for_column():
    results = ResultSet.from_rows([_row("a", r, 1000.0 + 100 * r) for r in range(3)])
    cell = results.cells["a"]
    assert isinstance(cell, CellSummary)
    assert (cell.adapter, cell.kind, cell.num_envs, cell.n, cell.status) == ("serial", "vector_env", 4, 3, "ok")
    assert dict(cell.options) == {"x": 1} and cell.steps_per_s.median == 1100.0
    assert cell.stat("latency_p50_ms").median == pytest.approx(0.2)
    row = results.summary_rows()[0]
    assert list(row) == list(SUMMARY_COLUMNS)
    assert row["steps_per_s_median"] == cell.steps_per_s.median and row["steps_per_s_ci_low"] == cell.steps_per_s.ci_low
    assert row["peak_rss_mb_max"] == 52.0 and row["n"] == 3 and row["cell_id"] == "a"
    with pytest.raises(dataclasses.FrozenInstanceError):
        cell.n = 0
    with pytest.raises(TypeError):
        cell.options["x"] = 2


_TYPED = ("suite", "adapter", "kind", "env", "env_kwargs", "num_envs", "workers", "batch_size", "policy", "device",
          "options", "frameskip", "omp_threads", "cpus", "steps_per_s", "env_steps", "seconds", "policy_s", "env_s",
          "cpu_util", "wall_s", "error", "profile", "started_at")


def test_a_run_reads_its_keys_by_attribute_as_the_mapping_holds_them_with_get_s_default_when_absent():
    row = _row("a", 2, 1000.0, policy_s=0.25, env_s=0.75, wall_s=3.5, omp_threads=1, cpus=2, profile="p.json",
               started_at="2024-01-01T00:00:00+00:00", error="boom", status="error", profiled=True, cell_index=3)
    run = Run.from_row(row)
    for key in _TYPED:
        assert getattr(run, key) == run[key] == row[key], key
    assert (run.cell_id, run.repeat, run.status, run.cell_index, run.profiled) == ("a", 2, "error", 3, True)
    assert run.options == {"x": 1} and run.job == ("a", 2, True) and not run.ok
    bare = Run.from_row({"cell_id": "b", "repeat": 0, "status": "ok", "adapter": "serial"})
    for key in _TYPED:
        assert getattr(bare, key) is bare.get(key), key
    assert (bare.adapter, bare.steps_per_s, bare.workers, bare.error) == ("serial", None, None, None)
    assert bare.profiled is False and bare.cell_index == 0 and bare.ok
    assert Run.of(bare) is bare and Run.of(row) == run


def test_every_summary_column_comes_from_an_attribute_a_part_or_a_registered_figure():
    results = ResultSet.from_rows([_row("a", 0, 1000.0), _replay_row(0, 500.0)],
                                  env={"limits": {"memcpy_1core": {"median": 2.0}}})
    for cell in results.cells.values():
        for column in SUMMARY_COLUMNS:
            cell.value(column)  # a column no reader can resolve raises
    replay = results.cells["replay-a"].part("replay")
    assert replay.item_bytes == 1000 and replay.limit_gbps == 2.0
    assert math.isclose(replay.limit_frac, 500.0 * 1000 / 2e9)
    assert results.cells["a"].part("replay") is None
    assert results.summary_rows()[0]["limit_frac"] is None


def test_a_row_without_kind_belongs_to_no_family():
    row = _row("a", 0, 1000.0)
    del row["kind"], row["env"]
    results = ResultSet.from_rows([row])
    assert results.cells["a"].kind is None
    from rlbench.results.ranking import verdicts
    assert verdicts(results) == {}  # it competes with nothing


def test_each_family_part_has_its_summary_columns_as_fields():
    for family in registry.families():
        if family.cell_type is None:
            assert not family.summary_keys, f"{family.name} computes summary columns but has no cell_type"
            continue
        names = [f.name for f in dataclasses.fields(family.cell_type)]
        assert names == [*family.identity_keys, *family.summary_keys], family.name
        assert family.cell_type.__dataclass_params__.frozen


def test_summary_columns_of_figures_resolve_through_the_registry():
    cell = ResultSet.from_rows([_row("a", r, 1000.0 + r) for r in range(6)]).cells["a"]
    for m in metrics.metrics().values():
        if m.source == "family" or not m.summary:
            continue
        for column in m.columns():
            if column != metrics.CI_METHOD:
                spec = metrics.metric(column)
                assert cell.value(column) == getattr(cell.stat(spec.of), spec.stat) or math.isnan(cell.value(column))
    assert cell.value(metrics.CI_METHOD) == cell.steps_per_s.ci_method


def test_the_run_record_round_trips_and_keeps_the_families_measurements_apart(tmp_path):
    record = RunRecord({"cpu_model": "x", "started_at": "t0"}, "run-1", suite_path="s.toml", suite_sha256="abc",
                       settings={"repeats": 3}, cells=2, dropped=({"cell_id": "c", "reason": "r"},),
                       measured={"limits": {"memcpy_1core": {"median": 1.5}}}, adapter_envs={"a": {"python": "p"}})
    doc = record.to_json()
    assert doc["limits"] == {"memcpy_1core": {"median": 1.5}} and doc["cpu_model"] == "x" and "ended_at" not in doc
    back = RunRecord.from_json(json.loads(json.dumps(doc)))
    assert back == record and back.measured["limits"]["memcpy_1core"]["median"] == 1.5
    assert back.machine == {"cpu_model": "x", "started_at": "t0"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        back.cells = 3
    with pytest.raises(TypeError):
        back.settings["repeats"] = 1


def test_the_run_folder_writes_the_record_whole_and_ends_it(tmp_path):
    folder = RunDir(str(tmp_path / "run"), "run-1")
    (tmp_path / "run").mkdir()
    with folder:
        folder.begin(RunRecord({"cpu_model": "x"}, "run-1", cells=1))
        assert json.loads((tmp_path / "run" / "env.json").read_text())["cells"] == 1
        view = folder.export(tune=Decision(label="L"), files={"tune.json": "{}\n"})
    doc = json.loads((tmp_path / "run" / "env.json").read_text())
    assert doc["ended_at"] and doc["tune"]["label"] == "L" and doc["cpu_model"] == "x"
    assert (tmp_path / "run" / "tune.json").read_text() == "{}\n"
    assert folder.read_record() == folder.record and view is not None
    assert (tmp_path / "run" / "summary.csv").exists()
