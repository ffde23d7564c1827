"""`rlbench tune --train`: the race's rules on simulated training runs (censoring, finalists over seeds, the
winner by the median, the budget), the levels and the bottleneck they name, the typed answer read back, bad input
refused with exit 2 and nothing written, and the protocol's until_target closing a window once a run reached its
target."""
import os
from dataclasses import dataclass, field

import pytest

from rlbench.cli import main
from rlbench.planning.plan import Cell, TimingProtocol
from rlbench.results import levels
from rlbench.results.model import Run
from rlbench.results.record import RunRecord
from rlbench.results.train_decision import TrainDecision
from rlbench.running.timing import measure
from rlbench.tuning.training import answer
from rlbench.tuning.training import race as race_mod
from rlbench.tuning.training.race import TrainRace
from rlbench.tuning.training.space import Config, TrainSpace, default_sizes, learner_devices, recipe
from rlbench.workload import PolicySpec, Workload

MLP = PolicySpec("mlp", (64, 64))


def _cell(adapter, n, vec="dummy", device="cpu"):
    options = {"vec": vec, "num_steps": 128, "update_epochs": 4, "num_minibatches": 4}
    return Cell(adapter, Workload("CartPole-v1", n, PolicySpec("mlp", (64, 64), device=device)), options, {"vec": vec})


@dataclass
class Sim:
    """A learner's simulated training: env steps/s, and the seconds to the target each seed takes (None: never)."""
    rate: float
    times: dict
    setup_s: float = 2.0
    split: tuple = (0.2, 0.1, 0.7)
    learns: bool = True
    status: str = "ok"     # else its run fails at open with this status ("unsupported": no CUDA device)


@dataclass
class SimMeasurer:
    """Runs nothing: each requested repeat of a cell becomes a row from its Sim, capped by the cell's duration_s;
    the clock advances by the run's wall time."""
    sims: dict
    now: list = field(default_factory=lambda: [0.0])
    asked: list = field(default_factory=list)

    def run(self, cells, level, admit):
        rows = []
        for cell in cells:
            sim, repeat = self.sims[cell.cell_id], level - 1
            cap = dict(cell.protocol)["duration_s"]
            t = sim.times.get(repeat)
            reached = t is not None and t <= cap
            seconds = t if reached else cap
            self.now[0] += seconds + sim.setup_s
            self.asked.append((cell.cell_id, repeat, cap))
            env, infer, learn = sim.split
            if sim.status != "ok":
                rows.append(Run.from_row({"cell_id": cell.cell_id, "adapter": cell.adapter, "repeat": repeat,
                                          "seed": repeat, "status": sim.status, "error": "no CUDA device"}))
                continue
            rows.append(Run.from_row({
                "cell_id": cell.cell_id, "adapter": cell.adapter, "num_envs": cell.workload.num_envs,
                "repeat": repeat, "seed": repeat, "status": "ok", "steps_per_s": sim.rate, "seconds": seconds,
                "wall_s": seconds + sim.setup_s, "setup_s": sim.setup_s, "return_first": 20.0,
                "return_mean": 475.0 if reached else (300.0 if sim.learns else 20.0), "time_to_target_s": t if reached else None,
                "steps_to_target": int(t * sim.rate) if reached else None, "env_frac": env,
                "inference_frac": infer, "learn_frac": learn, "peak_rss_mb": 300.0}))
        return rows


def _race(sims, budget=600.0, seeds=3, target=475.0):
    """sims: [(cell, Sim)]."""
    configs = [Config(c, recipe(c)) for c, _ in sims]
    measurer = SimMeasurer({c.cell_id: s for c, s in sims})
    r = TrainRace(configs, measurer, budget, seeds, target, lambda: measurer.now[0], say=lambda _text: None)
    r.go()
    return r, measurer


def test_the_winner_is_the_lowest_median_time_over_seeds_not_the_fastest_seed_0():
    lucky = _cell("cleanrl-ppo", 8, "dummy")      # the fastest seed 0, slow on the others
    steady = _cell("cleanrl-ppo", 4, "dummy")
    r, m = _race([(lucky, Sim(20000, {0: 10.0, 1: 30.0, 2: 28.0})), (steady, Sim(15000, {0: 12.0, 1: 13.0, 2: 14.0}))])
    win, second = r.winner()
    assert win.cell is steady and second.cell is lucky
    assert [len(e.rows) for e in r.entries] == [3, 3]
    assert sorted(row.repeat for row in win.rows) == [0, 1, 2]        # a seed per repeat


