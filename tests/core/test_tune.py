"""`rlbench tune` and the user's env and policy it starts from: inputs refused up front, the race's
statistics, the decision, and a real tune on a tiny budget with every candidate accounted for."""
import html
import json
import os
import subprocess
import sys

import pytest
from support import REPO
from support.tune_race import PROFILE, _five, _searched

from rlbench.cli import main
from rlbench.families.stepping.report import headlines
from rlbench.planning.plan import Settings
from rlbench.results.decision import Decision
from rlbench.results.stats import slower_p
from rlbench.tuning import parse_budget
from rlbench.tuning.candidates import Space, default_max_envs
from rlbench.tuning.decide import decide, lines
from rlbench.tuning.profile import EnvProfile
from rlbench.workload import PolicySpec, Workload

EXAMPLES = str(REPO / "examples")


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


def test_max_envs_is_what_memory_holds_not_a_multiple_of_the_cores():
    assert default_max_envs(EnvProfile(1.0, rss_per_env_mb=0.001), memory_mb=8000) == 4096          # a trivial env: the cap
    assert default_max_envs(EnvProfile(1.0, rss_per_env_mb=100.0), memory_mb=8000) == 40            # half of 8 GB / 100 MB
    assert default_max_envs(EnvProfile(1.0, rss_per_env_mb=1e6), memory_mb=8000) == 1


def test_neighbours_step_once_along_every_axis_the_strategy_names():
    space = Space(Workload("CartPole-v1", 1, PolicySpec()), ["gymnasium-async", "rlpyt-cpu"], 64, 2)
    near = {(axis, c.workload.num_envs, tuple(sorted(c.given_options.items())))
            for axis, _, c in space.neighbours("gymnasium-async", 8, 0, {})}
    assert near == {("num_envs x2", 16, ()), ("num_envs /2", 4, ()), ("shared_memory", 8, (("shared_memory", False),))}
    near = {(axis, c.workload.num_envs, c.given_options.get("workers"))
            for axis, _, c in space.neighbours("rlpyt-cpu", 64, 1, {"workers": 2})}
    assert near == {("num_envs /2", 32, 2), ("workers", 64, 1)}   # 128 is past --max-envs


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


def test_the_space_accounts_for_what_cannot_race(toyenvs):
    from rlbench.envs import planned_env_kwargs
    kw, skip = planned_env_kwargs("toyenvs:make_corridor", {"obs": "dict"})
    space = Space(Workload("toyenvs:make_corridor", 1, PolicySpec(), 0, skip, kw),
                  ["serial", "envpool-sync", "gymnasium-async"], 4, 2)
    assert [c.workload.num_envs for _, c in space.settings("serial", 4)] == [4]
    assert not space.settings("envpool-sync", 4) and not space.settings("serial", 8)   # 8 > --max-envs
    assert any(x.adapter == "envpool-sync" and "no native toyenvs:make_corridor" in x.reason for x in space.left)


def test_tune_and_the_run_headline_give_one_verdict_in_the_same_words():
    rates = {("serial", n): _five(r) for n, r in ((1, 99), (2, 100), (4, 101), (8, 98))}
    rates.update({("gymnasium-async", n): _five(r) for n, r in ((1, 90), (2, 150), (4, 200), (8, 190))})
    rates.update({("sb3-subproc", n): _five(r) for n, r in ((1, 90), (2, 140), (4, 199), (8, 180))})
    search, results = _searched(rates, ["serial", "gymnasium-async", "sb3-subproc"])
    d = decide(search, results, PROFILE, label="CartPole-v1 with policy random")
    [headline] = headlines(results)
    assert headline == f"CartPole-v1 · random: {d.verdict}"
    assert d.winner.adapter == "gymnasium-async" and d.winner.num_envs == 4 and d.winner.n == 5
    sp = d.speedup
    assert sp.ci_low <= sp.ratio <= sp.ci_high and 1.9 < sp.ci_low and sp.baseline.startswith("serial/")
    assert d.runner_up.lead == "not significant" and "lead not significant" in d.verdict
    assert {f.adapter for f in d.strategies} >= {"serial", "sb3-subproc"}
    assert Decision.from_json(json.loads(json.dumps(d.to_json()))) == d   # tune.json and env.json keep it whole
    text = "\n".join(lines(d, PROFILE))
    assert "Fastest for CartPole-v1" in text and d.verdict in text and "rlbench run --adapter gymnasium-async" in text
    assert "gymnasium.vector.AsyncVectorEnv([lambda: gymnasium.make('CartPole-v1')] * 4" in text


