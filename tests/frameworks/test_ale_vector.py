"""ale-vector (ALE's own C++ vector env, ale_py.vector_env.AtariVectorEnv): listed with its options, refused up
front where it cannot run, raced by tune in sync and half batches; it counts each transition once (its next-step
resets are not transitions), its transitions are EnvPool's Atari transitions under the same actions, and a sync
and an async cell give ok rows whose env steps are units x batch_size."""
import numpy as np
import pytest
from support import run_cli_subprocess, sweep, write_suite

from rlbench import registry
from rlbench.workload import Workload

pytest.importorskip("ale_py")

NAME = "ale-vector"
SEED = 3
ATARI_ONLY = "ale-vector runs ALE's Atari games only (<Game>-v5, e.g. Pong-v5, or ALE's own id, e.g. ALE/Pong-v5), not "


def _cls():
    return registry.get(NAME)


def _open(num_envs, **given):
    cls = _cls()
    return cls().open(Workload("Pong-v5", num_envs, seed=SEED, frameskip=4), cls.resolve_options(given))


def test_listed_and_available_with_its_options():
    cls = _cls()
    assert cls.kind == "vector_env" and cls.requires == ("ale_py",) and cls().available() is None
    assert cls.resolve_options({}) == {"batch_size": 0, "num_threads": 0, "thread_affinity": False}
    with pytest.raises(ValueError, match=r"^option batch_size=-1 must be an integer >= 0$"):
        cls.resolve_options({"batch_size": -1})


@pytest.mark.parametrize("env_id, num_envs, given, reason", [
    ("CartPole-v1", 4, {}, f"{ATARI_ONLY}CartPole-v1"),
    ("rlbench/Frames-v0", 4, {}, f"{ATARI_ONLY}rlbench/Frames-v0"),
    ("ALE/Pong-v5", 4, {}, None),
    ("Pong-v5", 4, {"batch_size": 8}, "ale-vector needs batch_size <= num_envs (num_envs=4, batch_size=8)"),
    ("Pong-v5", 4, {}, None),
    ("Pong-v5", 4, {"batch_size": 2, "num_threads": 2}, None),
    ("Breakout-v5", 1, {}, None),
])
def test_refused_up_front_in_one_line(env_id, num_envs, given, reason):
    cls = _cls()
    assert cls().supports(Workload(env_id, num_envs), cls.resolve_options(given)) == reason


@pytest.mark.parametrize("env_kwargs, reason", [
    ({"obs_type": "ram"}, "ale-vector steps screens, not obs_type='ram' (ALE/Pong-v5)"),
    ({"frameskip": (2, 5)}, "ale-vector needs a fixed frameskip, not (2, 5) (ALE/Pong-v5)"),
    ({"mode": 1}, "ale-vector has no mode argument (ALE/Pong-v5)"),
    ({"obs_type": "grayscale", "repeat_action_probability": 0.0}, None),
])
def test_alies_own_id_is_refused_where_its_arguments_are_not_atari_vector_envs(env_kwargs, reason):
    cls = _cls()
    assert cls().supports(Workload("ALE/Pong-v5", 2, env_kwargs=env_kwargs), cls.resolve_options({})) == reason


def test_alies_own_id_steps_as_gymnasium_makes_it():
    """ALE/Pong-v5 as `gymnasium.make` builds it (the raw 210x160 RGB screen, frameskip 4 without max-pooling, no
    no-ops; sticky actions off here, their draws being each library's own): the same observations, rewards and
    episode ends under the same actions, and its frames counted 4 a step as for rlbench's Pong-v5."""
    import gymnasium as gym

    from rlbench.envs import env_info, frameskip_of
    workload = Workload("ALE/Pong-v5", 1, seed=SEED, frameskip=4, env_kwargs={"repeat_action_probability": 0.0})
    assert frameskip_of(env_info("ALE/Pong-v5"), {}) == 4
    cls = _cls()
    session = cls().open(workload, cls.resolve_options({}))
    env = gym.make("ALE/Pong-v5", repeat_action_probability=0.0)
    obs, _ = env.reset(seed=SEED)
    rng = np.random.default_rng(0)
    try:
        assert session.obs.shape == (1, 210, 160, 3)
        np.testing.assert_array_equal(session.obs[0], obs)
        for _ in range(300):
            action = int(rng.integers(env.action_space.n))
            session.policy = lambda o, a=action: np.array([a])
            assert session.step() == 1
            obs, reward, terminated, truncated, _ = env.step(action)
            np.testing.assert_array_equal(session.obs[0], obs)
            assert not (terminated or truncated)
    finally:
        session.close()
        env.close()


