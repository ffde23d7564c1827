"""mujoco-rollout: listed and refused up front where it cannot run; its transitions are gymnasium's MuJoCo v4
transitions under the same actions (same model, frameskip, termination, time limit and resets),
counted as gymnasium counts them; more pool threads change nothing but the speed; and a run gives ok rows
whose env steps are units x num_envs x chunk."""
import warnings
from pathlib import Path

import numpy as np
import pytest
from support import run_cli_subprocess, sweep, write_suite

from rlbench import registry
from rlbench.workload import Workload, parse_policy

NAME = "mujoco-rollout"
MODELS = "Ant-v4, HalfCheetah-v4, Hopper-v4, Humanoid-v4, InvertedPendulum-v4, Swimmer-v4, Walker2d-v4"
SEED = 3


def _cls():
    return registry.get(NAME)


def _open(env_id, num_envs, **given):
    cls = _cls()
    return cls().open(Workload(env_id, num_envs, seed=SEED, frameskip=5), cls.resolve_options(given))


def _gym(env_id):
    import gymnasium as gym
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # v4 is "out of date": it is the env rlbench and EnvPool share
        return gym.make(env_id)


def _spy(session):
    """Keeps every batch of actions the session's own policy gives."""
    sent, act = [], session.policy

    def spy(obs):
        actions = np.array(act(obs))
        sent.append(actions)
        return actions
    session.policy = spy
    return sent


def test_listed_and_available_with_its_options():
    cls = _cls()
    assert cls.kind == "vector_env" and set(cls.requires) == {"mujoco", "gymnasium"}
    assert cls().available() is None
    assert cls.resolve_options({}) == {"num_threads": 0, "chunk": 1, "solver": "model"}
    with pytest.raises(ValueError, match=r"^unknown option 'threads' for mujoco-rollout \(valid: num_threads, chunk, "
                                         r"solver\)$"):
        cls.resolve_options({"threads": 2})
    with pytest.raises(ValueError, match=r"^option chunk=0 must be an integer >= 1$"):
        cls.resolve_options({"chunk": 0})


@pytest.mark.parametrize("env_id, num_envs, given, reason", [
    ("CartPole-v1", 4, {}, f"mujoco-rollout runs gymnasium's MuJoCo envs only ({MODELS}), not CartPole-v1"),
    ("Pendulum-v1", 4, {}, f"mujoco-rollout runs gymnasium's MuJoCo envs only ({MODELS}), not Pendulum-v1"),
    ("Ant-v4", 2, {"num_threads": 3}, "num_threads=3 > num_envs=2: mujoco.rollout hands each thread whole envs, "
                                      "so a thread would idle"),
    ("HalfCheetah-v4", 2, {"num_threads": 2, "chunk": 8}, None),
])
def test_refused_up_front_in_one_line(env_id, num_envs, given, reason):
    cls = _cls()
    assert cls().supports(Workload(env_id, num_envs), cls.resolve_options(given)) == reason


def test_tune_races_the_pool_sizes_and_the_snippet_is_the_call():
    cls = _cls()
    assert cls().tune_space(16, 4) == [{"num_threads": 4}, {"num_threads": 2}, {"num_threads": 1}]
    assert cls().tune_space(1, 2) == [{"num_threads": 1}]
    # the probe starts on the whole pool, as the adapter's default runs, not on the calling thread alone
    from rlbench.tuning.candidates import Space
    space = Space(Workload("Humanoid-v4", 16), ["mujoco-rollout"], max_envs=64, cpus=4)
    [(_, probe)] = space.probe_setting("mujoco-rollout", 16)
    assert probe.options["num_threads"] == 4
    snippet = cls().snippet(Workload("Ant-v4", 16), cls.resolve_options({"num_threads": 2, "chunk": 8}))
    assert "gymnasium.make('Ant-v4').unwrapped.model" in snippet
    assert "mujoco.rollout.Rollout(nthread=2)" in snippet and "nstep=40" in snippet


