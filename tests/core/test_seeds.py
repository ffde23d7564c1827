"""Seeds as an axis of repeats: `--seeds N` (a suite's or a sweep's seed_per_repeat) runs every repeat of a cell
with its own seed, the suite's + the repeat's index, and each row records the seed it ran; without it every
repeat runs the suite's one seed, as before. What a learning claim's CI over seeds stands on."""
import pytest
from support import run_cli, write_suite

from rlbench.errors import UsageError
from rlbench.planning.plan import Settings
from rlbench.planning.suite import load_suite


def test_a_sweeps_seed_per_repeat_gives_each_repeat_its_own_seed(tmp_path):
    suite = load_suite(str(write_suite(tmp_path, """
[[sweep]]
adapters = ["serial"]
envs = ["CartPole-v1"]
num_envs = [1]
protocol = { seed_per_repeat = true }

[[sweep]]
adapters = ["serial"]
envs = ["CartPole-v1"]
num_envs = [2]
""", protocol="[protocol]\nseed = 7\n")))
    seeded, plain = suite.cells
    assert [seeded.seed(suite.settings, r) for r in range(3)] == [7, 8, 9]
    assert [plain.seed(suite.settings, r) for r in range(3)] == [7, 7, 7]
    assert seeded.spec(suite.settings, 2)["workload"]["seed"] == 9
    assert plain.spec(Settings(seed=7, seed_per_repeat=True), 1)["workload"]["seed"] == 8   # the run's setting


def test_seeds_runs_a_repeat_per_seed_and_rows_record_it(tmp_path, capsys):
    run = run_cli(["run", "--adapter", "serial", "--env", "CartPole-v1", "--seeds", "2", "--duration", "0.05",
                   "--warmup", "0"], out=tmp_path / "run", capsys=capsys)
    assert run.rc == 0
    assert sorted((r["repeat"], r["seed"]) for r in run.rows) == [(0, 0), (1, 1)]


def test_seeds_and_a_different_repeats_are_refused(tmp_path, capsys):
    run = run_cli(["run", "--adapter", "serial", "--env", "CartPole-v1", "--seeds", "2", "--repeats", "3"],
                  out=tmp_path / "run", capsys=capsys)
    assert run.rc == 2 and "--seeds 2 runs 2 repeats, one per seed: leave out --repeats 3" in run.stderr
    assert not (tmp_path / "run").exists()
    assert run_cli(["run", "--adapter", "serial", "--env", "CartPole-v1", "--seeds", "0"], out=tmp_path / "r0",
                   capsys=capsys).rc == 2


def test_a_suites_seeds_sets_the_repeats_and_a_seed_each(tmp_path):
    body = '[[sweep]]\nadapters = ["serial"]\nenvs = ["CartPole-v1"]\nnum_envs = [1]\n'
    suite = load_suite(str(write_suite(tmp_path, body, protocol="[protocol]\nseeds = 4\n")))
    assert suite.settings.repeats == 4 and suite.settings.seed_per_repeat
    assert [suite.cells[0].seed(suite.settings, r) for r in range(4)] == [0, 1, 2, 3]
    for protocol, said in (("seeds = 4\nrepeats = 3\n", "protocol.seeds = 4 runs 4 repeats"),
                           ("seeds = 0\n", "protocol.seeds=0 must be an integer >= 1")):
        with pytest.raises(UsageError, match=said):
            load_suite(str(write_suite(tmp_path, body, name="bad.toml", protocol="[protocol]\n" + protocol)))
