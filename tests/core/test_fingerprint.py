"""env.json: the machine and software a run measured on."""
import hashlib
import platform
import subprocess
import sys
from datetime import datetime

import numpy
import psutil
import pytest
from support import REPO, TINY_PROTOCOL, run_cli, sweep, write_suite

import rlbench
from rlbench.machine.fingerprint import PACKAGES, fingerprint


@pytest.fixture(scope="module")
def fp():
    return fingerprint()


def _git(*args):
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True).stdout.strip()


def test_cpu_and_memory(fp):
    assert isinstance(fp["cpu_model"], str) and fp["cpu_model"]
    assert fp["cpu_logical_cores"] == psutil.cpu_count(logical=True)
    assert fp["cpu_physical_cores"] == psutil.cpu_count(logical=False)
    assert 1 <= fp["cpu_physical_cores"] <= fp["cpu_logical_cores"]
    assert fp["ram_gb"] == pytest.approx(psutil.virtual_memory().total / 2**30, abs=0.01)


def test_gpus_is_a_list(fp):
    assert isinstance(fp["gpus"], list)
    for gpu in fp["gpus"]:
        assert set(gpu) == {"name", "memory", "driver", "uuid"}


def test_os_and_python(fp):
    assert fp["os"] == platform.platform()
    assert fp["kernel"] == platform.release()
    assert fp["python"] == platform.python_version()
    assert fp["python_executable"] == sys.executable
    assert fp["schema"] == rlbench.SCHEMA_VERSION and fp["rlbench_version"] == rlbench.__version__


def test_package_versions(fp):
    assert set(fp["packages"]) == set(PACKAGES)
    assert fp["packages"]["numpy"] == numpy.__version__
    assert fp["packages"]["psutil"] == psutil.__version__


def test_git_commit_and_dirty(fp):
    assert fp["git"]["commit"] == _git("rev-parse", "HEAD")
    assert fp["git"]["dirty"] is bool(_git("status", "--porcelain", "--untracked-files=no"))


def test_env_vars(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("SOME_UNRELATED_VAR", "x")
    env_vars = fingerprint()["env_vars"]
    assert env_vars["OMP_NUM_THREADS"] == "3"
    assert "CUDA_VISIBLE_DEVICES" not in env_vars and "SOME_UNRELATED_VAR" not in env_vars


def test_suite_hash(tmp_path):
    path = write_suite(tmp_path, sweep(["serial"]))
    fp = fingerprint(str(path))
    assert fp["suite_path"] == str(path)
    assert fp["suite_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert fingerprint()["suite_sha256"] is None


def test_started_at_is_an_utc_timestamp(fp):
    started = datetime.fromisoformat(fp["started_at"])
    assert started.utcoffset().total_seconds() == 0


def test_env_json_of_a_run(tmp_path, capsys):
    path = write_suite(tmp_path, sweep(["serial"]), protocol=TINY_PROTOCOL)
    run = run_cli(["run", str(path)], tmp_path / "out", capsys)
    assert run.rc == 0
    env = run.env
    assert env["schema"] == rlbench.SCHEMA_VERSION
    assert env["suite_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert datetime.fromisoformat(env["started_at"]) <= datetime.fromisoformat(env["ended_at"])
    assert env["run_id"] == run.rows[0]["run_id"]
    assert env["cells"] == 1
    assert env["settings"]["repeats"] == 1 and env["settings"]["duration_s"] == 0.05
    assert env["packages"]["numpy"] == numpy.__version__
    assert not list(run.out.glob("*.tmp"))  # every file was renamed into place
