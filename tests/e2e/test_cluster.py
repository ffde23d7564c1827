"""`--cluster` on Ray clusters simulated on this machine (ray.cluster_utils.Cluster: a head for coordination
only, nodes of 1-2 CPUs with cores of their own): every (cell, repeat) runs once, concurrent cells hold
disjoint cores (seen from inside the cells), a node killed under a cell leaves `lost` rows that `rlbench
resume` completes, a node running other code is refused before anything is written, tune races on several
nodes at once, and nothing is left running."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from support import REPO, SUPPORT, read_run, write_suite
from support.procs import matching, settle

pytestmark = [pytest.mark.slow, pytest.mark.threaded_runtime, pytest.mark.exclusive]

PROTOCOL = """[protocol]
repeats = 2
warmup_s = 0.05
warmup_units = 2
duration_s = {duration}
min_units = 5
timeout_s = 60
"""


def probe_suite(tmp_path, log_dir, duration=0.3, cores=None, num_envs=(1, 2, 3)) -> Path:
    proto = PROTOCOL.format(duration=duration) + (f"cores = {cores}\n" if cores else "")
    body = ('[[sweep]]\nadapters = ["serial"]\nenvs = ["cluster_probe:make_probe"]\n'
            f"num_envs = {list(num_envs)}\nenv_kwargs = {{ log_dir = [\"{log_dir}\"] }}\n")
    return write_suite(tmp_path, body, protocol=proto)


def cli_env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(SUPPORT), os.environ.get("PYTHONPATH", "")])}


def rlbench(*args, timeout=300, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rlbench.cli", *map(str, args)], capture_output=True, text=True,
                          env=cli_env(), timeout=timeout, cwd=cwd)


def probes(log_dir: Path) -> list:
    """(pid, opened, closed, cpus) of every env the cells built."""
    seen = {}
    for path in log_dir.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            r = json.loads(line)
            seen.setdefault(path.name, {})[r["event"]] = r
    return [(e["open"]["pid"], e["open"]["t"], e.get("close", {}).get("t"), tuple(e["open"]["cpus"]))
            for e in seen.values()]


STARTED = time.time()


def cells_running() -> list:
    """This module's cells still alive (another run's beside it are not its business)."""
    return matching(("rlbench.running.child",), STARTED)


@pytest.fixture
def simulated():
    from rlbench.running.cluster.simulated import SimulatedCluster
    made = []

    def start(nodes=2, cpus=1, env_vars=None):
        cluster = SimulatedCluster(nodes, cpus, env_vars={"PYTHONPATH": str(SUPPORT), **(env_vars or {})})
        made.append(cluster)
        return cluster
    yield start
    for cluster in made:
        cluster.shutdown()
    assert not [p for p in matching(("raylet", "gcs_server")) if p.ppid() == os.getpid()], \
        "a raylet of the test's cluster outlived it"


def test_every_job_once_on_disjoint_cores(tmp_path, simulated):
    """One node of 2 CPUs running 1-core cells two at a time: each (cell, repeat) once, each on the cores its
    row names, and cells alive at the same moment on different cores."""
    cluster = simulated(nodes=1, cpus=2)
    logs = tmp_path / "probe"
    logs.mkdir()
    out = tmp_path / "run"
    r = rlbench("run", probe_suite(tmp_path, logs, duration=0.5, cores=1, num_envs=(1, 2, 3, 4)), "--cluster",
                cluster.address, "--out", out)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = read_run(out)
    assert sorted((x["cell_id"], x["repeat"]) for x in rows) == sorted(
        {(x["cell_id"], rep) for x in rows for rep in (0, 1)})
    assert len(rows) == 8 and all(x["status"] == "ok" for x in rows)
    assert all(x["node"] and x["node_class"] and len(x["affinity"]) == 1 and x["cpus"] == 1 for x in rows)
    env = json.loads((out / "env.json").read_text())
    assert env["cluster"]["class"] == rows[0]["node_class"] and len(env["cluster"]["nodes"]) == 1
    seen = probes(logs)
    assert len(seen) >= 8 and all(len(cpus) == 1 for *_, cpus in seen)
    overlapping = 0
    for i, (pid, t0, t1, cpus) in enumerate(seen):
        for other_pid, u0, u1, other in seen[i + 1:]:
            if pid != other_pid and t0 < (u1 or 1e18) and u0 < (t1 or 1e18):
                overlapping += 1
                assert set(cpus).isdisjoint(other), f"cells at the same time on the same core: {cpus} {other}"
    assert overlapping, "no two cells ran at once: the node's 2 CPUs were not used together"
    assert {tuple(x["affinity"]) for x in rows} <= {cpus for *_, cpus in seen}
    assert not cells_running()


def test_lost_node_rows_then_resume(tmp_path, simulated):
    """A node killed while a cell runs on it: that repeat is a `lost` row naming it, the run exits 1; `rlbench
    resume` runs it again on what is left and the lost row is superseded."""
    cluster = simulated(nodes=2, cpus=1)
    victim = cluster.nodes[1]
    logs = tmp_path / "probe"
    logs.mkdir()
    out = tmp_path / "run"
    suite = probe_suite(tmp_path, logs, duration=2.0)
    proc = subprocess.Popen([sys.executable, "-m", "rlbench.cli", "run", str(suite), "--cluster", cluster.address,
                             "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=cli_env())
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # a cell is running on the victim's core
        running = [p for p in probes(logs) if p[2] is None and p[3] == cluster.cores[victim]]
        if running and (out / "results.jsonl").exists():
            break
        time.sleep(0.2)
    time.sleep(0.5)
    cluster.kill(victim)
    stdout, stderr = proc.communicate(timeout=300)
    rows = read_run(out)
    lost = [x for x in rows if x["status"] == "lost"]
    assert proc.returncode == 1, stderr[-3000:]
    assert lost and all(x["node"] and x["error"].startswith("lost:") for x in lost), rows
    assert "lost" in stderr
    time.sleep(1.0)
    assert not cells_running(), "a cell of the killed node outlived it"
    r = rlbench("resume", out)
    assert r.returncode == 0, r.stderr[-3000:]
    from rlbench.results.model import ResultSet
    results = ResultSet.load(str(out))
    assert sorted((x["cell_id"], x["repeat"]) for x in results.runs) == sorted(
        {(x["cell_id"], rep) for x in results.runs for rep in (0, 1)})
    assert all(x["status"] == "ok" for x in results.runs) and len(results.runs) == 6
    assert not cells_running()


def test_node_with_other_code_refused(tmp_path, simulated):
    """A node importing rlbench from a checkout at another commit: exit 2, one line naming it, nothing written."""
    other = tmp_path / "other-checkout"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(other), "HEAD"], check=True,
                   capture_output=True)
    try:
        subprocess.run(["git", "-C", str(other), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                        "--allow-empty", "-m", "another commit"], check=True, capture_output=True)
        (other / "rlbench" / "adapters").symlink_to(other / "adapters")
        cluster = simulated(nodes=1, cpus=1)
        cluster.add_node(1, [0], {"PYTHONPATH": os.pathsep.join([str(other), str(SUPPORT)])})
        cluster.cluster.wait_for_nodes()
        out = tmp_path / "run"
        # run from elsewhere: Ray puts the driver's folder first on its workers' path (the checkout, here)
        r = rlbench("run", "--adapter", "serial", "--env", "CartPole-v1", "--repeats", "1", "--duration", "0.05",
                    "--cluster", cluster.address, "--out", out, cwd=tmp_path)
        assert r.returncode == 2, r.stderr[-3000:]
        line = r.stderr.strip().splitlines()[-1]
        assert "refused" in line and "commit" in line, line
        assert not out.exists()
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(other)], capture_output=True)


def test_tune_races_on_several_nodes(tmp_path, simulated):
    cluster = simulated(nodes=2, cpus=1)
    out = tmp_path / "tune"
    r = rlbench("tune", "--env", "CartPole-v1", "--adapters", "serial,gymnasium-sync", "--max-envs", "8",
                "--budget", "40s", "--cluster", cluster.address, "--out", out)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "on nodes of class" in r.stdout
    rows = read_run(out)
    assert len({x["node"] for x in rows if x["status"] == "ok"}) == 2
    decision = json.loads((out / "tune.json").read_text())["decision"]
    assert decision["winner"] and decision["where"].startswith("nodes of class")
    assert not cells_running()


def test_interrupted_driver_leaves_nothing_on_the_nodes(tmp_path, simulated):
    """SIGTERM to the driver while cells run on two nodes: exit 130, the finished rows kept, and no cell
    process (nor anything it started) left on any node, nor a folder of its jobs (Ray kills a cancelled task's
    worker and the worker's children, so the job's watchdog must be no child of it)."""
    node_tmp = Path(tempfile.mkdtemp(prefix="rlb-nodes-"))   # short: Ray's sockets may go under it
    cluster = simulated(nodes=2, cpus=1, env_vars={"TMPDIR": str(node_tmp)})
    logs = tmp_path / "probe"
    logs.mkdir()
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "rlbench.cli", "run", str(probe_suite(tmp_path, logs, duration=3.0)),
                             "--cluster", cluster.address, "--out", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=cli_env())
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len({p[3] for p in probes(logs) if p[2] is None}) < 2:
        time.sleep(0.2)  # a cell open on each node's core
    assert len(cells_running()) >= 2
    proc.terminate()
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-3000:]
    deadline = time.monotonic() + 15
    while cells_running() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not cells_running(), "a cell outlived the interrupted driver"
    left = settle(lambda: sorted(p.name for p in node_tmp.glob("rlbench-*")), timeout=15)
    shutil.rmtree(node_tmp, ignore_errors=True)
    assert not left, f"the nodes kept folders of the interrupted jobs: {left}"