def test_a_run_slower_than_the_cap_is_censored_and_goes_no_further():
    fast, slow = _cell("cleanrl-ppo", 8, "dummy"), _cell("cleanrl-ppo", 8, "subproc")
    r, m = _race([(fast, Sim(20000, {0: 10.0, 1: 11.0, 2: 12.0})), (slow, Sim(9000, {0: 40.0, 1: 40.0, 2: 40.0}))])
    caps = {cell_id: cap for cell_id, repeat, cap in m.asked if repeat == 0}
    assert caps[slow.cell_id] == pytest.approx(race_mod.CAP_FACTOR * 10.0)   # the fastest time so far, twice
    entry = next(e for e in r.entries if e.cell is slow)
    assert entry.status == "censored" and "did not reach 475" in entry.why
    assert len(entry.rows) == 1 and entry.times() == [None] and entry.counted() == [20.0]


def test_a_censored_seed_counts_as_its_cap_in_the_median():
    cell = _cell("cleanrl-ppo", 8)
    r, _ = _race([(cell, Sim(20000, {0: 10.0, 1: None, 2: 11.0}))])
    entry = r.entries[0]
    assert entry.times()[1] is None and entry.counted()[1] == pytest.approx(entry.caps[1])
    assert entry.median_time() == pytest.approx(11.0)


def test_finalists_are_those_near_the_fastest_seed_0():
    cells = [(_cell("cleanrl-ppo", n), Sim(20000, {0: t, 1: t, 2: t})) for n, t in ((4, 10.0), (8, 14.0), (16, 17.0))]
    r, _ = _race(cells)
    status = {e.cell.workload.num_envs: e.status for e in r.entries}
    assert status == {4: "finalist", 8: "finalist", 16: "screened"}      # 17 s > 1.5 x 10 s
    assert "over 1.5x the fastest" in next(e.why for e in r.entries if e.status == "screened")


def test_a_budget_too_small_for_every_run_says_so_and_decides_on_what_ran():
    cells = [(_cell("cleanrl-ppo", n), Sim(20000, {0: 30.0, 1: 30.0, 2: 30.0}, setup_s=5.0)) for n in (4, 8, 16, 32)]
    r, _ = _race(cells, budget=90.0)
    assert "budget ran out" in r.stop_reason
    assert any(e.status == "budget" for e in r.entries)
    d = answer.decide(r, "CartPole-v1", "ppo", 90.0, 90.0)
    assert d.winner is not None and all(s.status for s in d.standings)


def test_the_budget_left_after_the_finalists_seeds_goes_back_to_the_configurations_not_reached():
    fast = (_cell("cleanrl-ppo", 4), Sim(20000, {0: 10.0, 1: 10.0, 2: 10.0}))
    slow = [(_cell("cleanrl-ppo", n, vec), Sim(5000, {0: 60.0, 1: 60.0, 2: 60.0}))
            for n in (8, 16) for vec in ("dummy", "subproc", "envpool", "x")][:7]
    r, m = _race([fast, *slow], budget=200.0)
    first = [cell_id for cell_id, repeat, _ in m.asked if repeat == 0]
    seeds = [i for i, (_, repeat, _) in enumerate(m.asked) if repeat > 0]
    assert seeds and max(i for i, (_, repeat, _) in enumerate(m.asked) if repeat == 0) > min(seeds)  # after them
    assert len(first) == 8 and not [e for e in r.entries if e.status == "budget"]
    assert r.winner()[0].cell is fast[0]


def test_learners_are_interleaved_so_a_budget_cut_hits_each_alike():
    cells = [_cell("cleanrl-ppo", n) for n in (4, 8)] + [_cell("sb3-ppo", n) for n in (4, 8)]
    order = [c.cell.adapter for c in race_mod.interleaved([Config(c, recipe(c)) for c in cells])]
    assert order == ["cleanrl-ppo", "sb3-ppo", "cleanrl-ppo", "sb3-ppo"]


def test_without_a_target_the_rate_wins_among_runs_whose_return_moved():
    slow, fast, flat = _cell("cleanrl-ppo", 4), _cell("cleanrl-ppo", 8), _cell("cleanrl-ppo", 16)
    r, m = _race([(slow, Sim(15000, {})), (fast, Sim(20000, {})), (flat, Sim(30000, {}, learns=False))], target=None)
    win, _ = r.winner()
    assert win.cell is fast and len(win.rows) == 3
    entry = next(e for e in r.entries if e.cell is flat)
    assert entry.status == "flat" and "did not move" in entry.why and len(entry.rows) == 1
    assert answer.startup(r, win).startswith("setup 2.0 s, kept apart from its rate")   # no target to speak of