def test_the_answer_is_never_slower_than_a_configuration_it_measured():
    """Issue 63: the budget ended after one repeat of a configuration at 1.86x the tested winner, which the answer
    listed as "not raced to the end" under a slower winner. Now the fastest measured is the answer, with its one
    repeat named as the caveat, and one line says the budget was too small to separate the two, with one that
    would."""
    rates = {("serial", n): _five(100) for n in (1, 2, 4, 8)}
    rates.update({("gymnasium-async", n): _five(r) for n, r in ((1, 120), (2, 150), (4, 130))})
    rates[("gymnasium-async", 8)] = [280.0]    # its second repeat never came: the budget ended
    search, results = _searched(rates, ["serial", "gymnasium-async"])
    d = decide(search, results, PROFILE, label="CartPole-v1 with policy random", used_s=170.0, budget_s=180.0)
    assert (d.winner.adapter, d.winner.num_envs, d.winner.n) == ("gymnasium-async", 8, 1)
    assert d.note.startswith("gymnasium-async (num_envs=8) was measured 1 time only (the budget ended before its "
                             "repeat 2): its rate has no CI, but it is the fastest measured, 1.87x "
                             "gymnasium-async (num_envs=2) (5 repeats)")
    assert d.budget_note.startswith("the budget was too small to separate gymnasium-async (num_envs=8) from ")
    assert "(lead untested); --budget " in d.budget_note and "m would race them to 5 repeats each" in d.budget_note
    text = "\n".join(lines(d, PROFILE))
    assert f"  budget: {d.budget_note}" in text and f"  note: {d.note}" in text
    assert Decision.from_json(json.loads(json.dumps(d.to_json()))).budget_note == d.budget_note   # tune.json keeps it
    faster = [f for f in d.strategies if f.steps_per_s and f.steps_per_s > d.winner.steps_per_s]
    assert not faster


def test_a_runner_up_within_3_percent_of_the_winner_ties_whatever_the_budget():
    """A slow env's workers on 2 cores: two strategies at 1.00x [0.99, 1.00] of each other. More budget would not
    separate them, so the line says they tie rather than asking for a larger budget."""
    rates = {("serial", n): _five(34) for n in (1, 2, 4, 8)}
    rates.update({("gymnasium-async", n): _five(67.8) for n in (1, 2, 4, 8)})
    rates.update({("sb3-subproc", n): _five(67.7) for n in (1, 2, 4, 8)})
    search, results = _searched(rates, ["serial", "gymnasium-async", "sb3-subproc"])
    search.converged = False   # as where the budget ended the search
    d = decide(search, results, PROFILE, used_s=113.0, budget_s=120.0)
    assert d.runner_up.lead == "not significant"
    assert " tie: the runner-up's 1.00x [0.99, 1.0" in d.budget_note
    assert d.budget_note.endswith("of the winner lies within 3% of it, so more budget would not separate them; "
                                  "either will do")


def test_a_clear_lead_is_significant_in_both():
    rates = {("serial", n): _five(100) for n in (1, 2, 4, 8)}
    rates.update({("sb3-subproc", n): _five(r) for n, r in ((1, 80), (2, 150), (4, 300), (8, 250))})
    search, results = _searched(rates, ["serial", "sb3-subproc"])
    d = decide(search, results, PROFILE)
    assert d.runner_up.lead == "significant"
    assert headlines(results) == [f"CartPole-v1 · random: {d.verdict}"]


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
                           "--max-envs", "4", "--budget", "60s", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Fastest for toyenvs:ToyCorridor-v0" in proc.stdout and "Why the others lost:" in proc.stdout
    record = json.loads((out / "tune.json").read_text())
    assert record["used_s"] <= record["budget_s"]
    assert record["stop_reason"].startswith(("converged after", "budget spent after"))
    assert record["decision"]["search"].startswith(record["stop_reason"])
    # the first tune of this machine calibrated what it raced, within its budget
    assert set(record["calibration"]["measured_now"]) <= {"serial", "gymnasium-sync", "gymnasium-async"}
    by_id = {c["cell_id"]: c for c in record["candidates"]}
    probed = {f"{a}/toyenvs:ToyCorridor-v0(obs=dict)/n={n}/random" for a in ("serial", "gymnasium-sync") for n in (2, 4)}
    assert probed <= set(by_id)
    assert {c["status"] for c in record["candidates"]} <= {"finalist", "dropped", "out", "failed", "pruned", "budget"}
    for c in record["candidates"]:
        assert c["origin"].startswith(("probe: ", "neighbour of "))
        if c["status"] == "dropped":
            assert (c["p_slower_than_leader"] or 1) < 0.05 or "after one repeat" in c["why"]
        if c["status"] == "pruned":
            assert c["repeats"] == 0 and "predicted at most" in c["why"] + "expected to hold"
    assert any(x["adapter"] == "envpool-sync" and "no native" in x["reason"] for x in record["left_out"])
    rounds = record["decision"]["rounds"]
    assert rounds and all({"added", "pruned", "dropped", "kind"} <= set(r) for r in rounds)
    # the run folder's own headline says what tune said, in the same words
    env = json.loads((out / "env.json").read_text())
    assert env["tune"]["verdict"] == record["decision"]["verdict"]
    assert html.escape(record["decision"]["verdict"]) in (out / "index.html").read_text()


