"""Learners that train end to end on a swappable vector env: `cleanrl-ppo` (ours, CleanRL-style) and
`sb3-ppo` (stable-baselines3) on dummy, subproc and EnvPool. A unit is one PPO iteration and returns
the transitions it collected; episode returns are counted the same way on every strategy (identical
for dummy and subproc with one seed); the policy actually learns; what cannot run says why; and the
shipped CI suite runs through the CLI."""
import importlib.util

import numpy as np
import pytest
from support import REPO, run_cli

from rlbench import registry
from rlbench.api import SESSION_METRICS, PolicySpec, Unsupported, Workload

MISSING = [m for m in ("torch", "envpool", "stable_baselines3") if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"not installed: {', '.join(MISSING)}")
MLP = PolicySpec("mlp", hidden=(64, 64))
VECS = ("dummy", "subproc", "envpool")


def _open(adapter, workload, **options):
    cls = registry.get(adapter)
    opts = cls.resolve_options(options)
    assert cls().supports(workload, opts) is None
    return cls().open(workload, opts)


def _units(adapter, vec, units, num_envs=2, num_steps=64, seed=0, **options):
    """(steps each unit returned, episode returns, episodes, unfinished return sum, session.info)."""
    session = _open(adapter, Workload("CartPole-v1", num_envs, MLP, seed=seed), vec=vec, num_steps=num_steps,
                    **options)
    try:
        made = [session.step() for _ in range(units)]
        ongoing = float(session.ep_ret.sum()) if hasattr(session, "ep_ret") else None
        episodes = getattr(session, "episodes", None)
        return made, session.episode_returns(), episodes, ongoing, session.info
    finally:
        session.close()


@pytest.mark.parametrize("vec", VECS)
def test_cleanrl_unit_is_one_rollout_of_every_env(vec):
    made, returns, episodes, ongoing, info = _units("cleanrl-ppo", vec, 2)
    assert info["batch_size"] == 2 * 64 and info["workers"] == (1 if vec == "dummy" else 2)
    assert 0 < episodes == len(returns) < 100
    if vec == "envpool":  # each finished episode costs its env one reset slot, which is no transition
        assert all(2 * 64 - episodes <= m < 2 * 64 for m in made)
    else:
        assert made == [2 * 64, 2 * 64]
    # CartPole pays 1 per transition: the episodes' returns add up to exactly the transitions made
    assert sum(returns) + ongoing == sum(made)
    assert all(r == int(r) and 8 <= r <= 500 for r in returns)


def test_cleanrl_dummy_and_subproc_train_identically():
    """Same seed, same env constructors, same SAME_STEP resets: the same episodes, bit for bit."""
    dummy = _units("cleanrl-ppo", "dummy", 3, num_envs=4, num_steps=32, seed=3)
    subproc = _units("cleanrl-ppo", "subproc", 3, num_envs=4, num_steps=32, seed=3)
    assert dummy[1] and dummy[1] == subproc[1]
    assert dummy[:3] == subproc[:3]


@pytest.mark.parametrize("vec", VECS)
def test_sb3_unit_is_one_learn_call(vec):
    made, returns, _, _, info = _units("sb3-ppo", vec, 2, num_steps=32)
    assert made == [64, 64] and info["batch_size"] == 64   # EnvPool's finished envs reset within the step
    assert returns and all(r == int(r) and 8 <= r <= 500 for r in returns)


def test_sb3_dummy_and_subproc_train_identically():
    dummy = _units("sb3-ppo", "dummy", 2, num_steps=32, seed=5)
    subproc = _units("sb3-ppo", "subproc", 2, num_steps=32, seed=5)
    assert dummy[1] and dummy[1] == subproc[1]