def test_levels_name_a_learner_bound_run_and_bound_what_a_vector_env_could_gain():
    row = Run.from_row({"steps_per_s": 1000.0, "env_frac": 0.1, "inference_frac": 0.05, "learn_frac": 0.85})
    lv = levels.from_rows(row)
    assert lv.env_steps_per_s == pytest.approx(10000.0) and lv.inference_steps_per_s == pytest.approx(1000 / 0.15)
    kind, text = levels.bottleneck(lv, row)
    assert kind == "learner" and "85% of each env step's time is the update" in text
    assert "at most 1.05x" in text          # the env's 10% halved


def test_the_copy_of_observations_to_the_device_is_its_own_share_and_can_bound_a_run():
    """A GPU learner fed from host envs: the observations' copy, which level 2 measures within inference, is taken
    out of it and named when it is the largest share; level 2 from the split includes it."""
    row = Run.from_row({"steps_per_s": 1000.0, "env_frac": 0.2, "inference_frac": 0.1, "transfer_frac": 0.4,
                        "learn_frac": 0.3})
    lv = levels.from_rows(row)
    assert lv.inference_steps_per_s == pytest.approx(1000 / 0.7)
    kind, text = levels.bottleneck(lv, row)
    assert kind == "transfer" and "40% of each env step's time is copying observations" in text
    cpu = Run.from_row({"steps_per_s": 1000.0, "env_frac": 0.1, "inference_frac": 0.04, "transfer_frac": 0.01,
                        "learn_frac": 0.85})
    kind, text = levels.bottleneck(levels.from_rows(cpu), cpu)
    assert kind == "learner" and "inference 4%, copying observations 1%" in text
    queued = Run.from_row({"steps_per_s": 5000.0, "learn_frac": 0.3, "transfer_frac": 0.6, "wait_frac": 0.05,
                           "policy_lag_mean": 2.0})
    assert levels.bottleneck(levels.from_rows(queued), queued)[0] == "transfer"


def test_levels_measured_apart_take_precedence_and_an_env_bound_run_is_named():
    train = Run.from_row({"steps_per_s": 800.0, "env_frac": 0.5})
    env = Run.from_row({"status": "ok", "steps_per_s": 1000.0, "adapter": "gymnasium-sync", "cell_id": "e"})
    infer = Run.from_row({"status": "ok", "steps_per_s": 900.0, "adapter": "gymnasium-sync", "cell_id": "i"})
    lv = levels.from_rows(train, env, infer)
    assert lv.source.startswith("measured apart on gymnasium-sync") and lv.env_steps_per_s == 1000.0
    assert levels.bottleneck(lv, train)[0] == "env"


def test_a_fused_program_is_said_not_to_separate():
    row = Run.from_row({"steps_per_s": 1e5, "compile_s": 2.0})
    assert levels.bottleneck(levels.from_rows(row), row)[0] == "fused"


def test_the_decision_reads_back_from_json_and_from_env_json():
    cells = [(_cell("cleanrl-ppo", 4), Sim(15000, {0: 10.0, 1: 11.0, 2: 12.0})),
             (_cell("cleanrl-ppo", 4, "subproc"), Sim(14800, {0: 10.5, 1: 11.0, 2: 12.0}))]
    r, _ = _race(cells)
    d = answer.decide(r, "CartPole-v1 with policy mlp", "ppo", 600.0, 100.0)
    assert d.winner is not None and d.bottleneck_kind == "learner"
    assert "not ranked" in d.vec_note            # a 1% difference under a learner-bound run
    back = TrainDecision.from_json(d.to_json())
    assert back == d
    record = RunRecord.from_json(RunRecord({"cpu_model": "x"}, "r", command="tune", train_tune=d).to_json())
    assert record.train_tune == d
    text = "\n".join(answer.lines(d))
    assert "fastest to train" in text and "levels (env steps/s)" in text and "bottleneck: learner-bound" in text


class _Reaching:
    """A session that reaches its target after its third unit."""
    def __init__(self):
        self.units = 0

    def step(self):
        self.units += 1
        return 10

    def reached(self):
        return self.units >= 3


def test_until_target_closes_the_window_once_the_session_reached_it():
    s = _Reaching()
    out = measure(s.step, TimingProtocol(warmup_s=0.0, warmup_units=0, duration_s=30.0, min_units=1,
                                         until_target=True), reached=s.reached)
    assert out["units"] == 3 and out["seconds"] < 5
    s2 = _Reaching()   # without it, the window runs its units out
    out = measure(s2.step, TimingProtocol(warmup_s=0.0, warmup_units=0, duration_s=0.0, min_units=5))
    assert out["units"] == 5