def test_a_tune_killed_before_deciding_counts_only_the_rows_its_search_measured(tmp_path):
    """Its tune.json (written as its search started) holds the budget used until then, rows kept included: a
    resume adds the wall time of the rows measured after, each once."""
    from types import SimpleNamespace

    from support.result_rows import _row

    from rlbench.tuning.measure import SPAWN_S, used_before
    rows = [{**_row("serial", 1, r, 100.0), "wall_s": 2.0} for r in range(3)]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    earlier = SimpleNamespace(used_s=10.0, decision=None, rows_before=(("serial/CartPole-v1/n=1/random", 0),))
    assert used_before(earlier, str(tmp_path)) == pytest.approx(10.0 + 2 * (2.0 + SPAWN_S))
    decided = SimpleNamespace(**{**vars(earlier), "decision": object()})
    assert used_before(decided, str(tmp_path)) == 10.0      # it decided: its count
    assert used_before(None, str(tmp_path)) == 0.0          # never got that far


def test_an_environment_run_here_races_unasked(monkeypatch):
    """mjx runs in the brax environment: tune leaves it out unless named, but where RLBENCH_ENVS_HERE runs that
    environment in this interpreter (the device kit's GPU machine) it is a candidate like any other."""
    monkeypatch.delenv("RLBENCH_ENVS_HERE", raising=False)
    workload = Workload("Ant-v4", 1, PolicySpec())
    left = {item.adapter: item.status for item in Space(workload, None, 16, 2).left}
    assert left["mjx"] == "own-environment"
    monkeypatch.setenv("RLBENCH_ENVS_HERE", "brax")
    space = Space(workload, None, 16, 2)
    assert "mjx" in space.adapters or {item.adapter: item.status for item in space.left}["mjx"] == "unavailable"
    assert all(item.status != "own-environment" for item in space.left if item.adapter in ("mjx", "playground"))


def test_tune_json_reads_back_typed_and_an_old_schema_is_refused_in_one_line(tmp_path):
    """tune.json is a TuneState: a committed one reads back by attribute and writes the same JSON again; one of
    another schema is refused, naming it and what to do, never half-read."""
    from rlbench.errors import UsageError
    from rlbench.tuning.state import read
    kept = os.path.join(REPO, "reports", "reference", "cpu-2core-epyc", "check-tune-slow", "slow", "tune")
    doc = json.load(open(os.path.join(kept, "tune.json")))
    state = read(kept)
    assert state.calibration.adapters.ceiling("serial") > 0 and state.profile.step_us > 0
    assert state.decision.winner.adapter == doc["decision"]["winner"]["adapter"]
    # the same JSON again, with the default of any setting added since it was written (seed_per_repeat)
    newer = {k: v for k, v in json.loads(json.dumps(Settings().__dict__)).items() if k not in doc["settings"]}
    assert json.loads(state.to_json()) == {**doc, "settings": {**doc["settings"], **newer}}
    (tmp_path / "tune.json").write_text(json.dumps({**doc, "schema": 2}))
    with pytest.raises(UsageError, match=r"tune.json is of schema 2; this rlbench resumes schema 3 only \(valid: "):
        read(str(tmp_path))
    (tmp_path / "tune.json").write_text("{not json")
    assert read(str(tmp_path)) is None