@pytest.mark.parametrize("adapter", ["cleanrl-ppo", "sb3-ppo"])
def test_metrics_over_a_window(adapter):
    import time
    session = _open(adapter, Workload("CartPole-v1", 2, MLP, seed=0), num_steps=32, num_minibatches=2,
                    update_epochs=2)
    try:
        session.step()
        session.metrics.reset()
        t0 = time.perf_counter()
        for _ in range(2):
            session.step()
        seconds = time.perf_counter() - t0
        got = session.metrics.read(seconds)
    finally:
        session.close()
    assert set(got) <= set(SESSION_METRICS)
    assert got["samples_per_s"] == pytest.approx(2 * 64 / seconds)
    assert got["updates_per_s"] == pytest.approx(2 * 2 * 2 / seconds)  # Adam steps: epochs x minibatches
    assert got["return_mean"] > 0 and got["time_to_target_s"] is None
    fracs = [got[k] for k in ("env_frac", "inference_frac", "learn_frac")]
    assert all(f > 0 for f in fracs) and sum(fracs) + got.get("transfer_frac", 0.0) <= 1.01
    if adapter == "cleanrl-ppo":   # the observations copied into its network's tensors, apart from inference
        assert 0 < got["transfer_frac"] < got["inference_frac"]


def test_cleanrl_time_to_target_counts_from_the_first_unit():
    session = _open("cleanrl-ppo", Workload("CartPole-v1", 2, MLP, seed=0), num_steps=32, target_return=10)
    try:
        first = session.step()
        got = session.metrics.read(1.0)
    finally:
        session.close()
    assert got["steps_to_target"] == first and 0 < got["time_to_target_s"] < 30


def test_cleanrl_learns_cartpole():
    """The suite's recipe (CleanRL's, 8 envs): the mean return of the last 100 episodes passes 195
    (CartPole-v0's "solved"; random play: ~22) within 80k env steps; seeds 0-5 take 37-43k, ~3 s."""
    session = _open("cleanrl-ppo", Workload("CartPole-v1", 8, MLP, seed=0), target_return=195)
    try:
        while session.env_steps < 80_000 and session.time_to_target is None:
            session.step()
        got = session.metrics.read(1.0)
    finally:
        session.close()
    assert got["steps_to_target"] is not None and got["return_mean"] >= 195, got
    assert got["steps_to_target"] == session.env_steps
    print(f"mean return 195 after {got['steps_to_target']} env steps, {got['time_to_target_s']:.1f} s")


@pytest.mark.skipif(importlib.util.find_spec("ale_py") is None, reason="not installed: ale-py")
@pytest.mark.parametrize("vec", VECS)
def test_cleanrl_on_atari_trains_the_nature_cnn(vec):
    """Pong's [4, 84, 84] uint8 frames, built the same way by gymnasium + ale-py and by EnvPool, go through
    ppo_atari.py's Nature CNN."""
    session = _open("cleanrl-ppo", Workload("Pong-v5", 2, MLP, seed=0), vec=vec, num_steps=8, num_minibatches=2,
                    update_epochs=1)
    try:
        assert tuple(session.buf_obs.shape) == (8, 2, 4, 84, 84) and session.buf_obs.dtype.is_floating_point is False
        assert session.clip_coef == 0.1 and session.clip_reward
        assert type(session.net).__name__ == "NatureCNN"
        before = [p.detach().clone() for p in session.net.parameters()]
        assert session.step() == 16  # no Pong episode ends within 8 steps
        assert session.updates == 2 and any(not p.equal(q) for p, q in zip(before, session.net.parameters()))
    finally:
        session.close()


@pytest.mark.parametrize("adapter", ["cleanrl-ppo", "sb3-ppo"])
@pytest.mark.parametrize("workload,options,reason", [
    (Workload("CartPole-v1", 4), {}, "needs policy mlp"),
    (Workload("rlbench/Synthetic-v0", 4, MLP), {"vec": "envpool"}, "envpool has no native rlbench/Synthetic-v0"),
    (Workload("CartPole-v1", 3, MLP), {"num_steps": 5}, "must be a multiple of num_minibatches=4"),
])
def test_what_cannot_run_says_why(adapter, workload, options, reason):
    cls = registry.get(adapter)
    got = cls().supports(workload, cls.resolve_options(options))
    assert got and reason in got


