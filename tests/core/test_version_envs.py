"""A package at another released version (rlbench bisect --package): the versions between two, a pin file with
one pin swapped, an overlay of the main environment holding only that version, and an adapter environment
built from another pin file. Versions are served from a folder of hand-written wheels (no network)."""
import subprocess

import pytest
from support.wheels import write_wheel

from rlbench import registry
from rlbench.errors import UsageError
from rlbench.running import adapter_envs
from rlbench.running.version_envs import OverlayEnv, main_constraints_without, pins_with, released

VERSIONS = ("1.0.0", "1.1.0", "1.2.0rc1", "1.3.0", "2.0.0")


@pytest.fixture
def index(tmp_path, monkeypatch):
    """A local index of rlbench-toyver's releases; pip sees nothing else, and environments go under tmp_path."""
    wheels = tmp_path / "wheels"
    for v in VERSIONS:
        write_wheel(wheels, "rlbench-toyver", v, {"rlbench_toyver/__init__.py": f"VERSION = {v!r}\n"})
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv("RLBENCH_VENVS", str(tmp_path / "venvs"))
    return wheels


def test_released_lists_final_versions_between_the_ends(index):
    assert released("rlbench-toyver", "1.0.0", "2.0.0") == ["1.0.0", "1.1.0", "1.3.0", "2.0.0"]
    assert released("rlbench_toyver", "1.1.0", "1.3.0") == ["1.1.0", "1.3.0"]     # names compare normalized
    with pytest.raises(UsageError, match=r"1\.4\.0 is not a released version \(valid: 1\.0\.0, 1\.1\.0, 1\.3\.0, "
                                         r"2\.0\.0\)"):
        released("rlbench-toyver", "1.0.0", "1.4.0")
    with pytest.raises(UsageError, match="the first must be older than the last"):
        released("rlbench-toyver", "2.0.0", "1.0.0")
    with pytest.raises(UsageError, match="'one' is not a version"):
        released("rlbench-toyver", "one", "2.0.0")
    with pytest.raises(UsageError, match="--package rlbench-nothing-here: no released version found"):
        released("rlbench-nothing-here", "1.0.0", "2.0.0")


def test_pins_with_swaps_or_adds_the_pin(tmp_path):
    pins = tmp_path / "env.txt"
    pins.write_text("# a comment\nGymnasium[mujoco]==1.3.0\nnumpy==2.4.6\n")
    swapped = open(pins_with(str(pins), "gymnasium", "1.0.0", str(tmp_path / "out"))).read()
    assert swapped == "# a comment\nGymnasium[mujoco]==1.0.0\nnumpy==2.4.6\n"
    added = open(pins_with(str(pins), "rlbench-toyver", "1.1.0", str(tmp_path / "out"))).read()
    assert added.endswith("numpy==2.4.6\nrlbench-toyver==1.1.0\n")
    kept = open(main_constraints_without("gymnasium", str(tmp_path / "out"))).read()
    assert "numpy==" in kept and "gymnasium==" not in kept.lower()


def test_overlay_holds_the_version_in_front_of_the_main_environment(index):
    env = OverlayEnv("rlbench-toyver", "1.1.0")
    record = env.ensure()
    assert record["packages"] == {"rlbench-toyver": "1.1.0"}      # only the package itself: the rest is the main's
    said = subprocess.run([env.python, "-c", "import rlbench, rlbench_toyver, numpy, sys; "
                           "print(rlbench_toyver.VERSION, rlbench.ROOT, sys.prefix)"], capture_output=True,
                          text=True, check=True).stdout.split()
    assert said == ["1.1.0", str(adapter_envs.ROOT), env.dir]
    assert env.ensure() == record                                      # built once
    assert OverlayEnv("rlbench-toyver", "1.3.0").dir != env.dir


def test_a_version_that_cannot_install_is_a_build_error(index):
    with pytest.raises(adapter_envs.EnvBuildError, match="failed to build"):
        OverlayEnv("rlbench-toyver", "9.9.9").ensure()


def test_env_pins_points_an_adapter_environment_at_another_pin_file(tmp_path, monkeypatch):
    brax = registry.get("brax")
    default = adapter_envs.environment_of(brax)
    assert default.requirements.endswith("adapters/envs/brax.txt")
    other = tmp_path / "brax-other.txt"
    other.write_text("brax==0.14.1\n")
    monkeypatch.setenv("RLBENCH_ENV_PINS", f"pufferlib=/x.txt; brax={other}")
    moved = adapter_envs.environment_of(brax)
    assert moved.name == "brax" and moved.requirements == str(other) and moved.key != default.key


def test_a_cell_of_an_adapter_environment_bisects_in_that_environment(tmp_path):
    """A version of a package an adapter environment pins runs in that environment rebuilt with the pin swapped;
    cells of two environments under one pattern are refused."""
    from rlbench.bisect import VersionRuns
    suite = tmp_path / "s.toml"
    suite.write_text('name = "s"\n[[sweep]]\nadapters = ["pufferlib-serial", "serial"]\nenvs = ["CartPole-v1"]\n'
                     'num_envs = [4]\n')
    assert VersionRuns("numpy", str(suite), "pufferlib-serial/*", str(tmp_path / "o")).adapter_env.name == "pufferlib"
    assert VersionRuns("numpy", str(suite), "serial/*", str(tmp_path / "o")).adapter_env is None
    with pytest.raises(UsageError, match=r"several environments \(main, pufferlib\)"):
        VersionRuns("numpy", str(suite), "*", str(tmp_path / "o"))


def test_envs_here_runs_an_environments_adapters_in_this_interpreter(monkeypatch):
    """A machine that cannot build the brax environment (no network) but holds its packages runs its adapters in
    its own interpreter; where a package is missing there, the adapter says which."""
    playground = registry.get("playground")
    assert adapter_envs.environment_of(playground).name == "brax"
    monkeypatch.setenv("RLBENCH_ENVS_HERE", "rllib, brax")
    assert adapter_envs.environment_of(playground) is None
    assert adapter_envs.environment_of(registry.get("sample-factory")).name == "sample-factory"
    assert playground().available() == "package not installed: mujoco_playground"