def test_tune_races_sync_and_half_batches_and_the_snippet_is_the_call():
    cls = _cls()
    assert cls().tune_space(16, 4) == [{"num_threads": 4}, {"batch_size": 8, "num_threads": 4}]
    assert cls().tune_space(2, 4) == [{"num_threads": 2}, {"batch_size": 1, "num_threads": 1}]
    assert cls().tune_space(1, 2) == [{"num_threads": 1}]
    snippet = cls().snippet(Workload("SpaceInvaders-v5", 8), cls.resolve_options({"batch_size": 4,
                                                                                  "num_threads": 2}))
    assert snippet.startswith("ale_py.vector_env.AtariVectorEnv('space_invaders', num_envs=8, batch_size=4, "
                              "num_threads=2, ")
    for part in ("frameskip=4", "grayscale=True", "img_height=84", "stack_num=4", "noop_max=30",
                 "reward_clipping=False", "episodic_life=False", "use_fire_reset=False",
                 "repeat_action_probability=0.0", "max_num_frames_per_episode=108000", "send(actions)"):
        assert part in snippet
    assert "step(actions)" in cls().snippet(Workload("Pong-v5", 8), cls.resolve_options({}))


def _fixed_starts(monkeypatch, module, **changes):
    """The module's envpool_kwargs with `changes`: noop_max=1 and use_fire_reset=True give both libraries one fixed
    start (no no-op drawn: ALE draws 0 to noop_max - 1 no-ops, EnvPool 1 to noop_max minus the fire frame)."""
    original = module.envpool_kwargs
    monkeypatch.setattr(module, "envpool_kwargs",
                        lambda env_id: {**original(env_id), "noop_max": 1, "use_fire_reset": True, **changes})


@pytest.mark.parametrize("num_envs, batch_size", [(3, 0), (4, 2), (5, 2)])
def test_counts_transitions_not_its_auto_reset_steps(monkeypatch, num_envs, batch_size):
    """Episodes cut at 10 env steps (40 frames, no no-ops): every env's results are its reset, 10 transitions, its
    reset, ... so the transitions among any results are known. ALE returns the reset one step after the episode's
    last (reset() returns batch_size envs; async, the others' resets come through recv()): they are not counted, and
    the policy is told that their observations start an episode."""
    import adapters.ale_vector as module
    _fixed_starts(monkeypatch, module, max_episode_steps=10, use_fire_reset=False)
    session = _open(num_envs, batch_size=batch_size, num_threads=2)
    period = 11
    position = np.zeros(num_envs, int)
    position[session.ids] = 1                    # the results reset() returned: position 0 of each of those envs
    batch = batch_size or num_envs
    seen = []

    def act(obs, starts, env_ids):
        seen.append((np.array(starts), np.array(env_ids)))
        return np.zeros(len(obs), np.int64)
    session.policy, session.recurrent = act, True
    counted = expected = 0
    try:
        for _ in range(120):
            counted += session.step()
            ids = session.ids
            assert len(ids) == batch and len(set(ids.tolist())) == batch
            resets = position[ids] % period == 0
            np.testing.assert_array_equal(session.starts, resets)
            expected += batch - int(resets.sum())
            position[ids] += 1
    finally:
        session.close()
    assert counted == expected and expected < 120 * batch
    assert seen[0][0].all()                      # reset()'s observations start episodes
    assert sum(int(s.sum()) for s, _ in seen[1:]) >= num_envs * 3   # each env reset again and again


@pytest.mark.parametrize("actions_dtype", [np.int64, np.int32, np.uint8])
def test_any_integer_actions_are_sent(actions_dtype):
    session = _open(2, num_threads=1)
    session.policy = lambda obs: np.ones(len(obs), actions_dtype)
    try:
        assert session.step() == 2 and session.obs.shape == (2, 4, 84, 84) and session.obs.dtype == np.uint8
    finally:
        session.close()


def _replay(actions):
    """A policy answering each call with the next row of `actions`, whatever it observes."""
    rows = iter(actions)
    return lambda obs: next(rows)


