"""`rlbench tune` and the user's env and policy it starts from: inputs refused up front, the race's
statistics, the decision, and a real tune on a tiny budget with every candidate accounted for."""
import json
import os
import subprocess
import sys

import pytest

from rlbench.cli import main
from rlbench.planning.plan import Cell
from rlbench.results.stats import slower_p
from rlbench.tuning import parse_budget
from rlbench.tuning.candidates import Left, candidates, sizes
from rlbench.tuning.decide import decide, lines
from rlbench.tuning.race import Racer
from rlbench.workload import PolicySpec, Workload

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


@pytest.fixture
def toyenvs(monkeypatch):
    monkeypatch.syspath_prepend(EXAMPLES)
    monkeypatch.setenv("PYTHONPATH", EXAMPLES + os.pathsep + os.environ.get("PYTHONPATH", ""))


@pytest.mark.parametrize("raw, seconds", [("10m", 600), ("90s", 90), ("1h30m", 5400), ("45", 45), ("2.5m", None),
                                          ("soon", None), ("5s", None), ("0", None)])
def test_budget_forms(raw, seconds):
    if seconds is None:
        with pytest.raises(Exception, match="--budget"):
            parse_budget(raw)
    else:
        assert parse_budget(raw) == seconds


def test_sizes_are_powers_of_two_up_to_the_limit():
    assert sizes(16) == [1, 2, 4, 8, 16]
    assert sizes(12) == [1, 2, 4, 8, 12]
    assert sizes(1) == [1]


def test_slower_p_separates_clear_gaps_only():
    assert slower_p([50, 52], [100, 101]) < 0.05
    assert slower_p([99, 101, 100], [100, 102, 101]) > 0.05
    assert slower_p([100, 101], [50, 52]) > 0.95        # faster, not slower
    assert slower_p([100], [50, 52]) != slower_p([100], [50, 52])  # one value: NaN, never a drop


