"""The adapters with their own environment, for real: the harness builds (or reuses, from $RLBENCH_VENVS or
.venvs/) each pinned environment and runs a small cell of every one of them beside a main-environment
adapter; env.json records each environment's package versions. `make test` builds them first
(`make install-extras`), so here they are normally cached."""
import subprocess

import pytest
from support import REPO, run_cli_subprocess, write_suite

pytestmark = pytest.mark.slow

SUITE = """
[[sweep]]   # reverb (TensorFlow 2.15, numpy 1.26) beside our numpy ring, same workload
adapters = ["reverb", "numpy-ring"]
envs = ["replay/SAC-Hopper"]
num_envs = [1]
env_kwargs = { mode = ["max-sample"], max_mb = [8] }

[[sweep]]   # Sample Factory (gymnasium 0.29, numpy 1.26): 2 rollout workers, one Pong env each, beside EnvPool
adapters = ["sample-factory", "envpool-sync"]
envs = ["Pong-v5"]
num_envs = [2]
options.sample-factory = { envs_per_worker = [1], worker_num_splits = [1] }
"""
PROTOCOL = """[protocol]
repeats = 1
warmup_s = 0.2
warmup_units = 2
duration_s = 0.5
min_units = 3
timeout_s = 240
"""
ENVS = {"reverb": ("reverb", "dm-reverb", "0.14.0"), "sample-factory": ("sample-factory", "sample-factory", "2.1.1")}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    base = tmp_path_factory.mktemp("real-envs")
    suite = write_suite(base, SUITE, protocol=PROTOCOL)
    return run_cli_subprocess(["run", str(suite)], base / "out", timeout=1800)


def test_every_cell_ran(run):
    assert run.rc == 0, run.stderr[-3000:]
    bad = [(r["cell_id"], r["status"], r.get("error")) for r in run.rows if r["status"] != "ok"]
    assert not bad, bad
    sf = run.row("sample-factory")
    # a unit waits for a rollout (32 steps) of both envs and counts every trajectory that arrived: whole
    # trajectories, at least two per unit (not always an even number: a third may land before the unit ends)
    assert sf["workers"] == 2 and sf["env_steps"] % 32 == 0 and sf["env_steps"] >= 2 * 32 * sf["units"]
    assert sf["frames"] == 4 * sf["env_steps"]


def test_reverbs_own_tests_pass_in_its_environment():
    """tests/families/test_replay_reverb.py imports reverb: it runs under the reverb environment's interpreter."""
    from rlbench import registry
    from rlbench.running.adapter_envs import environment_of
    python = environment_of(registry.get("reverb")).ensure()["python"]
    out = subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/families/test_replay_reverb.py"],
                         cwd=REPO, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert " passed" in out.stdout and " skipped" not in out.stdout, out.stdout[-500:]


@pytest.mark.parametrize("adapter", sorted(ENVS))
def test_env_json_records_the_adapters_environment(run, adapter):
    env_name, package, pinned = ENVS[adapter]
    record = run.env["adapter_envs"][env_name]
    assert record["packages"][package] == pinned
    assert record["packages"]["numpy"].startswith("1.26.")   # not the main environment's numpy
    assert record["python"].endswith("/bin/python")
