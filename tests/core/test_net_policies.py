"""The torch policies users run (cnn, cnn:impala, large mlp, lstm): their parameter counts are known before
torch is imported, every stepping strategy acts with the same weights, and an lstm's state is carried per env
and zeroed where an episode starts, whichever way the strategy batches its envs."""
import gymnasium as gym
import numpy as np
import pytest
from support import TINY, run_cli

from adapters._kit.nets import actor_critic, actor_critic_params, policy_params, torso_of
from rlbench import registry
from rlbench.errors import Unsupported, UsageError
from rlbench.policy import make_policy
from rlbench.workload import Workload, parse_policy

torch = pytest.importorskip("torch")
FRAMES = "rlbench/Frames-v0"


def _spaces(env_id, **kwargs):
    env = registry_env(env_id, **kwargs)
    return env.observation_space, env.action_space


def registry_env(env_id, **kwargs):
    from rlbench.envs import make_env
    return make_env(env_id, **kwargs)


@pytest.mark.parametrize("env_id, kwargs, policy", [
    (FRAMES, {}, "cnn"), (FRAMES, {"layout": "hwc"}, "cnn"), (FRAMES, {"size": 64, "stack": 3}, "cnn:impala"),
    (FRAMES, {}, "lstm"), ("CartPole-v1", {}, "lstm:hidden=32x16"), ("CartPole-v1", {}, "mlp:hidden=1024x1024"),
])
def test_parameter_counts_known_without_torch_match_the_built_nets(env_id, kwargs, policy):
    obs_space, act_space = _spaces(env_id, **kwargs)
    spec = parse_policy(policy)
    built = make_policy(Workload(env_id, 2, spec, env_kwargs=kwargs), obs_space, act_space)
    assert sum(p.numel() for p in built.net.parameters()) == policy_params(spec, obs_space, act_space)
    if not spec.name == "lstm":
        torso = torso_of(spec, obs_space)
        assert sum(p.numel() for p in actor_critic(torso, 6).parameters()) == actor_critic_params(torso, 6)


def test_a_cnn_reads_channels_first_and_last_frames_alike():
    """The same frames as 4x84x84 and 84x84x4 give the same actions: the torso restores CHW itself."""
    chw, hwc = registry_env(FRAMES), registry_env(FRAMES, layout="hwc")
    first = [chw.reset(seed=3)[0]] + [chw.step(a)[0] for a in (1, 2, 3, 4)]
    last = [hwc.reset(seed=3)[0]] + [hwc.step(a)[0] for a in (1, 2, 3, 4)]
    np.testing.assert_array_equal(np.stack(first), np.stack(last).transpose(0, 3, 1, 2))
    acts = []
    for env, obs in ((chw, first), (hwc, last)):
        policy = make_policy(Workload(FRAMES, 5, parse_policy("cnn")), env.observation_space, env.action_space)
        _amplify(policy)
        acts.append(policy(np.stack(obs)))
    np.testing.assert_array_equal(acts[0], acts[1])
    assert len(set(acts[0])) > 1


def test_lstm_state_rows_follow_env_ids_and_are_zeroed_at_episode_starts():
    """A batch of env ids acts as those envs would alone; a start flag acts as a fresh state."""
    obs_space, act_space = _spaces(FRAMES)
    env = registry_env(FRAMES)
    frames = np.stack([env.reset(seed=1)[0]] + [env.step(a)[0] for a in range(7)])  # 8 observations

    def fresh():
        p = make_policy(Workload(FRAMES, 4, parse_policy("lstm")), obs_space, act_space)
        _amplify(p)
        return p

    batched, alone = fresh(), [fresh() for _ in range(4)]
    for t in range(2):  # every env acts twice, in batches of two by id
        for ids in ([3, 1], [0, 2]):
            obs = frames[[t * 4 + i for i in ids]]
            got = batched(obs, np.zeros(2, bool), np.array(ids))
            want = [alone[i](obs[j:j + 1], None, None)[0] for j, i in enumerate(ids)]
            np.testing.assert_array_equal(got, want)
    restarted = batched(frames[:4], np.ones(4, bool), None)
    np.testing.assert_array_equal(restarted, fresh()(frames[:4], None, None))


def test_bad_policies_are_refused_with_the_valid_choices():
    with pytest.raises(UsageError, match=r"unknown policy field 'hidden' for policy cnn \(valid: threads, device\)"):
        parse_policy("cnn:hidden=64")
    with pytest.raises(UsageError, match=r"device='tpu' must be cpu, cuda or cuda:N"):
        parse_policy("cnn:impala:device=tpu")
    assert parse_policy("cnn:impala:threads=2").label == "cnn:impala-cpu-t2"
    assert parse_policy("lstm").label == "lstm512-cpu-t1"  # R2D2's 512 units
    obs_space, act_space = _spaces("CartPole-v1")
    with pytest.raises(Unsupported, match=r"policy cnn needs image observations .* got Box\(4,\)"):
        make_policy(Workload("CartPole-v1", 2, parse_policy("cnn")), obs_space, act_space)


@pytest.mark.parametrize("adapter, policy", [("serial", "cnn"), ("tianshou-dummy", "lstm"), ("tianshou-subproc", "lstm")])
def test_a_network_run_records_its_policy_time_and_device(tmp_path, adapter, policy):
    run = run_cli(["run", "--adapter", adapter, "--env", FRAMES, "--num-envs", "2", "--policy", policy, *TINY],
                  tmp_path / "run")
    [row] = run.rows
    assert row["status"] == "ok", row.get("error")
    assert row["policy"] == parse_policy(policy).label and row["device"] == "cpu"
    assert 0 < row["policy_s"] < row["seconds"] and row["env_steps"] % 2 == 0