def _recorded(session):
    """Every (obs, reward, terminated, truncated) the session's env returns."""
    out, step = [], session.env.step

    def spy(actions):
        result = step(actions)
        out.append(tuple(np.array(x) for x in result[:4]))
        return result
    session.env.step = spy
    return out


def test_its_transitions_are_envpools_under_the_same_actions(monkeypatch):
    """Both start from one fixed state (no no-op drawn: ALE draws 0 to noop_max - 1 no-ops and EnvPool 1 to
    noop_max, from different generators, so with noops on they cannot agree; with use_fire_reset both press FIRE for
    one frame instead; sticky actions are off in rlbench's Atari). Then for 1000 steps of the same random actions
    (both episodes end, by the score, at steps 824 and 872) rewards, terminations, truncations and the counts are the
    same, and so is every observation but for two differences: ALE's stack starts with zero frames where EnvPool
    repeats the reset frame (equal 3 steps after a reset), and the frame of the step that ends an episode (the
    emulator stops inside the skip, and the two pool its last frames differently: a few dozen pixels)."""
    pytest.importorskip("envpool")
    import adapters.ale_vector as ale_module
    import adapters.envpool as envpool_module
    _fixed_starts(monkeypatch, ale_module)
    _fixed_starts(monkeypatch, envpool_module)
    num_envs, steps = 2, 1000
    rng = np.random.default_rng(SEED)
    actions = rng.integers(0, 6, size=(steps, num_envs))
    runs = {}
    for name in (NAME, "envpool-sync"):
        cls = registry.get(name)
        session = cls().open(Workload("Pong-v5", num_envs, seed=SEED, frameskip=4), cls.resolve_options({}))
        first = np.array(session.obs)
        out = _recorded(session)
        session.policy = _replay(actions)
        try:
            counts = [session.step() for _ in range(steps)]
        finally:
            session.close()
        runs[name] = first, out, counts
    (ale_first, ale, ale_counts), (pool_first, pool, pool_counts) = runs[NAME], runs["envpool-sync"]
    np.testing.assert_array_equal(ale_first[:, -1], pool_first[:, -1])
    assert not ale_first[:, :-1].any()
    assert ale_counts == pool_counts and len(ale) == len(pool) == steps
    since_reset = np.zeros(num_envs, int)
    ended = 0
    for t, (a, p) in enumerate(zip(ale, pool)):
        for x, y in zip(a[1:], p[1:]):
            np.testing.assert_array_equal(x, y, err_msg=f"step {t}")
        done = p[2] | p[3]
        since_reset += 1
        for i in range(num_envs):
            if not done[i]:
                np.testing.assert_array_equal(a[0][i, -1], p[0][i, -1], err_msg=f"step {t} env {i}")
                if since_reset[i] >= 3:
                    np.testing.assert_array_equal(a[0][i], p[0][i], err_msg=f"step {t} env {i}")
        ended += int(done.sum())
        since_reset[done] = -1                   # the next step is the reset: its frame starts a new stack
    last = int((pool[-1][2] | pool[-1][3]).sum())   # an episode ending on the last step has not been reset yet
    assert ended >= 2 and sum(ale_counts) == steps * num_envs - (ended - last)


def test_a_sync_and_an_async_cell_run_ok_and_count_units_times_batch(tmp_path):
    suite = write_suite(tmp_path, sweep([NAME], envs=["Pong-v5"], num_envs=(4,))
                        + sweep([NAME], envs=["Pong-v5"], num_envs=(4,))
                        + "options.ale-vector = { batch_size = [2], num_threads = [2] }\n")
    run = run_cli_subprocess(["run", str(suite)], out=tmp_path / "run")
    assert run.rc == 0, run.stderr[-2000:]
    rows = {r["batch_size"]: r for r in run.rows}
    assert set(rows) == {4, 2}
    for batch, row in rows.items():
        assert row["status"] == "ok" and not row.get("error"), row.get("error")
        # a Pong episode lasts hundreds of steps: none ends in the window, so every env stepped is one transition,
        # but async, the resets of the envs reset() did not return come through recv() whenever those envs are
        # among the first done: up to num_envs - batch of them may land in the window, uncounted
        assert row["units"] >= 1
        assert row["units"] * batch - (4 - batch) <= row["env_steps"] <= row["units"] * batch
        assert row["frames"] == row["env_steps"] * 4
    assert rows[2]["workers"] == 2