@pytest.mark.parametrize("adapter, workload, options, reason", [
    ("sb3-ppo", Workload("Ant-v4", 4, MLP), {}, "sb3-ppo samples a categorical: Ant-v4 has continuous actions"),
    ("cleanrl-ppo", Workload("Ant-v4", 4, MLP), {}, None),
    ("cleanrl-ppo", Workload("CheetahRun-v1", 4, MLP), {"vec": "envpool"}, None),
    ("cleanrl-ppo", Workload("CheetahRun-v1", 4, MLP), {"vec": "subproc"},
     "CheetahRun-v1 is a DeepMind Control task, which EnvPool runs and gymnasium does not: vec=envpool "
     "(got vec=subproc)"),
])
def test_continuous_actions_train_a_gaussian_in_cleanrl_only(adapter, workload, options, reason):
    cls = registry.get(adapter)
    assert cls().supports(workload, cls.resolve_options(options)) == reason


GAUSSIAN = {"num_steps": 32, "num_minibatches": 2, "update_epochs": 2}


def _gaussian_units(env_id, vec, units, num_envs=2, seed=0):
    session = _open("cleanrl-ppo", Workload(env_id, num_envs, MLP, seed=seed), vec=vec, **GAUSSIAN)
    try:
        before = [p.detach().clone() for p in session.net.parameters()]
        made = [session.step() for _ in range(units)]
        changed = any(not p.equal(q) for p, q in zip(before, session.net.parameters()))
        return made, session, changed
    finally:
        session.close()


@pytest.mark.parametrize("vec", VECS)
def test_cleanrl_on_continuous_actions_samples_a_gaussian_within_the_bounds(vec):
    """ppo_continuous_action.py's recipe on HalfCheetah-v4: a Gaussian (learned log std, one per action
    dimension), actions clipped to the box as they go to the env, observations normalized and clipped, rewards
    scaled by the running std of the discounted return; HalfCheetah never ends early, so every slot counts."""
    made, session, changed = _gaussian_units("HalfCheetah-v4", vec, 2)
    assert made == [64, 64] and session.gaussian and changed
    assert tuple(session.buf_actions.shape) == (32, 2, 6) and session.buf_actions.dtype.is_floating_point
    assert tuple(session.net.logstd.shape) == (1, 6) and session.ent_coef == 0.0
    assert session.norm.obs_rms.count > 64 and abs(session.obs).max() <= 10.0
    assert abs(session.rewards).max() <= 10.0 and session.rewards.std() > 0


def test_cleanrl_gaussian_dummy_and_subproc_train_identically():
    dummy = _gaussian_units("HalfCheetah-v4", "dummy", 2, seed=4)[1]
    subproc = _gaussian_units("HalfCheetah-v4", "subproc", 2, seed=4)[1]
    assert dummy.buf_actions.equal(subproc.buf_actions) and (dummy.rewards == subproc.rewards).all()


def test_cleanrl_on_a_deepmind_control_task_flattens_envpools_dict_observation():
    """EnvPool's CheetahRun-v1 observes a Dict (position 8, velocity 9): the network takes it flattened."""
    made, session, changed = _gaussian_units("CheetahRun-v1", "envpool", 2)
    assert made == [64, 64] and changed and session.obs.shape == (2, 17)   # 1000-step episodes: no reset slot
    assert tuple(session.buf_obs.shape) == (32, 2, 17)


@pytest.mark.slow
def test_cleanrl_gaussian_learns_inverted_pendulum():
    """CleanRL's continuous recipe (2048 steps per iteration, 32 minibatches, 10 epochs, lr 3e-4) on EnvPool's
    InvertedPendulum-v4, 4 envs: random play keeps the pole up ~8 steps; the mean return passes 500 within 100k
    env steps (measured: 807 at 100k, ~45 s)."""
    session = _open("cleanrl-ppo", Workload("InvertedPendulum-v4", 4, MLP, seed=1), vec="envpool", num_steps=512,
                    num_minibatches=32, update_epochs=10, lr=3e-4, total_timesteps=100_000, target_return=500)
    try:
        while session.env_steps < 100_000 and session.time_to_target is None:
            session.step()
    finally:
        session.close()
    assert session.steps_to_target is not None, session.return_mean()


