"""Adapters with their own environment: built once (cached), their cells run on its interpreter, and a
build that fails or cannot happen is a row with the reason, never a crash of the sweep.

The environment here pins only rlbench's core packages at the main environment's versions (a real
build from the registry, small), through adapters of a fake distribution on PYTHONPATH."""
import os
from importlib.metadata import version

import pytest
from support import misbehaving_adapters_env, run_cli_subprocess, sweep, write_suite

CORE = ("numpy", "psutil", "gymnasium", "filelock", "cloudpickle", "farama-notifications", "typing-extensions")
ADAPTERS = ["test-own-env", "test-broken-env", "test-missing-env", "serial"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("adapter-envs")
    pid_dir = base / "pids"
    pid_dir.mkdir()
    env = misbehaving_adapters_env(base / "plugin", pid_dir)
    envs_dir = base / "plugin" / "envs"
    envs_dir.mkdir()
    (envs_dir / "test-core.txt").write_text("".join(f"{p}=={version(p)}\n" for p in CORE))
    (envs_dir / "test-broken.txt").write_text("rlbench-no-such-package==0.0.1\n")
    env["RLBENCH_VENVS"] = str(base / "venvs")
    suite = write_suite(base, sweep(ADAPTERS, num_envs=[2]))
    first = run_cli_subprocess(["run", str(suite)], base / "first", env=env, cwd=base, timeout=600)
    first.prefix = (pid_dir / "own-env-prefix.pid").read_text() if (pid_dir / "own-env-prefix.pid").exists() else None
    second = run_cli_subprocess(["run", str(suite), "--no-build"], base / "second", env=env, cwd=base)
    listing = run_cli_subprocess(["envs"], env=env, cwd=base)
    bad = run_cli_subprocess(["envs", "--build", "no-such-env"], env=env, cwd=base)
    both = run_cli_subprocess(["envs", "--build", "--jobs", "2", "test-core", "test-broken"],
                              env={**env, "RLBENCH_VENVS": str(base / "venvs-at-once")}, cwd=base, timeout=600)
    return base, first, second, listing, bad, both


def test_cell_runs_on_the_adapters_own_interpreter(runs):
    base, first, *_ = runs
    assert first.rc == 1, first.stderr  # the broken environment's row is an error
    assert first.row("test-own-env")["status"] == "ok", first.row("test-own-env")
    assert first.prefix is not None and first.prefix.startswith(str(base / "venvs" / "test-core-")), first.prefix
    assert first.row("serial")["status"] == "ok"


def test_env_json_records_the_environments_packages(runs):
    _, first, *_ = runs
    record = first.env["adapter_envs"]["test-core"]
    assert record["packages"]["numpy"] == version("numpy")
    assert record["packages"]["gymnasium"] == version("gymnasium")
    assert record["build_s"] > 0 and record["python"].endswith("/bin/python")
    assert "building environment 'test-core'" in first.stderr  # visible progress


def test_failed_build_is_an_error_row_with_the_reason(runs):
    _, first, *_ = runs
    row = first.row("test-broken-env")
    assert row["status"] == "error"
    assert "environment 'test-broken' failed to build" in row["error"] and "log:" in row["error"]
    assert first.env["adapter_envs"]["test-broken"]["status"] == "error"


def test_missing_requirements_file_is_unsupported(runs):
    _, first, *_ = runs
    row = first.row("test-missing-env")
    assert row["status"] == "unsupported" and "no requirements file" in row["error"]


def test_built_environment_is_reused_and_no_build_leaves_unbuilt_ones_unsupported(runs):
    _, first, second, *_ = runs
    assert second.rc == 0, second.stderr  # --no-build: the broken environment's cell is unsupported
    assert "building environment" not in second.stderr
    assert second.row("test-own-env")["status"] == "ok"
    assert second.env["adapter_envs"]["test-core"]["built_at"] == first.env["adapter_envs"]["test-core"]["built_at"]
    row = second.row("test-broken-env")
    assert row["status"] == "unsupported" and "is not built" in row["error"]


def test_envs_command_lists_state_and_rejects_unknown_names(runs):
    *_, listing, bad, _ = runs
    assert listing.rc == 0
    lines = {ln.split()[0]: ln for ln in listing.stdout.splitlines()}
    assert "built in" in lines["test-core"] and "not built" in lines["test-broken"]
    assert bad.rc == 2 and "unknown environment 'no-such-env'" in bad.stderr and "test-core" in bad.stderr


def test_a_no_deps_line_is_installed_after_the_rest_without_its_dependencies(tmp_path, monkeypatch):
    """A package whose declared pins would replace the environment's own (pufferlib-core's torch 2.9.0)."""
    from rlbench.running import adapter_envs
    req = tmp_path / "x.txt"
    req.write_text("# the x environment\ntorch==2.13.0\nnumpy==2.4.6  # the project's\n"
                   "pufferlib-core==3.0.23  # no-deps: it pins torch==2.9.0\n")
    monkeypatch.setenv("RLBENCH_VENVS", str(tmp_path / "venvs"))
    env = adapter_envs.AdapterEnv("x", str(req))
    os.makedirs(env.dir)
    pinned, bare = env._requirements()
    assert bare == ["pufferlib-core==3.0.23"]
    assert open(pinned).read() == "# the x environment\ntorch==2.13.0\nnumpy==2.4.6  # the project's\n"


def test_envs_build_two_at_once_and_name_the_one_that_failed(runs):
    both = runs[-1]
    assert both.rc == 1, both.stderr
    assert "rlbench-no-such-package" in both.stderr and "test-broken" in both.stderr
    listing = {line.split()[0]: line for line in both.stdout.splitlines() if line.strip()}
    assert "built in" in listing["test-core"] and "built in" not in listing["test-broken"], both.stdout


def test_jobs_below_one_is_a_usage_error(tmp_path):
    bad = run_cli_subprocess(["envs", "--build", "--jobs", "-1"], cwd=tmp_path)
    assert bad.rc == 2 and "--jobs -1" in bad.stderr
