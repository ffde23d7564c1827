"""The parts of `--cluster` that need no cluster: core leases on a host, what a cell reserves, lost rows
superseded on resume, the settings and their refusals, the cell's environment on a node."""
import multiprocessing
import os
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest
from support import run_cli, sweep, write_suite

from rlbench.errors import UsageError
from rlbench.planning.plan import Cell, Job, Settings
from rlbench.planning.suite import parse_settings
from rlbench.results.model import ResultSet
from rlbench.running.cluster import cores
from rlbench.running.cluster.dispatch import demand, too_big
from rlbench.running.runner import RAY_WORKER_VARS, Runner
from rlbench.running.session import Outcome, exit_code
from rlbench.workload import PolicySpec, Workload


@pytest.fixture
def locks(tmp_path, monkeypatch):
    monkeypatch.setattr(cores, "LOCK_DIR", str(tmp_path / "locks"))
    return tmp_path / "locks"


def test_leases_on_a_host_are_disjoint_and_wait(locks):
    a = cores.lease(1, (0, 1), 1.0)
    b = cores.lease(1, (0, 1), 1.0)
    assert {a.cores, b.cores} == {(0,), (1,)}
    t0 = time.monotonic()
    with pytest.raises(cores.LeaseTimeout, match="no 1 free cores of"):
        cores.lease(1, (0, 1), 0.2)
    assert time.monotonic() - t0 >= 0.2
    a.release()
    assert cores.lease(1, (0, 1), 0.5).cores == a.cores
    with pytest.raises(cores.LeaseTimeout, match="3 cores asked of a node with 2"):
        cores.lease(3, (0, 1), 0.1)


def _hold(lock_dir, ready):
    cores.LOCK_DIR = lock_dir
    held = cores.lease(1, (0, 1), 1.0)
    ready.set()
    time.sleep(60)
    held.release()


def test_a_lease_ends_with_its_process(locks):
    """Another process's lease is respected; when that process dies (SIGKILL), its cores are free again."""
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    holder = ctx.Process(target=_hold, args=(str(locks), ready))
    holder.start()
    try:
        assert ready.wait(30)
        mine = cores.lease(1, (0, 1), 1.0)
        assert mine.cores == (1,)
        with pytest.raises(cores.LeaseTimeout):
            cores.lease(1, (0, 1), 0.1)
    finally:
        holder.kill()
        holder.join()
    assert cores.lease(1, (0, 1), 1.0).cores == (0,)


def test_node_cores(monkeypatch):
    assert cores.parse_ranges("0-2, 5,7-7") == [0, 1, 2, 5, 7]
    mine = sorted(os.sched_getaffinity(0))
    monkeypatch.setenv(cores.NODE_CPUS_VAR, f"{mine[-1]},999")
    assert cores.node_cores() == (mine[-1],)
    monkeypatch.delenv(cores.NODE_CPUS_VAR)
    assert cores.node_cores() == tuple(mine)


def _cell(protocol=(), affinity=None, device="cpu"):
    policy = PolicySpec("mlp", device=device) if device != "cpu" else PolicySpec()
    return Cell("serial", Workload("CartPole-v1", 4, policy), protocol=protocol, affinity=affinity)


VIEW = SimpleNamespace(cpus=8, gpus=0, class_id="abcd1234")


def test_what_a_cell_reserves():
    s = Settings()
    assert demand(_cell(), s, VIEW) == (8, 8, 0)                                   # a whole node
    assert demand(_cell((("cores", 2),)), s, VIEW) == (2, 2, 0)
    assert demand(_cell((("cores", 2), ("exclusive", True))), s, VIEW) == (2, 8, 0)  # pinned to 2, node held
    assert demand(_cell(affinity=(0, 1, 2)), s, VIEW) == (3, 3, 0)
    assert demand(_cell(device="cuda"), s, VIEW)[2] == 0                           # a class without GPUs
    assert demand(_cell(device="cuda"), s, SimpleNamespace(cpus=8, gpus=1))[2] == 1
    # a JAX program runs on the GPU whatever its policy device says, whichever family owns its kind (gymnax:
    # stepping's vector_env, purejaxrl-ppo: a learner)
    for adapter in ("gymnax", "purejaxrl-ppo"):
        assert demand(Cell(adapter, Workload("CartPole-v1", 4)), s, SimpleNamespace(cpus=8, gpus=1))[2] == 1
    assert too_big([_cell((("cores", 9),))], s, VIEW) == [
        "serial/CartPole-v1/n=4/random wants 9 cores; nodes of class abcd1234 have 8"]


def test_a_lost_repeat_run_again_counts_once():
    base = {"cell_id": "c", "profiled": False}
    rows = [{**base, "repeat": 0, "status": "ok", "steps_per_s": 1.0},
            {**base, "repeat": 1, "status": "lost", "error": "lost: NodeDiedError on node x"},
            {**base, "repeat": 2, "status": "lost", "error": "lost: ..."},
            {**base, "repeat": 1, "status": "ok", "steps_per_s": 2.0}]
    results = ResultSet.from_rows(rows)
    assert [(r["repeat"], r["status"]) for r in results.runs] == [(0, "ok"), (2, "lost"), (1, "ok")]
    assert exit_code(Outcome(), results, allow_errors=False) == 1
    assert exit_code(Outcome(), ResultSet.from_rows([rows[0], rows[3]]), allow_errors=False) == 0


