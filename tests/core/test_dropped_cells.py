"""Cells that cannot run on any machine (an adapter's supports() says why) leave the plan: one stderr line
per reason with its count, the list in env.json and plan.json, a collapsed note in the report, never a
results row; a plan of nothing but such cells is a usage error; a resumed run does not bring them back.
What depends on this machine (a package not installed here) stays a row."""
import json

from support import read_run, run_cli, write_suite

from rlbench import cli, registry
from rlbench.api import Adapter, Workload
from rlbench.planning import drop
from rlbench.planning.plan import Cell
from rlbench.planning.suite import load_suite

SYNTH = "rlbench/Synthetic-v0"
NO_NATIVE = f"envpool has no native {SYNTH}"
ASYNC_N1 = "envpool-async needs 0 < batch_size < num_envs (num_envs=1, batch_size=0)"

# serial runs on both envs; EnvPool has no native synthetic env; envpool-async needs num_envs >= 2
SUITE = f"""[[sweep]]
adapters = ["serial", "envpool-sync"]
envs = ["{SYNTH}"]
num_envs = [1, 2]
env_kwargs = {{ step_cost_us = 0, obs_bytes = 8 }}

[[sweep]]
adapters = ["serial", "envpool-async"]
envs = ["CartPole-v1"]
num_envs = [1]
"""
DROPPED = {f"envpool-sync/{SYNTH}(obs_bytes=8,step_cost_us=0)/n={n}/random": NO_NATIVE for n in (1, 2)} | {
    "envpool-async/CartPole-v1/n=1/random": ASYNC_N1}
KEPT = [f"serial/{SYNTH}(obs_bytes=8,step_cost_us=0)/n=1/random",
        f"serial/{SYNTH}(obs_bytes=8,step_cost_us=0)/n=2/random", "serial/CartPole-v1/n=1/random"]


def test_split_keeps_plan_order_and_names_each_reason(tmp_path):
    suite = load_suite(str(write_suite(tmp_path, SUITE)))
    kept, dropped = drop.split(suite.cells)
    assert [c.cell_id for c in kept] == KEPT
    assert {d.cell_id: d.reason for d in dropped} == DROPPED
    assert drop.summary_lines(dropped) == [f"rlbench: 2 cells dropped: {NO_NATIVE}",
                                           f"rlbench: 1 cell dropped: {ASYNC_N1}"]


def test_reasons_differing_only_in_sizes_are_one_line():
    cls = registry.get("envpool-async")
    cells = [Cell(cls.name, Workload("CartPole-v1", n), cls.resolve_options({"batch_size": b}), {"batch_size": b})
             for n, b in ((4, 4), (4, 8), (8, 8))]
    kept, dropped = drop.split(cells)
    assert not kept and len(dropped) == 3
    assert drop.summary_lines(dropped) == [
        "rlbench: 3 cells dropped: envpool-async needs 0 < batch_size < num_envs (num_envs=N, batch_size=N)"]


def test_a_reason_of_this_machine_keeps_the_cell(monkeypatch):
    class NeedsPackage(Adapter):
        name = "test-needs-package"

        def supports(self, workload, options):
            return "package not installed: somewhere-else"

    registry.discover()
    monkeypatch.setitem(registry.ADAPTERS, NeedsPackage.name, NeedsPackage)
    kept, dropped = drop.split([Cell(NeedsPackage.name, Workload("CartPole-v1", 1))])
    assert len(kept) == 1 and not dropped


def test_dropped_cells_are_counted_on_stderr_recorded_and_never_rows(tmp_path, capsys):
    run = run_cli(["run", write_suite(tmp_path, SUITE)], tmp_path / "run", capsys)
    assert run.rc == 0, run.stderr
    assert f"rlbench: 2 cells dropped: {NO_NATIVE}\n" in run.stderr
    assert f"rlbench: 1 cell dropped: {ASYNC_N1}\n" in run.stderr
    assert "rlbench: 3 cells x 1 repeats" in run.stderr
    assert sorted(r["cell_id"] for r in run.rows) == sorted(KEPT)
    assert all(r["status"] == "ok" for r in run.rows), [r.get("error") for r in run.rows]
    assert "envpool" not in (run.out / "results.jsonl").read_text()
    assert not list((run.out / "logs").glob("*envpool*"))
    env, plan = run.env, json.loads((run.out / "plan.json").read_text())
    assert env["cells"] == 3
    assert {d["cell_id"]: d["reason"] for d in env["dropped"]} == DROPPED
    assert plan["dropped"] == env["dropped"] and plan["cells"] == KEPT
    assert "envpool" not in (run.out / "summary.csv").read_text()
    page = (run.out / "index.html").read_text()
    assert "<details class='dropped'><summary>3 planned cells left out" in page
    assert f"{NO_NATIVE} (x2)" in page and "envpool-async/CartPole-v1/n=1/random" in page


def test_a_plan_of_only_impossible_cells_is_a_usage_error_writing_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    suite = write_suite(tmp_path, SUITE)
    before = set(tmp_path.rglob("*"))
    rc = cli.main(["run", str(suite), "--only", "envpool*", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert err == [f"rlbench: error: no cell can run: all 3 planned cells are impossible: {NO_NATIVE} (x2); "
                   f"{ASYNC_N1} (x1)"]
    assert not (tmp_path / "out").exists() and set(tmp_path.rglob("*")) == before  # no reports/ either


def test_resume_leaves_dropped_cells_out(tmp_path, capsys):
    suite = write_suite(tmp_path, SUITE)
    out = tmp_path / "run"
    assert run_cli(["run", suite, "--repeats", "2"], out, capsys).rc == 0
    lines = (out / "results.jsonl").read_text().splitlines()
    (out / "results.jsonl").write_text("\n".join(lines[:2]) + "\n")  # as if interrupted after two rows
    assert cli.main(["resume", str(out)]) == 0
    err = capsys.readouterr().err
    assert "2 rows kept" in err and f"rlbench: 2 cells dropped: {NO_NATIVE}" in err
    rows = read_run(out)
    assert sorted((r["cell_id"], r["repeat"]) for r in rows) == sorted((c, rep) for c in KEPT for rep in range(2))
    env = json.loads((out / "env.json").read_text())
    assert env["resumed_at"] and {d["cell_id"] for d in env["dropped"]} == set(DROPPED)


def test_the_quick_suite_schedules_no_impossible_cell():
    from support import REPO
    suite = load_suite(str(REPO / "suites" / "quick.toml"))
    kept, dropped = drop.split(suite.cells)
    assert not dropped, [(d.cell_id, d.reason) for d in dropped]