@pytest.mark.parametrize("env_id, chunk", [("Ant-v4", 1), ("HalfCheetah-v4", 5), ("Swimmer-v4", 3)])
def test_k_env_steps_are_gymnasiums_from_the_same_state_with_the_same_actions(env_id, chunk):
    """Each env starts where gymnasium's reset(seed=seed + i) starts it; K env steps later the states agree to
    the constraint solver's tolerance (rollout restarts its warm start at each call), and within the first call
    to the last bit."""
    num_envs, units = 2, 30 // chunk
    session = _open(env_id, num_envs, chunk=chunk, num_threads=2)
    sent = _spy(session)
    states = [session.state.copy()]
    for _ in range(units):
        assert session.step() == num_envs * chunk   # no episode ends within 30 steps from a reset
        states.append(session.state.copy())
    session.close()
    nq = session.nq
    for i in range(num_envs):
        env = _gym(env_id)
        obs, _ = env.reset(seed=SEED + i)
        data = env.unwrapped.data
        want = [np.concatenate([data.qpos, data.qvel])]
        for actions in sent:
            for _ in range(chunk):
                obs, _, terminated, truncated, _ = env.step(actions[i])
                assert not (terminated or truncated)
            want.append(np.concatenate([data.qpos, data.qvel]))
        env.close()
        got = np.stack(states)[:, i, 1:1 + nq + env.unwrapped.model.nv]
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_allclose(got[1], want[1], rtol=0, atol=1e-12)
        np.testing.assert_allclose(got, np.stack(want), rtol=0, atol=1e-6)
        np.testing.assert_allclose(session.obs[i], obs, rtol=0, atol=1e-6)   # gymnasium's observation vector


@pytest.mark.parametrize("env_id", ["Hopper-v4", "Walker2d-v4", "Swimmer-v4", "InvertedPendulum-v4"])
def test_the_observation_of_any_state_is_gymnasiums(env_id):
    """Fast states too, past Hopper's and Walker2d's clip of qvel to +-10 (random episodes end before they get
    there): the session's observation of a state is gymnasium's _get_obs at that state."""
    session = _open(env_id, 2)
    qpos, qvel = slice(1, 1 + session.nq), slice(1 + session.nq, 1 + session.nq + session.nv)
    rng = np.random.default_rng(SEED)
    session.state[:, qvel] = 30.0 * rng.standard_normal((2, session.nv))
    session.state[:, qpos] += 0.5 * rng.standard_normal((2, session.nq))
    obs = session._observe()
    session.close()
    env = _gym(env_id)
    env.reset(seed=SEED)
    for i in range(2):
        env.unwrapped.set_state(session.state[i, qpos], session.state[i, qvel])
        np.testing.assert_array_equal(obs[i], env.unwrapped._get_obs())
    env.close()


def _gymnasium_unit(session, envs, before, actions, chunk):
    """Each gymnasium env put in the session's state `before` a unit and stepped with its held actions until the
    unit ends or its episode does (then reset: the session's observation must be that reset's, exactly):
    (each env's last observation, env steps, resets)."""
    qpos, qvel = slice(1, 1 + session.nq), slice(1 + session.nq, 1 + session.nq + session.nv)
    observations, steps, resets = [], 0, 0
    for i, env in enumerate(envs):
        env.unwrapped.set_state(before[i, qpos], before[i, qvel])
        for _ in range(chunk):
            obs, _, terminated, truncated, _ = env.step(actions[i])
            steps += 1
            if terminated or truncated:
                obs, _ = env.reset()
                resets += 1
                np.testing.assert_array_equal(session.obs[i], obs)   # the same draws from the same generator
                break
        observations.append(obs)
    return observations, steps, resets


