"""The torch policies users run (cnn, cnn:impala, large mlp, lstm): their parameter counts are known before
torch is imported, every stepping strategy acts with the same weights, and an lstm's state is carried per env
and zeroed where an episode starts, whichever way the strategy batches its envs."""
import sys

import gymnasium as gym
import numpy as np
import pytest
from support import REPO, TINY, run_cli

from adapters._kit.nets import actor_critic, actor_critic_params, flat_obs, policy_params, torso_of
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
    _assert_same_actions(workload, STRATEGIES, steps=12)


def _assert_same_actions(workload, strategies, steps: int):
    """Each env's actions over `steps` are the serial loop's under every strategy (its policy amplified, so that
    distinct observations give distinct actions)."""
    seen = {}
    for adapter, options in strategies:
        cls = registry.get(adapter)
        opts = cls.resolve_options(options)
        assert cls().supports(workload, opts) is None, adapter
        session = cls().open(workload, opts)
        try:
            _amplify(session.policy)
            seen[adapter] = _actions(session, adapter, steps=steps)
        finally:
            session.close()
    first = seen["serial"]
    assert first.shape == (steps, workload.num_envs) and len(np.unique(first)) > 1
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


# -- Dict and Tuple observations with images (a first-person shooter's screen beside its game variables) --------

def _box(shape, dtype=np.uint8):
    return gym.spaces.Box(0, 255, shape, dtype) if dtype == np.uint8 else gym.spaces.Box(0.0, 1.0, shape, dtype)


SHOOTER = gym.spaces.Dict({"screen": _box((240, 320, 3)), "vars": gym.spaces.Box(-1.0, 1.0, (5,), np.float32)})


def _batch(space, n, seed=0):
    """n observations of `space` batched as the vector envs batch them (a dict or tuple of arrays)."""
    from gymnasium.vector.utils import concatenate, create_empty_array
    space.seed(seed)
    return concatenate(space, [space.sample() for _ in range(n)], create_empty_array(space, n))


def _net_policy(policy, space, actions=6):
    built = make_policy(Workload("CartPole-v1", 4, parse_policy(policy)), space, gym.spaces.Discrete(actions))
    _amplify(built)
    return built


@pytest.mark.parametrize("policy", ["cnn", "cnn:impala", "lstm:hidden=32"])
def test_a_dict_with_a_240x320_screen_gets_a_cnn_per_image_and_the_rest_concatenated(policy):
    """SB3's CombinedExtractor: the screen through the CNN (its flatten size from the real 240x320, any aspect
    ratio), the 5 game variables as they are, then the head; one action per env, parameters known before torch."""
    spec = parse_policy(policy)
    torso = torso_of(spec, SHOOTER)
    assert [e.path for e in torso.images] == ["screen"] and torso.images[0].frame == (3, 240, 320, "hwc")
    out = {"cnn": 512, "cnn:impala": 256, "lstm": 512}[spec.name]
    assert torso.feed_width == out + 5 and torso.images[0].scale == 1 / 255
    built = _net_policy(policy, SHOOTER)
    assert sum(p.numel() for p in built.net.parameters()) == policy_params(spec, SHOOTER, gym.spaces.Discrete(6))
    actions = built(_batch(SHOOTER, 4)) if spec.name != "lstm" else built(_batch(SHOOTER, 4), None, None)
    assert actions.shape == (4,) and set(actions.tolist()) <= set(range(6))
    if spec.name != "lstm":
        net = actor_critic(torso, 6)
        assert sum(p.numel() for p in net.parameters()) == actor_critic_params(torso, 6)
        logits, values = net(torch.as_tensor(flat_obs(_batch(SHOOTER, 3))))
        assert logits.shape == (3, 6) and values.shape == (3,)


def test_a_tuple_with_an_image_and_a_discrete_part():
    space = gym.spaces.Tuple((_box((4, 40, 52)), gym.spaces.Discrete(7), gym.spaces.Box(-1.0, 1.0, (2,), np.float32)))
    for policy in ("cnn", "cnn:impala"):
        torso = torso_of(parse_policy(policy), space)
        assert [(e.path, e.size) for e in torso.entries] == [("0", 4 * 40 * 52), ("1", 1), ("2", 2)]
        assert torso.images[0].frame == (4, 40, 52, "chw")
        assert _net_policy(policy, space)(_batch(space, 5)).shape == (5,)


def test_a_text_mission_beside_the_screen_is_left_out_of_the_input():
    """MiniGrid with its pixel wrapper: a screen, a direction and a text mission (a space with no shape). The
    networks take the screen and the direction; the mission's strings, batched as a tuple, enter nothing."""
    space = gym.spaces.Dict({"direction": gym.spaces.Discrete(4), "image": _box((56, 56, 3)),
                             "mission": gym.spaces.Text(32)})
    torso = torso_of(parse_policy("cnn"), space)
    assert [(e.path, e.size) for e in torso.entries] == [("direction", 1), ("image", 56 * 56 * 3)]
    batch = _batch(space, 3)
    assert isinstance(batch["mission"], tuple) and flat_obs(batch).shape == (3, 1 + 56 * 56 * 3)
    assert _net_policy("cnn", space)(batch).shape == (3,)