@pytest.mark.parametrize("table, message", [
    ({"cluster": "not an address"}, "cluster='not an address' (valid: '' for this machine, 'auto', HOST:PORT"),
    ({"cores": -1}, "protocol.cores=-1 must be an integer >= 0"),
    ({"cores": 1.5}, "protocol.cores=1.5 must be an integer >= 0"),
    ({"exclusive": "yes"}, "protocol.exclusive='yes' must be true or false"),
    ({"node_class": 3}, "protocol.node_class=3 must be a string"),
])
def test_bad_cluster_settings(table, message):
    with pytest.raises(UsageError, match=None) as err:
        parse_settings("suite.toml", table)
    assert message in str(err.value)


def test_cluster_settings_parse():
    s = parse_settings("suite.toml", {"cluster": "10.0.0.1:6379", "cores": 2, "exclusive": True, "node_class": "ab"})
    assert (s.cluster, s.cores, s.exclusive, s.node_class) == ("10.0.0.1:6379", 2, True, "ab")


def test_refused_before_joining(tmp_path, capsys):
    """--ray-address with --cluster, a malformed address, a sweep's bad cores: exit 2, nothing written, and
    no Ray is needed to say so."""
    suite = write_suite(tmp_path, sweep(["serial"]))
    r = run_cli(["run", str(suite), "--cluster", "auto", "--ray-address", "auto"], tmp_path / "a", capsys)
    assert r.rc == 2 and "--ray-address auto with --cluster auto" in r.stderr and not (tmp_path / "a").exists()
    r = run_cli(["run", str(suite), "--cluster", "http://x"], tmp_path / "b", capsys)
    assert r.rc == 2 and "--cluster='http://x'" in r.stderr and not (tmp_path / "b").exists()
    bad = write_suite(tmp_path, sweep(["serial"]) + "protocol = { cores = -2 }\n", name="bad.toml")
    r = run_cli(["run", str(bad)], tmp_path / "c", capsys)
    assert r.rc == 2 and "cores=-2" in r.stderr and not (tmp_path / "c").exists()


def test_cell_environment_on_a_node(tmp_path, monkeypatch):
    """On a node: no Ray worker variable reaches the cell (its Ray is its own), threads set explicitly, and the
    spec pins the leased cores."""
    for var in RAY_WORKER_VARS:
        monkeypatch.setenv(var, "x")
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    runner = Runner(Settings(omp_threads=0), str(tmp_path))
    job = Job(_cell(), 0)
    env = runner.child_env(job, str(tmp_path), cores=(0, 1))
    assert not any(v in env for v in RAY_WORKER_VARS)
    assert env["OMP_NUM_THREADS"] == "2" and env["MKL_NUM_THREADS"] == "2"
    here = runner.child_env(job, str(tmp_path))
    assert here["RAY_ADDRESS"] == "x" and here["OMP_NUM_THREADS"] == "7"   # one machine: as before


def test_simulated_cluster_needs_a_command():
    r = subprocess.run([sys.executable, "-m", "rlbench.running.cluster.simulated", "--nodes", "1"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "a command to run is needed" in r.stderr



def test_compare_reads_a_cluster_runs_class():
    """A cluster run's machine, for `rlbench compare`, is its class's nodes', not the driver's."""
    from rlbench.results.compare import machine
    fp = {"cpu_model": "EPYC", "cpu_logical_cores": 16, "ram_gb": 64, "gpus": [["H100", "80 GiB"]]}
    env = {"cpu_model": "laptop", "cpu_logical_cores": 4, "ram_gb": 16.0, "gpus": [],
           "cluster": {"class": "c1", "classes": {"c1": {"fingerprint": fp, "nodes": []}}}}
    from rlbench.results.record import RunRecord
    assert machine(RunRecord.from_json(env)) == {"cpu_model": "EPYC", "cpu_logical_cores": 16, "ram_gb": 64,
                                                 "gpus": ["H100"]}
    alone = RunRecord.from_json({k: v for k, v in env.items() if k != "cluster"})
    assert machine(alone)["cpu_model"] == "laptop"


def test_a_resumed_cluster_run_stays_on_its_class(tmp_path):
    from rlbench.running.session import same_class
    (tmp_path / "env.json").write_text('{"cluster": {"class": "aaaa1111"}}')
    same_class(str(tmp_path), SimpleNamespace(class_id="aaaa1111"))
    with pytest.raises(UsageError, match="it ran on nodes of class aaaa1111, the cluster's nodes now are of class b"):
        same_class(str(tmp_path), SimpleNamespace(class_id="bbbb2222"))