def test_a_learner_that_cannot_open_on_a_device_is_not_started_there_again():
    """torch without CUDA on a machine with a GPU: the first configuration on cuda says so; its other sizes and
    settings fail with that reason unrun, and the same learner on the CPU races as before."""
    on_gpu = [(_cell("cleanrl-ppo", n, vec, device="cuda"), Sim(20000, {}, status="unsupported"))
              for n, vec in ((4, "dummy"), (8, "dummy"), (8, "subproc"))]
    r, m = _race(on_gpu + [(_cell("cleanrl-ppo", 8), Sim(20000, {0: 10.0, 1: 11.0, 2: 12.0}))])
    asked_gpu = [cid for cid, _, _ in m.asked if "cuda" in cid]
    assert len(asked_gpu) == 1
    failed = [e for e in r.entries if e.cell.workload.policy.device == "cuda"]
    assert all(e.status == "failed" and "no CUDA device" in e.why for e in failed)
    assert sum("unsupported (as cleanrl-ppo (num_envs=" in e.why for e in failed) == 2
    assert r.winner()[0].cell.workload.policy.device == "cpu"


def test_the_learner_goes_to_a_gpu_only_where_there_is_one(monkeypatch):
    from rlbench.machine import fingerprint
    monkeypatch.setattr(fingerprint, "gpus", lambda: [])
    assert learner_devices(MLP) == (("cpu",), "no NVIDIA GPU here: nvidia-smi lists none")
    monkeypatch.setattr(fingerprint, "gpus", lambda: [{"name": "NVIDIA H100"}])
    assert learner_devices(MLP) == (("cpu", "cuda"), "")
    assert learner_devices(PolicySpec("mlp", (64,), device="cuda")) == (("cuda", "cpu"), "")
    assert learner_devices(PolicySpec("random"))[0] == ("cpu",)


@pytest.mark.parametrize("policy", [PolicySpec("mlp", (64, 64), device="cuda"), PolicySpec("cnn:impala", device="cuda"),
                                    MLP])
def test_the_reproduce_command_names_the_network_on_its_device(policy):
    from rlbench.workload import parse_policy
    assert parse_policy(answer.policy_text(policy)) == policy


def test_the_learners_device_is_an_axis_and_what_every_configuration_shares_is_named_once():
    space = TrainSpace(Workload("CartPole-v1", 1, MLP), "ppo", ["cleanrl-ppo"], (4,), 2, 475.0, {"lr": "3e-4"},
                       ("cpu", "cuda"))
    by_device = {}
    for c in space.configs:
        by_device.setdefault(c.cell.workload.policy.device, []).append(c.cell.options["vec"])
    assert set(by_device) == {"cpu", "cuda"} and by_device["cpu"] == by_device["cuda"]
    assert all(c.config.endswith(", policy on cuda)") for c in space.configs if "cuda" in c.cell.cell_id)
    assert all("lr=" not in c.config and "target_return" not in c.config for c in space.configs)
    assert all(c.cell.options["lr"] == 3e-4 for c in space.configs)
    assert space.configs[0].recipe == "128 steps x 4 envs = batch 512, 4 epochs x 4 minibatches; lr=0.0003 (--opt)"


def test_the_space_crosses_learners_settings_and_sizes_with_the_recipe_recorded():
    space = TrainSpace(Workload("CartPole-v1", 1, MLP), "ppo", ["cleanrl-ppo"], (4, 8), 2, 475.0)
    ids = [c.cell.cell_id for c in space.configs]
    assert len(ids) == len(set(ids)) and {c.cell.workload.num_envs for c in space.configs} == {4, 8}
    assert {c.cell.options["vec"] for c in space.configs} >= {"dummy", "subproc"}
    assert all(c.cell.options["target_return"] == 475.0 for c in space.configs)
    assert space.configs[0].recipe == "128 steps x 4 envs = batch 512, 4 epochs x 4 minibatches"
    assert default_sizes(2) == (4, 8, 16)