def _after_one_update(adapter, **options):
    """(the first rollout's rewards, the network's parameters after its update) on a seeded CartPole."""
    session = _open(adapter, Workload("CartPole-v1", 2, MLP, seed=2), vec="dummy", num_steps=32, **options)
    try:
        session.step()
        if adapter == "sb3-ppo":
            net, rewards = session.model.policy, session.model.rollout_buffer.rewards.copy()
            assert (session.model.gamma, session.model.gae_lambda) == (options.get("gamma", 0.99),
                                                                      options.get("gae_lambda", 0.95))
        else:
            net, rewards = session.net, session.rewards.copy()
        return rewards, [p.detach().clone() for p in net.parameters()]
    finally:
        session.close()


@pytest.mark.parametrize("adapter", ["cleanrl-ppo", "sb3-ppo"])
def test_gamma_and_gae_lambda_are_the_recipes(adapter):
    """The same rollout, a different discount: the advantages, so the update, differ (Pendulum-v1's recipe is
    gamma 0.9; CartPole's 0.99, 0.95 stay the defaults)."""
    rewards, default = _after_one_update(adapter)
    rewards_short, short = _after_one_update(adapter, gamma=0.5, gae_lambda=0.8)
    assert (rewards == rewards_short).all()
    assert any(not p.equal(q) for p, q in zip(default, short))
    with pytest.raises(ValueError, match="option gamma=1.5 must be a finite number >= 0 and <= 1"):
        registry.get(adapter).resolve_options({"gamma": 1.5})


def test_a_gaussians_reward_scale_follows_gamma():
    """ppo_continuous_action.py divides rewards by the std of the discounted return: its discount is gamma's."""
    scaled = [_open("cleanrl-ppo", Workload("HalfCheetah-v4", 2, MLP, seed=4), vec="dummy", gamma=g, **GAUSSIAN)
              for g in (0.99, 0.5)]
    try:
        for session in scaled:
            session.step()
        assert scaled[0].norm.gamma == 0.99 and scaled[1].norm.gamma == 0.5
        assert (scaled[0].buf_actions.equal(scaled[1].buf_actions)           # the same first rollout,
                and not np.allclose(scaled[0].rewards, scaled[1].rewards))    # scaled otherwise
    finally:
        for session in scaled:
            session.close()


@pytest.mark.parametrize("adapter", ["cleanrl-ppo", "sb3-ppo"])
def test_out_of_range_options_are_refused_before_supports(adapter):
    with pytest.raises(ValueError, match="option update_epochs=0 must be an integer >= 1"):
        registry.get(adapter).resolve_options({"update_epochs": 0})


def test_a_bad_vec_names_the_choices():
    with pytest.raises(ValueError, match="valid: dummy, subproc, envpool"):
        registry.get("cleanrl-ppo").resolve_options({"vec": "ray"})


def test_no_cuda_is_unsupported():
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(Unsupported, match="no CUDA device"):
        _open("cleanrl-ppo", Workload("CartPole-v1", 2, PolicySpec("mlp", device="cuda")), num_steps=8)


@pytest.mark.slow
def test_train_cpu_suite_runs_through_the_cli(tmp_path):
    run = run_cli(["run", str(REPO / "suites" / "train-cpu.toml"), "--repeats", "1", "--duration", "0.3",
                   "--warmup", "0"], tmp_path / "run")
    assert run.rc == 0
    assert {r["adapter"] for r in run.rows} == {"cleanrl-ppo", "sb3-ppo"}
    assert {r["options"]["vec"] for r in run.rows if r["adapter"] == "cleanrl-ppo"} == set(VECS)
    for row in run.rows:
        assert row["status"] == "ok", row
        assert row["kind"] == "learner" and row["steps_per_s"] > 0 and row["samples_per_s"] > 0
        assert row["updates_per_s"] > 0 and row["learn_frac"] > 0
