"""`ray-actors` on a local Ray and on a real two-node cluster (ray.cluster_utils.Cluster): exact step
counts, serial's transitions, placement by strategy, and a killed actor turning into an error row with
nothing of Ray left behind."""
import os
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
from support import TINY_PROTOCOL, run_cli, write_suite
from support.procs import matching, ours, text

from rlbench import registry
from rlbench.api import PolicySpec, Workload
from rlbench.workload import parse_policy

pytestmark = pytest.mark.threaded_runtime
RAY_DAEMONS = ("raylet", "gcs_server")


def _open(workload, **options):
    cls = registry.get("ray-actors")
    opts = cls.resolve_options(options)
    assert cls().supports(workload, opts) is None
    return cls().open(workload, opts)


def _ray_daemons(since) -> set:
    return {p.pid for p in matching(RAY_DAEMONS, since)}


@pytest.fixture
def no_ray_left():
    since = time.time()
    before = _ray_daemons(since)
    yield
    deadline = time.monotonic() + 10
    while _ray_daemons(since) - before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _ray_daemons(since) - before == set(), "a Ray daemon outlived the test"


def test_sync_driver_policy_collects_serials_transitions(no_ray_left, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    workload = Workload("CartPole-v1", 4, PolicySpec(), seed=0)
    session = _open(workload, actors=2)
    try:
        assert session.info["workers"] == 2 and session.info["batch_size"] == 4
        assert session.info["runtime_init_s"] > 0 and len(session.info["placement"]) == 2
        assert session.info["cluster"]["address"] == "local"
        got = [session.obs.copy()] + [session.obs.copy() for _ in range(60) if session.step() == 4]
    finally:
        session.close()
    serial = registry.get("serial")().open(workload, {})
    try:
        want = [serial.obs.copy()] + [serial.obs.copy() for _ in range(60) if serial.step() == 4]
    finally:
        serial.close()
    assert len(got) == len(want) == 61
    np.testing.assert_array_equal(np.stack(got), np.stack(want))


@pytest.mark.parametrize("options, per_unit", [   # each starts Ray (~10 s): the one quick, the others slow
    ({"mode": "sync", "policy": "actor", "transport": "object_store"}, 4),
    pytest.param({"mode": "async", "wait_k": 1, "policy": "driver", "transport": "object_store"}, 2,
                 marks=pytest.mark.slow),
    pytest.param({"mode": "async", "wait_k": 2, "policy": "actor", "transport": "inline"}, 4, marks=pytest.mark.slow),
])
def test_modes_policies_and_transports_count_exactly(no_ray_left, monkeypatch, options, per_unit):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    session = _open(Workload("rlbench/Synthetic-v0", 4, PolicySpec(), seed=0,
                             env_kwargs={"obs_bytes": 200_000, "episode_len": 5}), actors=2, **options)
    try:
        assert [session.step() for _ in range(20)] == [per_unit] * 20
        assert session.obs.shape[1:] == (200_000,) and session.obs.flags.writeable  # a copy, read in full
    finally:
        session.close()


EXAMPLES = str(Path(__file__).resolve().parents[2] / "examples")
RECURRENT = "toyenvs.policies:recurrent_linear:decay=1.0"   # an env's state never fades: a missed reset shows


def _per_env_calls(session, steps, envs=None, at_least=0):
    """{env id: [(observation, start flag, action), ...]} as the session's driver policy was called, over `steps`
    steps, and on (at most 10x as many) until each of `envs` envs had `at_least` calls: in async mode a step serves
    whichever actor was ready, and a loaded machine may favour one for a while."""
    calls, act = {}, session.policy

    def spy(obs, starts, env_ids=None):
        actions = act(obs, starts, env_ids)
        ids = np.arange(len(obs)) if env_ids is None else env_ids
        for j, i in enumerate(ids):
            calls.setdefault(int(i), []).append((obs[j].copy(), bool(starts[j]), int(actions[j])))
        return actions
    spy.recurrent = True
    session.policy = spy
    for _ in range(steps):
        session.step()
    for _ in range(9 * steps):
        if len(calls) >= (envs or 0) and min((len(c) for c in calls.values()), default=0) >= at_least:
            break
        session.step()
    return calls


@pytest.mark.parametrize("options", [{"policy": "driver"}, {"policy": "driver", "mode": "async", "wait_k": 1},
                                     pytest.param({"policy": "actor"}, marks=pytest.mark.slow)])
def test_a_recurrent_policy_acts_for_each_env_as_in_the_serial_loop(no_ray_left, monkeypatch, options):
    """A recurrent user policy whose state sums an env's observations since its episode began: under every
    mode and placement each env sees the observations, start flags and actions the serial loop gives it (CartPole
    episodes end and reset many times in 150 steps), so its state was carried per env and zeroed where it began."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.syspath_prepend(EXAMPLES)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [EXAMPLES, os.environ.get("PYTHONPATH")])))
    workload = Workload("CartPole-v1", 4, parse_policy(RECURRENT), seed=0)
    serial = registry.get("serial")().open(workload, {})
    try:
        want = _per_env_calls(serial, 150)
    finally:
        serial.close()
    assert sum(start for calls in want.values() for _, start, _ in calls) > 4 * 3   # episodes ended and began
    session = _open(workload, actors=2, **options)
    try:
        if options["policy"] == "driver":
            got = _per_env_calls(session, 150, envs=4, at_least=30)
            first = 1 if options.get("mode") == "async" else 0   # async: opening sent every actor's first step
            for i, calls in want.items():
                k = len(got[i])
                assert k >= 30   # async: each step is one actor's envs
                for (o1, s1, a1), (o2, s2, a2) in zip(got[i], calls[first:first + k]):
                    np.testing.assert_array_equal(o1, o2)
                    assert (s1, a1) == (s2, a2)
        else:  # the actors' own copies act: the observations they reply with are the serial loop's
            seen = [session.obs.copy()] + [session.obs.copy() for _ in range(150) if session.step() == 4]
            np.testing.assert_array_equal(np.stack(seen)[:150], np.stack([[calls[t][0] for i, calls in
                                                                          sorted(want.items())]
                                                                         for t in range(150)]))
    finally:
        session.close()


def test_unsupported_settings_name_the_reason():
    cls = registry.get("ray-actors")
    workload = Workload("CartPole-v1", 4)
    assert "multiple of actors=3" in cls().supports(workload, cls.resolve_options({"actors": 3}))
    assert "wait_k=3" in cls().supports(workload, cls.resolve_options({"mode": "async", "wait_k": 3}))


@pytest.mark.slow
def test_a_two_node_cluster_places_actors_by_strategy(no_ray_left, monkeypatch):
    from ray.cluster_utils import Cluster
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2})
    try:
        cluster.add_node(num_cpus=2)
        cluster.wait_for_nodes()
        monkeypatch.setenv("RAY_ADDRESS", cluster.address)
        nodes = {}
        for placement in ("spread", "pack"):
            session = _open(Workload("CartPole-v1", 4, PolicySpec(), seed=0), actors=2, placement=placement,
                            mode="async", wait_k=1)
            try:
                assert sum(session.step() for _ in range(30)) == 30 * 2
                nodes[placement] = {p["node_id"] for p in session.info["placement"]}
                assert len(session.info["cluster"]["nodes"]) == 2
                assert session.info["cluster"]["resources"]["CPU"] == 4
            finally:
                session.close()
        assert len(nodes["spread"]) == 2, "spread put both actors on one node"
        assert len(nodes["pack"]) == 1, "pack used two nodes for two 1-CPU actors"
    finally:
        cluster.shutdown()


@pytest.mark.slow
def test_a_killed_actor_is_an_error_row_and_the_sweep_goes_on(tmp_path, no_ray_left, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    suite = write_suite(tmp_path, """
[[sweep]]
adapters = ["ray-actors"]
envs = ["CartPole-v1"]
num_envs = [2]
[[sweep]]
adapters = ["serial"]
envs = ["CartPole-v1"]
num_envs = [1]
""", protocol=TINY_PROTOCOL.replace("duration_s = 0.05", "duration_s = 5"))
    killed = []

    def kill_an_actor():
        deadline = time.monotonic() + 60
        while not killed and time.monotonic() < deadline:
            for p in ours():   # the actors of this test's run, never another run's
                try:
                    if "ray::EnvActor" in text(p):
                        time.sleep(0.5)  # let the cell start measuring (killed earlier, open() fails: also an error)
                        p.kill()
                        killed.append(p.pid)
                        return
                except psutil.Error:
                    continue
            time.sleep(0.1)

    killer = threading.Thread(target=kill_an_actor)
    killer.start()
    run = run_cli(["run", str(suite)], tmp_path / "run")
    killer.join()
    assert killed, "no Ray actor process was found to kill"
    assert run.rc == 1  # an error row: exit 1, the report still written
    ray_row, serial_row = run.row("ray-actors"), run.row("serial")
    assert ray_row["status"] == "error" and "Actor" in ray_row["error"], ray_row
    assert serial_row["status"] == "ok"


def test_a_run_records_placement_start_up_and_the_cluster(tmp_path, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    run = run_cli(["run", "--adapter", "ray-actors", "--env", "CartPole-v1", "--num-envs", "2",
                   "--repeats", "1", "--duration", "0.05"], tmp_path / "run")
    row = run.row("ray-actors")
    assert row["status"] == "ok", row
    assert row["runtime_init_s"] > 0 and row["setup_s"] > row["runtime_init_s"]
    assert [p["actor"] for p in row["placement"]] == [0, 1] and all(p["pid"] > 0 for p in row["placement"])
    cluster = run.env["ray_cluster"]
    assert cluster["address"] == "local" and len(cluster["nodes"]) == 1 and cluster["resources"]["CPU"] >= 2
    assert cluster["placements"] == {row["cell_id"]: row["placement"]}
    header = (tmp_path / "run" / "results.csv").read_text().splitlines()[0].split(",")
    assert {"runtime_init_s", "placement"} <= set(header)