@pytest.mark.parametrize("env_id, chunk, units", [("Ant-v4", 1, 480), ("Ant-v4", 4, 120), ("HalfCheetah-v4", 7, 150),
                                                  ("Hopper-v4", 1, 120), ("Walker2d-v4", 3, 40),
                                                  ("InvertedPendulum-v4", 2, 40), ("Swimmer-v4", 7, 150)])
def test_terminations_time_limit_and_resets_are_gymnasiums_and_counted_as_it_counts(env_id, chunk, units):
    """Gymnasium is put in the session's state before every unit (so chaos cannot carry the solver's last-bit
    differences along an episode), steps the same held actions until its episode ends, and resets: the session
    must count the same transitions and reset to the same state. Ant's random episodes end by toppling within
    ~100 steps, Hopper's and Walker2d's within ~20 (height, pitch, Hopper's state range), InvertedPendulum's
    within ~5 (the pole past 0.2 rad); HalfCheetah's and Swimmer's by the time limit, at step 1000 = 142 x 7 + 6,
    inside the 143rd unit."""
    num_envs = 3
    session = _open(env_id, num_envs, chunk=chunk, num_threads=2)
    sent = _spy(session)
    envs = [_gym(env_id) for _ in range(num_envs)]
    for i, env in enumerate(envs):
        env.reset(seed=SEED + i)
    resets, counts = 0, []
    for _ in range(units):
        before = session.state.copy()
        counts.append(session.step())
        observations, expected, reset = _gymnasium_unit(session, envs, before, sent[-1], chunk)
        resets += reset
        for i, obs in enumerate(observations):
            np.testing.assert_allclose(session.obs[i], obs, rtol=0, atol=1e-6)
        assert counts[-1] == expected
    session.close()
    for env in envs:
        env.close()
    if env_id not in ("HalfCheetah-v4", "Swimmer-v4"):
        assert resets >= 3
    else:
        assert resets == num_envs and counts[142] == num_envs * 6
        assert set(counts[:142] + counts[143:]) == {num_envs * chunk}