@pytest.mark.parametrize("argv, said", [
    (["--train", "nope"], "--train 'nope': no learner trains it (valid: "),
    (["--train", "ppo", "--adapters", "impala"], "--adapters: 'impala' does not train ppo (valid: "),
    (["--train", "ppo", "--sizes", "0,4"], "--sizes '0,4' (valid: comma-separated positive integers"),
    (["--target-return", "100"], "--target-return is for a training tune (valid: add --train ALGO"),
    (["--seeds", "3"], "--seeds is for a training tune"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, capsys, argv, said):
    out = tmp_path / "t"
    code = main(["tune", "--env", "CartPole-v1", "--budget", "60s", "--out", str(out), *argv])
    err = capsys.readouterr().err
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1
    assert not os.path.exists(out)


@pytest.mark.slow
def test_a_real_training_tune_answers_over_seeds_and_a_resume_replays_it(tmp_path, capsys):
    """cleanrl-ppo on CartPole at 4 envs, dummy and subproc, to a return of 60 (reached in a few seconds): each
    seed a fresh process whose window closed at the target, the winner over 2 seeds with its three levels; resumed,
    the tune replays its rows and measures nothing again."""
    import json

    from support import run_cli
    out = tmp_path / "tune"
    run = run_cli(["tune", "--train", "ppo", "--env", "CartPole-v1", "--policy", "mlp:hidden=64x64",
                   "--adapters", "cleanrl-ppo", "--sizes", "4", "--target-return", "60", "--seeds", "2",
                   "--budget", "150s"], out, capsys)
    assert run.rc == 0, run.stderr
    doc = json.loads((out / "tune.json").read_text())
    assert doc["kind"] == "train" and doc["decision"]["winner"] is not None
    training = [r for r in run.rows if r["kind"] == "learner"]
    assert {r["options"]["vec"] for r in training} >= {"dummy", "subproc"}
    for row in training:
        assert row["status"] == "ok" and row["seed"] == row["repeat"]
        if row["time_to_target_s"] is not None:   # the window closed at the target, not at its cap
            assert row["seconds"] < row["time_to_target_s"] + 10
    winner = doc["decision"]["winner"]
    assert len(winner["seeds"]) == 2 and doc["decision"]["levels"]["training_steps_per_s"] > 0
    assert "fastest to train" in run.stdout and "bottleneck:" in run.stdout
    assert "Training recommendation" in (out / "index.html").read_text()
    before = len(run.rows)
    again = run_cli(["resume", out], None, capsys)
    assert again.rc == 0 and len([line for line in (out / "results.jsonl").read_text().splitlines() if line]) == before


def test_an_actor_learner_is_judged_by_its_learners_wait_not_by_a_split_that_overlaps():
    waiting = Run.from_row({"steps_per_s": 5000.0, "env_frac": 0.8, "inference_frac": 0.3, "learn_frac": 0.2,
                            "wait_frac": 0.7, "policy_lag_mean": 1.4})
    lv = levels.from_rows(waiting)
    assert lv.env_steps_per_s is None and "asynchronous" in lv.source
    kind, text = levels.bottleneck(lv, waiting)
    assert kind == "env" and "waits 70%" in text and "policy lag of 1.4" in text
    busy = Run.from_row({"steps_per_s": 5000.0, "learn_frac": 0.9, "wait_frac": 0.05, "policy_lag_mean": 3.0})
    assert levels.bottleneck(levels.from_rows(busy), busy)[0] == "learner"


def test_a_tune_json_of_another_kind_is_refused_in_one_line(tmp_path):
    from rlbench.errors import UsageError
    from rlbench.tuning.training.state import TrainState, read_train_state
    state = TrainState(Workload("CartPole-v1", 1, MLP), "ppo", 60.0, 12.5, 3, 475.0, ("a", "b"), (), (("a", 0),))
    (tmp_path / "tune.json").write_text(state.to_json())
    assert read_train_state(str(tmp_path)) == state
    (tmp_path / "tune.json").write_text('{"schema": 3, "workload": {}}')
    with pytest.raises(UsageError, match="not a training tune's"):
        read_train_state(str(tmp_path))


def test_setup_is_counted_apart_and_a_rate_crossover_is_only_claimed_within_one_recipe():
    slow_start = (_cell("cleanrl-ppo", 4), Sim(10000, {0: 10.0, 1: 10.0, 2: 10.0}, setup_s=5.0))
    quick_start = (_cell("cleanrl-ppo", 8), Sim(30000, {0: 11.0, 1: 11.0, 2: 11.0}, setup_s=1.0))  # another recipe
    r, _ = _race([slow_start, quick_start])
    text = answer.startup(r, r.winner()[0])
    assert "with it: 15.0 s to 475" in text and "counting setup, cleanrl-ppo (num_envs=8" in text
    assert "training run longer than" not in text   # its rate says nothing of a recipe that learns otherwise
    same = (_cell("cleanrl-ppo", 4, "subproc"), Sim(8000, {0: 12.0, 1: 12.0, 2: 12.0}, setup_s=1.0))
    r, _ = _race([slow_start, same])
    assert "training run shorter than" in answer.startup(r, r.winner()[0])
