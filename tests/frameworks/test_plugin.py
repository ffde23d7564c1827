"""Third-party adapters register through the `rlbench.adapters` entry-point group."""
from support import run_cli_subprocess
from support._dist import fake_distribution

PLUGIN = '''
from rlbench.api import Adapter, Option


class CountingSession:
    def __init__(self, n):
        self.n = n
        self.info = {"workers": 1}

    def step(self):
        return self.n

    def close(self):
        pass


class Counting(Adapter):   # no @register: the entry point names the class
    name = "plugin-counting"
    description = "counts without stepping anything"
    options = (Option("scale", int, 1),)

    def open(self, workload, options):
        return CountingSession(workload.num_envs * options["scale"])
'''


def test_entry_point_adapter_is_listed_and_runs(tmp_path):
    env = fake_distribution(tmp_path, "rlbench_plugin", {"counting": "plugin_mod:Counting"}, {"plugin_mod": PLUGIN})
    listed = run_cli_subprocess(["list"], env=env, cwd=tmp_path)
    assert listed.rc == 0, listed.stderr
    assert "plugin-counting" in listed.stdout and "--opt scale=<int>" in listed.stdout

    run = run_cli_subprocess(["run", "--adapter", "plugin-counting", "--env", "CartPole-v1", "--num-envs", "3",
                              "--opt", "scale=2", "--repeats", "1", "--duration", "0.05"],
                             out=tmp_path / "run", env=env, cwd=tmp_path)
    assert run.rc == 0, run.stderr
    [row] = run.rows
    assert row["status"] == "ok", row
    assert row["env_steps"] == 6 * row["units"]  # scale=2 x num_envs=3 per unit


def test_broken_plugin_does_not_break_the_others(tmp_path):
    env = fake_distribution(tmp_path, "rlbench_broken", {"broken": "broken_mod:Nope"},
                            {"broken_mod": "raise ImportError('missing thing')\n"})
    listed = run_cli_subprocess(["list"], env=env, cwd=tmp_path)
    assert listed.rc == 0
    assert "serial" in listed.stdout
    assert "broken_mod:Nope: failed to load: ImportError: missing thing" in listed.stdout