def test_a_recurrent_policy_is_told_which_envs_were_reset(monkeypatch):
    """A recurrent user policy (a state per env, zeroed where `starts` says) is called with every env starting,
    then with exactly the envs the last unit reset (their elapsed steps back at 0) starting."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "examples"))
    cls = _cls()
    workload = Workload("Ant-v4", 3, parse_policy("toyenvs.policies:recurrent_linear"), seed=SEED, frameskip=5)
    session = cls().open(workload, cls.resolve_options({"chunk": 2}))
    seen, act = [], session.policy.fn

    def spy(obs, starts, env_ids):
        seen.append((np.array(starts), session.elapsed_steps == 0))
        return act(obs, starts, env_ids)
    session.policy.fn = spy
    try:
        for _ in range(300):
            session.step()
    finally:
        session.close()
    assert all(np.array_equal(starts, reset) for starts, reset in seen)
    assert seen[0][0].all() and sum(starts.sum() for starts, _ in seen[1:]) >= 3   # Ant topples, resets


def test_more_pool_threads_give_the_same_states_as_the_calling_thread():
    runs = {}
    for threads in (1, 3):
        session = _open("Ant-v4", 6, chunk=3, num_threads=threads)
        counts = [session.step() for _ in range(40)]
        runs[threads] = (counts, session.state.copy(), session.info["workers"])
        session.close()
    assert runs[1][0] == runs[3][0]
    np.testing.assert_array_equal(runs[1][1], runs[3][1])
    assert (runs[1][2], runs[3][2]) == (1, 3)


def test_a_run_gives_ok_rows_whose_env_steps_are_units_x_envs_x_chunk(tmp_path):
    suite = write_suite(tmp_path, sweep([NAME], envs=["HalfCheetah-v4"], num_envs=(3,))
                        + 'options.mujoco-rollout = { chunk = [4], num_threads = [2] }\n'
                        + sweep([NAME], envs=["Ant-v4"], num_envs=(2,)))
    run = run_cli_subprocess(["run", str(suite)], out=tmp_path / "run")
    assert run.rc == 0, run.stderr[-2000:]
    rows = {r["env"]: r for r in run.rows}
    assert set(rows) == {"HalfCheetah-v4", "Ant-v4"}
    for env_id, num_envs, chunk, workers in (("HalfCheetah-v4", 3, 4, 2), ("Ant-v4", 2, 1, 2)):
        row = rows[env_id]
        assert row["status"] == "ok" and not row.get("error"), row.get("error")
        assert row["units"] >= 1 and row["env_steps"] == row["units"] * num_envs * chunk
        assert row["frames"] == row["env_steps"] * 5 and row["workers"] == workers


@pytest.mark.parametrize("chunk", [1, 3])
def test_humanoids_observation_is_gymnasiums_fields_and_all(chunk):
    """Humanoid-v4's observation adds cinert, cvel, qfrc_actuator and cfrc_ext of the last physics step (RK4's
    last stage, then mj_rnePostConstraint), which the session takes by mj_step itself: gymnasium, put in the
    session's state before every unit, gives the same observation, terminations and resets. The last physics step
    starts from a zero warm start where gymnasium carries its own, so PGS's unconverged contact forces differ a
    little (measured: qvel 1.3e-5, cfrc_ext 1.3e-2 of forces in the hundreds)."""
    num_envs = 3
    session = _open("Humanoid-v4", num_envs, chunk=chunk, num_threads=2)
    assert session.info["device_settings"]["physics"]["solver"] == "mjSOL_PGS"
    sent = _spy(session)
    envs = [_gym("Humanoid-v4") for _ in range(num_envs)]
    for i, env in enumerate(envs):
        obs, _ = env.reset(seed=SEED + i)
        np.testing.assert_array_equal(session.obs[i], obs)   # reset: mj_forward's fields, cfrc_ext zero
    resets, parts = 0, {"state": slice(0, 45), "cinert": slice(45, 185), "cvel": slice(185, 269),
                        "qfrc_actuator": slice(269, 292), "cfrc_ext": slice(292, 376)}
    worst = dict.fromkeys(parts, 0.0)
    for _ in range(60 // chunk):
        before = session.state.copy()
        made = session.step()
        observations, expected, reset = _gymnasium_unit(session, envs, before, sent[-1], chunk)
        resets += reset
        for i, obs in enumerate(observations):
            for name, part in parts.items():
                worst[name] = max(worst[name], float(np.abs(session.obs[i][part] - obs[part]).max()))
        assert made == expected
    session.close()
    for env in envs:
        env.close()
    assert session.obs.shape == (num_envs, 376) and resets >= 3   # a random humanoid falls within ~25 steps
    assert worst["state"] <= 1e-4 and worst["cinert"] <= 1e-4 and worst["cvel"] <= 1e-3, worst
    assert worst["qfrc_actuator"] <= 1e-9 and worst["cfrc_ext"] <= 1.0, worst


def test_humanoids_last_steps_do_not_depend_on_the_thread_count():
    runs = {}
    for threads in (1, 2):
        session = _open("Humanoid-v4", 4, chunk=2, num_threads=threads)
        counts = [session.step() for _ in range(20)]
        runs[threads] = (counts, session.state.copy(), session.obs.copy())
        session.close()
    assert runs[1][0] == runs[2][0]
    np.testing.assert_array_equal(runs[1][1], runs[2][1])
    np.testing.assert_array_equal(runs[1][2], runs[2][2])


def test_the_solver_option_steps_another_solver_and_the_row_says_so():
    session = _open("Humanoid-v4", 2, solver="newton")
    try:
        assert session.model.opt.solver == 2 and session.step() == 2
        physics = session.info["device_settings"]["physics"]
        assert physics["solver"] == "mjSOL_NEWTON" and physics["model_solver"] == "PGS"
    finally:
        session.close()
