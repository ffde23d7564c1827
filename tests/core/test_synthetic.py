"""`rlbench/Synthetic-v0`: its knobs (observation size, episode length), a CLI run with --env-kwarg,
and EnvPool's cells on it dropped from the plan (it has no native one) instead of failing."""
import numpy as np
import pytest
from support import TINY

from rlbench import registry
from rlbench.api import PolicySpec, Workload, make_env

ENV = "rlbench/Synthetic-v0"


def test_observation_has_obs_bytes_bytes():
    env = make_env(ENV, obs_bytes=37, episode_len=5, step_cost_us=0.0)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.shape == (37,)
    assert obs.shape == (37,) and obs.dtype == np.uint8
    obs, *_ = env.step(1)
    assert obs.shape == (37,)
    env.close()


def test_truncates_after_episode_len():
    env = make_env(ENV, obs_bytes=8, episode_len=5)
    env.reset(seed=0)
    flags = [env.step(0)[2:4] for _ in range(5)]
    assert flags == [(False, False)] * 4 + [(False, True)]  # never terminated, truncated at step 5
    env.reset()
    assert env.step(0)[3] is False  # a reset starts a new episode
    env.close()


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="obs_bytes"):
        make_env(ENV, obs_bytes=0)


@pytest.mark.parametrize("adapter", ["serial", "gymnasium-sync"])
def test_adapters_reset_after_episode_len(adapter):
    workload = Workload(ENV, 3, PolicySpec(), seed=0, env_kwargs={"obs_bytes": 16, "episode_len": 4})
    session = registry.get(adapter)().open(workload, {})
    try:
        assert session.obs.shape == (3, 16)
        for t in range(1, 4):
            assert session.step() == 3
            assert (session.obs[:, t] == t).all()
        session.step()  # the 4th step truncates: every env starts over within the same step
        assert (session.obs == 0).all()
    finally:
        session.close()


def test_cli_run_with_env_kwargs_and_envpool_dropped(cli_run):
    run = cli_run(["run", "--adapter", "serial", "--adapter", "envpool-sync", "--adapter", "envpool-async",
                   "--env", ENV, "--env-kwarg", "step_cost_us=5", "--env-kwarg", "obs_bytes=128",
                   "--env-kwarg", "episode_len=7", "--num-envs", "4", *TINY])
    assert run.rc == 0
    serial = run.row("serial")
    assert serial["status"] == "ok", serial.get("error")
    assert serial["env_kwargs"] == {"step_cost_us": 5.0, "obs_bytes": 128, "episode_len": 7}
    assert serial["env_steps"] > 0 and serial["env_steps"] % 4 == 0
    assert serial["frames"] == serial["env_steps"] * serial["frameskip"]
    assert "obs_bytes=128" in serial["cell_id"]
    assert [r["adapter"] for r in run.rows] == ["serial"]  # EnvPool's cells left the plan: no row
    assert "rlbench: 2 cells dropped: envpool has no native rlbench/Synthetic-v0\n" in run.stderr
    assert {(d["cell_id"].split("/")[0], d["reason"]) for d in run.env["dropped"]} == {
        (name, "envpool has no native rlbench/Synthetic-v0") for name in ("envpool-sync", "envpool-async")}
    assert not list((run.out / "logs").glob("*envpool*"))  # decided before any process ran


def test_step_cost_is_cpu_time_so_oversubscription_gets_nothing_for_free():
    """Two processes sharing one core each burn 100 ms: together they need >= 200 ms of wall time.
    A wall-clock busy-wait would let both finish in ~100 ms while preempted, so more processes than
    cores would make a strategy look faster than the machine can be."""
    import multiprocessing as mp
    import os
    import time

    from rlbench.busy import busy_wait_us

    def burn(cpu):
        os.sched_setaffinity(0, {cpu})
        busy_wait_us(100_000)

    cpu = min(os.sched_getaffinity(0))
    procs = [mp.get_context("fork").Process(target=burn, args=(cpu,)) for _ in range(2)]
    t0 = time.perf_counter()
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    assert time.perf_counter() - t0 >= 0.2