def test_random_tuple_actions_reach_each_env_as_tuples():
    """A multi-agent env's Tuple action (highway-env's asserts a tuple): one tuple per env, not a row of an
    array, seeded like every random policy."""
    actions = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Discrete(5)))
    box = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    act = make_policy(Workload("CartPole-v1", 4, parse_policy("random"), seed=3), box, actions)
    batch = act(np.zeros((4, 2), np.float32))
    assert len(batch) == 4 and all(isinstance(a, tuple) and actions.contains(a) for a in batch)
    again = make_policy(Workload("CartPole-v1", 4, parse_policy("random"), seed=3), box, actions)
    assert [tuple(map(int, a)) for a in again(np.zeros((4, 2), np.float32))] == [tuple(map(int, a)) for a in batch]


@pytest.mark.parametrize("policy", ["cnn", "cnn:impala"])
def test_channels_first_and_last_and_uint8_and_float_images_act_alike(policy):
    """The same screens as 3x48x64 or 48x64x3, as uint8 or as floats in [0, 1], give the same actions: the channel
    axis is the short end and uint8 pixels are scaled by 1/255, as SB3's preprocessing does."""
    hwc = gym.spaces.Dict({"screen": _box((48, 64, 3)), "vars": gym.spaces.Box(-1.0, 1.0, (3,), np.float32)})
    batch = _batch(hwc, 6, seed=1)
    chw_space = gym.spaces.Dict({"screen": _box((3, 48, 64)), "vars": hwc["vars"]})
    float_space = gym.spaces.Dict({"screen": _box((48, 64, 3), np.float32), "vars": hwc["vars"]})
    chw = {"screen": batch["screen"].transpose(0, 3, 1, 2).copy(), "vars": batch["vars"]}
    floats = {"screen": batch["screen"].astype(np.float32) * np.float32(1 / 255), "vars": batch["vars"]}
    want = _net_policy(policy, hwc)(batch)
    assert len(set(want.tolist())) > 1
    np.testing.assert_array_equal(_net_policy(policy, chw_space)(chw), want)
    np.testing.assert_array_equal(_net_policy(policy, float_space)(floats), want)
    assert torso_of(parse_policy(policy), float_space).images[0].scale == 1.0


def test_images_too_small_for_the_nature_cnn_are_refused_naming_each():
    space = gym.spaces.Dict({"screen": _box((20, 24, 3)), "minimap": _box((1, 30, 30)), "map": _box((36, 40, 1)),
                             "vars": gym.spaces.Box(-1.0, 1.0, (5,), np.float32)})
    with pytest.raises(Unsupported) as err:
        torso_of(parse_policy("cnn"), space)
    assert str(err.value) == ("policy cnn needs image observations of at least 36x36 (stacked frames CxHxW or "
                              "HxWxC); got image 'minimap' of 30x30 (Box(1, 30, 30)), image 'screen' of 20x24 "
                              "(Box(20, 24, 3))")
    assert len(torso_of(parse_policy("cnn:impala"), space).images) == 3   # the ResNet's pools take any size
    assert torso_of(parse_policy("lstm"), space).kind == "mlp"              # lstm falls back to its MLP, as on Box


def test_a_dict_without_an_image_is_refused_naming_that():
    space = gym.spaces.Dict({"cell": gym.spaces.Discrete(16), "position": gym.spaces.Box(-1.0, 1.0, (2,))})
    with pytest.raises(Unsupported) as err:
        make_policy(Workload("CartPole-v1", 2, parse_policy("cnn:impala")), space, gym.spaces.Discrete(3))
    assert str(err.value) == ("policy cnn:impala needs image observations of at least 36x36 (stacked frames CxHxW "
                              "or HxWxC); got Dict(cell: Discrete(16), position: Box(2,)), with no image entry "
                              "(a Box of rank 3)")


def test_plain_frames_keep_their_network():
    """A Box of frames is the torso it was: no entries, the documented parameter counts (docs/protocol.md)."""
    frames, six = _box((4, 84, 84)), gym.spaces.Discrete(6)
    assert torso_of(parse_policy("cnn"), frames).entries == ()
    assert policy_params(parse_policy("cnn"), frames, six) == 1_687_206
    assert policy_params(parse_policy("cnn:impala"), frames, six) == 1_090_774
    assert policy_params(parse_policy("lstm"), frames, six) == 3_788_454
    net = _net_policy("cnn", frames).net
    assert [name for name, _ in net.named_parameters()][:2] == ["0.body.0.weight", "0.body.0.bias"]


@pytest.mark.parametrize("policy", ["cnn", "lstm:hidden=32"])
def test_every_strategy_acts_alike_on_a_dict_with_a_screen(policy):
    """The toy corridor's obs=dict_image (a 48x64x3 screen and 5 variables) under the serial loop, gymnasium's
    vector envs and rlpyt's samplers: each env's actions are the same everywhere."""
    examples = str(REPO / "examples")
    if examples not in sys.path:
        sys.path.insert(0, examples)
    workload = Workload("toyenvs:make_corridor", 4, parse_policy(policy), seed=0,
                        env_kwargs={"obs": "dict_image", "screen": "48x64", "episode_len": 4})
    _assert_same_actions(workload, [("serial", {}), ("gymnasium-sync", {}), ("gymnasium-async", {}),
                                    ("rlpyt-serial", {"batch_T": 3}), ("rlpyt-cpu", {"batch_T": 3, "workers": 2})],
                         steps=9)