@pytest.mark.parametrize("argv, says", [
    (["--env", "nomodule_here:make"], "nomodule_here failed to import"),
    (["--env", "toyenvs:make_corridor", "--env-kwarg", "obs=weird"], "failed to build: ValueError"),
    (["--env", "toyenvs:missing"], "defines no factory 'missing'"),
    (["--env", "NoSuchEnv-v9"], "unknown env 'NoSuchEnv-v9'"),
    (["--env", "CartPole-v1", "--policy", "toyenvs.policies:nope"], "has no function 'nope'"),
    (["--env", "CartPole-v1", "--budget", "soon"], "--budget 'soon'"),
    (["--env", "CartPole-v1", "--adapters", "impala"], "is a learner adapter"),
    (["--env", "CartPole-v1", "--adapters", "nope"], "unknown adapter 'nope'"),
])
def test_bad_input_is_one_line_exit_2_nothing_written(toyenvs, tmp_path, capsys, argv, says):
    out = tmp_path / "t"
    assert main(["tune", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_candidates_account_for_what_cannot_race(toyenvs):
    from rlbench.envs import planned_env_kwargs
    kw, skip = planned_env_kwargs("toyenvs:make_corridor", {"obs": "dict"})
    cells, left, _ = candidates(Workload("toyenvs:make_corridor", 1, PolicySpec(), 0, skip, kw),
                             ["serial", "envpool-sync", "gymnasium-async"], 4, 2)
    assert {c.adapter for c in cells} == {"serial", "gymnasium-async"}
    assert sorted(c.workload.num_envs for c in cells if c.adapter == "serial") == [1, 2, 4]
    assert any(x.adapter == "envpool-sync" and "no native toyenvs:make_corridor" in x.reason for x in left)


def _racer(adapter, n, values, status="finalist"):
    from rlbench import registry
    cell = Cell(adapter, Workload("CartPole-v1", n), registry.get(adapter).resolve_options({}))
    return Racer(cell, values=values, repeats=len(values), status=status)


class _Race:
    def __init__(self, racers):
        self.racers, self.left_out = racers, [Left("envpool-sync", "", "unsupported", "envpool has no native X")]

    def baseline(self, racers):
        from rlbench.tuning.race import Race
        return Race.baseline(self, racers)


PROFILE = {"step": {"median_us": 20.0, "p99_us": 30.0, "cv": 0.1}, "reset_share": 0.01, "obs_bytes": 16,
           "rss_per_env_mb": 0.1, "policy_us_per_batch": {"1": 5.0}}


def test_decision_with_a_clear_winner_and_a_tie():
    win = _racer("gymnasium-async", 4, [200, 205, 198, 202, 201])
    serial = _racer("serial", 1, [100, 101, 99, 100, 102])
    close = _racer("sb3-subproc", 4, [199, 204, 200, 201, 197])
    d = decide(_Race([win, close, serial]), [win, close, serial], PROFILE, [], None)
    assert d["winner"]["adapter"] == "gymnasium-async" and d["winner"]["n"] == 5
    sp = d["speedup_over_serial"]
    assert sp["ci_low"] <= sp["ratio"] <= sp["ci_high"] and sp["ci_low"] > 1.9
    assert d["runner_up"]["lead"].startswith("within the CI")
    assert {s["adapter"] for s in d["strategies"]} == {"serial", "sb3-subproc", "envpool-sync"}
    assert next(s for s in d["strategies"] if s["adapter"] == "envpool-sync")["why"].startswith("unsupported")
    far = _racer("sb3-subproc", 4, [100, 104, 101, 99, 103])
    d = decide(_Race([win, far, serial]), [win, far, serial], PROFILE, [], None)
    assert d["runner_up"]["lead"] == "significant"
    text = "\n".join(lines(d, PROFILE, "CartPole-v1 with policy random"))
    assert "Fastest for CartPole-v1" in text and "the serial loop" in text and "rlbench run --adapter gymnasium-async" in text
    assert "gymnasium.vector.AsyncVectorEnv([lambda: gymnasium.make('CartPole-v1')] * 4" in text


def test_a_user_policy_runs_on_cpu_and_is_timed(toyenvs, tmp_path):
    out = tmp_path / "p"
    code = main(["run", "--adapter", "serial", "--env", "toyenvs:make_corridor", "--env-kwarg", "obs=tuple",
                 "--env-kwarg", "act=multidiscrete", "--env-kwarg", "frameskip=3", "--policy", "toyenvs.policies:linear",
                 "--num-envs", "3", "--repeats", "1", "--duration", "0.2", "--warmup", "0.05", "--out", str(out)])
    assert code == 0
    row = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    assert row["status"] == "ok" and row["policy"] == "toyenvs.policies:linear"
    assert row["env_steps"] % 3 == 0 and row["policy_s"] > 0
    assert row["frameskip"] == 3 and row["frames"] == 3 * row["env_steps"]


@pytest.mark.slow
def test_tune_on_a_tiny_budget_decides_and_accounts_for_every_candidate(toyenvs, tmp_path):
    out = tmp_path / "tune"
    proc = subprocess.run([sys.executable, "-m", "rlbench.cli", "tune", "--env", "toyenvs:ToyCorridor-v0",
                           "--env-kwarg", "obs=dict", "--adapters", "serial,gymnasium-sync,gymnasium-async,envpool-sync",
                           "--max-envs", "2", "--budget", "90s", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Fastest for toyenvs:ToyCorridor-v0" in proc.stdout and "Why the others lost:" in proc.stdout
    record = json.loads((out / "tune.json").read_text())
    assert record["used_s"] <= record["budget_s"] + 30   # one chunk may finish past the deadline
    by_id = {c["cell_id"]: c for c in record["candidates"] if c["cell_id"]}
    raced = {f"{a}/toyenvs:ToyCorridor-v0(obs=dict)/n={n}/random" for a in ("serial", "gymnasium-sync", "gymnasium-async")
             for n in (1, 2)}
    assert raced <= set(by_id)
    statuses = {c["status"] for c in record["candidates"]}
    assert statuses <= {"finalist", "dropped", "out", "failed", "unsupported", "budget"}
    for c in record["candidates"]:
        if c["status"] == "dropped":
            assert c["p_slower_than_leader"] < 0.05 and c["round_out"] >= 1
        if c["status"] == "finalist":
            assert c["repeats"] == 5
    assert any(c["adapter"] == "envpool-sync" and c["status"] == "unsupported" for c in record["candidates"])
    winner = record["decision"]["winner"]
    assert by_id[winner["cell_id"]]["status"] == "finalist"
    assert record["profile"]["step"]["median_us"] > 0 and set(record["profile"]["policy_us_per_batch"]) == {"1", "8", "64"}
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sum(c["repeats"] for c in record["candidates"]) == len(rows)
    assert "Recommendation" in (out / "index.html").read_text()