def _amplify(policy):
    """An untrained head picks nearly one action everywhere; scaled up, the features decide, so a
    strategy that fed the wrong observation or state would pick other actions."""
    head = policy.net.head if hasattr(policy.net, "head") else policy.net[-1]
    with torch.no_grad():
        head.weight.mul_(200.0)


# tianshou is left out here: importing its vector envs loads Ray into this process, whose threads make every
# later fork of the test runner crash-prone (see conftest's threaded_runtime); it runs in a cell below
STRATEGIES = [("serial", {}), ("gymnasium-sync", {}), ("gymnasium-async", {}), ("sb3-dummy", {}),
              ("rlpyt-serial", {"batch_T": 3}), ("rlpyt-cpu", {"batch_T": 3, "workers": 2}),
              ("rlpyt-gpu", {"batch_T": 3, "workers": 2}), ("rlpyt-alternating", {"batch_T": 3, "workers": 2})]


@pytest.mark.parametrize("policy", ["cnn", "lstm"])
def test_every_strategy_takes_the_same_actions_for_the_same_observations(policy):
    """Frames-v0 with 4-step episodes over 12 steps: each env's actions are the same under every strategy
    (the same weights in every worker, the lstm's state zeroed at each of the three episode starts)."""
    workload = Workload(FRAMES, 4, parse_policy(policy), seed=0, env_kwargs={"episode_len": 4, "n_actions": 4})
    seen = {}
    for adapter, options in STRATEGIES:
        cls = registry.get(adapter)
        opts = cls.resolve_options(options)
        assert cls().supports(workload, opts) is None
        session = cls().open(workload, opts)
        try:
            _amplify(session.policy)
            seen[adapter] = _actions(session, adapter, steps=12)
        finally:
            session.close()
    first = seen["serial"]
    assert first.shape == (12, 4) and len(np.unique(first)) > 1
    for adapter, actions in seen.items():
        np.testing.assert_array_equal(actions, first, err_msg=adapter)


def _actions(session, adapter, steps):
    """[steps, num_envs] actions: from the batch an rlpyt sampler writes, else as the policy returned them."""
    if adapter.startswith("rlpyt"):
        rows, count = [], 0
        while count < steps:
            assert session.step() == session.batch_T * 4
            rows.append(session.samples["act"].copy())
            count += session.batch_T
        return np.concatenate(rows)[:steps]
    recorded, policy = [], session.policy
    timed = policy.__call__

    def record(obs, *state):
        actions = timed(obs, *state)
        recorded.append(np.asarray(actions).copy())
        return actions
    session.policy = type("Recorder", (), {"__call__": staticmethod(record), "recurrent": policy.recurrent,
                                           "net": policy.net})()
    for _ in range(steps):
        assert session.step() == 4
    return np.stack(recorded)


@pytest.mark.parametrize("adapter", ["envpool-sync", "envpool-async"])
def test_envpool_batches_carry_each_envs_lstm_state(adapter):
    """EnvPool's async batches hold any envs: replayed one env at a time, each call's actions are the same."""
    pytest.importorskip("envpool")
    workload = Workload("Pong-v5", 4, parse_policy("lstm"), seed=0)
    cls = registry.get(adapter)
    session = cls().open(workload, cls.resolve_options({}))
    calls, inner = [], session.policy.fn

    def spy(obs, starts, env_ids):
        actions = inner(obs, starts, env_ids)
        calls.append((obs.copy(), None if starts is None else np.asarray(starts).copy(),
                      None if env_ids is None else np.asarray(env_ids).copy(), actions))
        return actions
    try:
        _amplify(session.policy)
        session.policy.fn = spy
        for _ in range(8):
            session.step()
    finally:
        session.close()
    obs_space, act_space = session.env.observation_space, session.env.action_space
    alone = [make_policy(Workload("Pong-v5", 1, parse_policy("lstm")), obs_space, act_space) for _ in range(4)]
    for p in alone:
        _amplify(p)
    for obs, starts, ids, actions in calls:
        ids = np.arange(len(obs)) if ids is None else ids
        starts = np.zeros(len(obs), bool) if starts is None else starts
        for j, i in enumerate(ids):
            assert alone[i](obs[j:j + 1], starts[j:j + 1], None)[0] == actions[j]
    if adapter == "envpool-async":  # the first batch: every env's first observation
        assert calls[0][1].all()


def test_frames_env_is_deterministic_given_seed_and_actions():
    a, b = registry_env(FRAMES, episode_len=3), registry_env(FRAMES, episode_len=3)
    oa, ob = a.reset(seed=5)[0], b.reset(seed=5)[0]
    np.testing.assert_array_equal(oa, ob)
    assert oa.shape == (4, 84, 84) and oa.dtype == np.uint8 and a.action_space == gym.spaces.Discrete(6)
    for action in (0, 5, 2):
        ra, rb = a.step(action), b.step(action)
        np.testing.assert_array_equal(ra[0], rb[0])
    assert ra[3] is True  # truncated at episode_len
    with pytest.raises(ValueError, match="layout='nchw'"):
        registry_env(FRAMES, layout="nchw")
