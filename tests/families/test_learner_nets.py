"""The torch learners train the workload's policy as their network (issue 43): `cnn` (the Nature CNN) and
`cnn:impala` (the IMPALA ResNet) on stacked uint8 frames (rlbench/Frames-v0) in every feed-forward learner,
`lstm` (the Nature CNN then an LSTM) in r2d2, impala and seed (a recurrent actor-critic:
tests/families/test_recurrent_actor_critic.py); the parameter counts each learner sizes its shared memory with
before its workers fork are torch's; and what a learner cannot train is refused by `supports()` with the reason."""
import gymnasium as gym
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from support import REPO, TINY, TINY_PROTOCOL, run_cli, write_suite  # noqa: E402

from adapters._kit import dqn  # noqa: E402
from adapters._kit.nets import actor_critic, actor_critic_params, torso_of  # noqa: E402
from adapters.rlpyt_async import ADDED  # noqa: E402
from rlbench import registry  # noqa: E402
from rlbench.api import PolicySpec, Workload  # noqa: E402
from rlbench.workload import parse_policy  # noqa: E402

FRAMES = "rlbench/Frames-v0"
SMALL_FRAMES = {"size": 36, "episode_len": 12}   # 4x36x36: the smallest frame the Nature CNN takes
CNN, IMPALA_CNN = parse_policy("cnn"), parse_policy("cnn:impala")
LSTM = parse_policy("lstm:hidden=32")
FEED_FORWARD = ("impala", "seed", "a3c", "ga3c", "ddp", "rlpyt-sync", "apex", "cleanrl-ppo")
LSTM_ACTOR_CRITICS = ("impala", "seed")   # feed-forward for mlp and the CNNs, a recurrent actor-critic for lstm
# one learner process or actor each, a few steps per update: a unit costs a few CNN passes
QUICK = {
    "impala": {"workers": 1, "unroll": 4, "batch": 1, "queue": 1},
    "seed": {"workers": 1, "batch_T": 4},
    "a3c": {"workers": 1, "batch_T": 4, "updates_per_unit": 1},
    "ga3c": {"agents": 1, "t_max": 4, "train_batch": 1},
    "ddp": {"ranks": 1, "batch_T": 4},
    "rlpyt-sync": {"ranks": 1, "batch_T": 4},
    "apex": {"workers": 1, "learn_start": 16, "batch": 8, "flush": 8, "capacity": 256},
    "r2d2": {"workers": 1, "learn_start": 4, "batch": 2, "seq_len": 6, "burn_in": 2, "overlap": 2, "capacity": 32},
    "cleanrl-ppo": {"num_steps": 4, "num_minibatches": 2, "update_epochs": 1},
}


def frames(policy, layout="chw", num_envs=2, **kwargs):
    return Workload(FRAMES, num_envs, policy, seed=0, env_kwargs={**SMALL_FRAMES, "layout": layout, **kwargs})


def frame_space(layout="chw"):
    shape = (4, 36, 36) if layout == "chw" else (36, 36, 4)
    return gym.spaces.Box(0, 255, shape, np.uint8)


def _open(adapter, workload, **options):
    cls = registry.get(adapter)
    resolved = cls.resolve_options({**QUICK[adapter], **options})
    assert cls().supports(workload, resolved) is None
    return cls().open(workload, resolved)


def _count(net) -> int:
    return sum(p.numel() for p in net.parameters())


def _updates(adapter, session) -> int:
    if adapter in ("ddp", "rlpyt-sync"):
        return session.rank0.iterations
    if adapter == "a3c":
        return session.version
    if adapter == "ga3c":
        return session.counts.updates
    return session.updates


def _nets(adapter, session, workload):
    """(the network the learner trains, the parameter count its shared memory was made for, or None where
    nothing is shared before a fork)."""
    space, n = frame_space(workload.env_kwargs["layout"]), 6
    if adapter == "impala":
        return session.net, session.params.views["p"].shape[1]
    if adapter == "a3c":   # the cell process holds no network: one like the workers'
        return actor_critic(torso_of(workload.policy, space), n), session.buf["params"].size
    if adapter in ("apex", "r2d2"):
        return session.net, session.params.count
    if adapter in ("ddp", "rlpyt-sync"):
        return session.rank0.model, None
    return session.net, None


@pytest.mark.parametrize("adapter, policy, layout", [
    *((a, CNN, "chw") for a in FEED_FORWARD),
    ("impala", IMPALA_CNN, "hwc"), ("a3c", IMPALA_CNN, "chw"), ("apex", IMPALA_CNN, "hwc"),
    ("cleanrl-ppo", IMPALA_CNN, "hwc"), ("seed", CNN, "hwc"), ("r2d2", LSTM, "chw"), ("r2d2", LSTM, "hwc"),
    ("impala", LSTM, "chw"), ("seed", LSTM, "hwc"),
], ids=lambda v: v.name if isinstance(v, PolicySpec) else v)
def test_a_learner_trains_the_policys_network_on_frames(adapter, policy, layout):
    workload = frames(policy, layout)
    session = _open(adapter, workload)
    try:
        net, shared = _nets(adapter, session, workload)
        before = [p.detach().clone() for p in net.parameters()] if adapter != "a3c" else None
        made = sum(session.step() for _ in range(2))
        assert made > 0 and _updates(adapter, session) > 0
        torso = (dqn.recurrent_q_torso if adapter == "r2d2" else torso_of)(policy, frame_space(layout))
        assert torso.kind == ("impala" if policy is IMPALA_CNN else "nature") and torso.frame[3] == layout
        convs = [m for m in net.modules() if isinstance(m, torch.nn.Conv2d)]
        assert convs and convs[0].in_channels == 4               # the frames' stack goes in as channels
        assert shared is None or _count(net) == shared           # shared memory made before the fork fits
        n_params = (dqn.q_net_params(torso, 6) if adapter in ("apex", "r2d2")
                    else actor_critic_params(torso, 6))
        assert _count(net) == n_params
        if before is not None:
            assert any(not p.equal(q) for p, q in zip(before, net.parameters())), "no parameter changed"
    finally:
        session.close()


def test_learners_keep_uint8_frames_compact_between_processes():
    """Observations cross processes (shared memory, replay, queues) as uint8 and are scaled at the net."""
    workload = frames(CNN)
    session = _open("impala", workload)
    try:
        assert session.buf["obs"].dtype == np.uint8
    finally:
        session.close()
    session = _open("apex", workload)
    try:
        assert session.replay.item_bytes < 2 * 4 * 36 * 36 + 64   # obs and next_obs a byte per pixel
    finally:
        session.close()


@pytest.mark.parametrize("adapter", [a for a in FEED_FORWARD if a not in LSTM_ACTOR_CRITICS])
def test_a_feed_forward_learner_refuses_lstm(adapter):
    cls = registry.get(adapter)
    got = cls().supports(frames(LSTM), cls.resolve_options(QUICK[adapter]))
    assert got == f"policy lstm: {adapter} trains a feed-forward network (impala, seed and r2d2 train recurrent networks)"
    assert cls().supports(Workload("CartPole-v1", 2, LSTM), cls.resolve_options(QUICK[adapter])) == got


@pytest.mark.parametrize("adapter", LSTM_ACTOR_CRITICS)
def test_impala_and_seed_take_lstm(adapter):
    cls = registry.get(adapter)
    assert cls().supports(frames(LSTM), cls.resolve_options(QUICK[adapter])) is None
    assert cls().supports(Workload("CartPole-v1", 2, LSTM), cls.resolve_options(QUICK[adapter])) is None


@pytest.mark.parametrize("adapter", FEED_FORWARD)
def test_a_cnn_on_vector_observations_is_refused_up_front(adapter):
    cls = registry.get(adapter)
    got = cls().supports(Workload("CartPole-v1", 2, IMPALA_CNN), cls.resolve_options(QUICK[adapter]))
    assert got == "policy cnn:impala needs image observations of at least 36x36 (stacked frames CxHxW or HxWxC); " \
                  "got Box(4,)", got


def test_r2d2_takes_mlp_or_lstm_and_refuses_a_cnn_without_recurrence():
    cls, options = registry.get("r2d2"), registry.get("r2d2").resolve_options(QUICK["r2d2"])
    got = cls().supports(frames(IMPALA_CNN), options)
    assert got.startswith("policy cnn:impala: r2d2 trains a recurrent network"), got
    assert cls().supports(frames(LSTM), options) is None
    assert cls().supports(Workload("CartPole-v1", 2, LSTM), options) is None    # lstm on vectors: an MLP first
    assert cls().supports(frames(PolicySpec("mlp", hidden=(16, 8))), options) is None


def test_frames_too_small_for_the_nature_cnn_are_refused():
    cls = registry.get("impala")
    got = cls().supports(frames(CNN, size=24), cls.resolve_options(QUICK["impala"]))
    assert got.startswith("policy cnn needs image observations of at least 36x36") and got.endswith("got Box(4, 24, 24)")


def test_r2d2_lstm_on_frames_is_the_nature_cnn_then_the_lstm():
    torso = dqn.recurrent_q_torso(LSTM, frame_space())
    assert (torso.kind, torso.lstm, torso.width) == ("nature", 32, 32)
    vectors = gym.spaces.Box(-1, 1, (4,))
    assert dqn.recurrent_q_torso(parse_policy("lstm:hidden=16x8"), vectors).hidden == (16,)
    assert dqn.recurrent_q_torso(PolicySpec("mlp", hidden=(16, 8)), vectors).hidden == (16,)   # as before


def test_mlp_learners_keep_their_networks():
    """mlp trains what it trained before: the tanh actor-critic, Ape-X's ReLU MLP, CleanRL's separate MLPs."""
    mlp, space = PolicySpec("mlp", hidden=(16, 16)), gym.spaces.Box(-1, 1, (4,))
    net = actor_critic(torso_of(mlp, space), 2)
    assert [type(m).__name__ for m in net.torso] == ["Linear", "Tanh", "Linear", "Tanh"]
    q = dqn.q_net(dqn.q_torso(mlp, space), 2)
    assert [type(m).__name__ for m in q.torso] == ["Linear", "ReLU", "Linear", "ReLU"]
    session = _open("cleanrl-ppo", Workload("CartPole-v1", 2, mlp, seed=0))
    try:
        assert type(session.net).__name__ == "SeparateActorCritic"
    finally:
        session.close()


@pytest.mark.parametrize("adapter, policy", [("impala", "cnn"), ("r2d2", "lstm:hidden=32")])
def test_a_cell_on_frames_runs_through_rlbench_run(tmp_path, adapter, policy):
    opts = [x for k, v in QUICK[adapter].items() for x in ("--opt", f"{k}={v}")]
    kwargs = [x for k, v in SMALL_FRAMES.items() for x in ("--env-kwarg", f"{k}={v}")]
    run = run_cli(["run", "--adapter", adapter, "--env", FRAMES, "--num-envs", "2", "--policy", policy,
                   *kwargs, *opts, *TINY], tmp_path / "run")
    assert run.rc == 0, run.stderr
    row = run.row(adapter)
    assert row["status"] == "ok", row.get("error")
    assert row["updates_per_s"] > 0


@pytest.mark.slow
def test_every_feed_forward_learner_runs_a_cnn_cell_through_a_suite(tmp_path):
    """The learners the test above leaves out, one cell each (~4 s a cell: each a fresh interpreter)."""
    adapters = [a for a in FEED_FORWARD if a not in ("impala", "rlpyt-sync")]
    options = "".join(f"options.{a} = {{ {', '.join(f'{k} = [{v}]' for k, v in QUICK[a].items())} }}\n"
                      for a in adapters)
    kwargs = ", ".join(f"{k} = {v}" for k, v in SMALL_FRAMES.items())
    suite = write_suite(tmp_path, f'[[sweep]]\nadapters = {adapters!r}\nenvs = ["{FRAMES}"]\nnum_envs = [2]\n'
                                  f'policy = ["cnn"]\nenv_kwargs = {{ {kwargs} }}\n{options}')
    run = run_cli(["run", suite], tmp_path / "run")
    assert run.rc == 0, run.stderr
    for adapter in adapters:
        row = run.row(adapter)
        assert row["status"] == "ok", (adapter, row.get("error"))
        assert row["updates_per_s"] > 0


def test_the_learners_networks_share_the_image_encoder_of_dict_observations():
    """A Dict of a 240x320 uint8 screen and game variables gives every learner's network the acting policies'
    torso (adapters._kit.nets.torso_of: a CNN per image, the rest concatenated); counts known before torch."""
    from adapters._kit.nets import flat_obs, recurrent_actor_critic, recurrent_actor_critic_params
    space = gym.spaces.Dict({"screen": gym.spaces.Box(0, 255, (240, 320, 3), np.uint8),
                             "vars": gym.spaces.Box(-1.0, 1.0, (5,), np.float32)})
    space.seed(0)
    x = torch.as_tensor(flat_obs({k: np.stack([space.sample()[k] for _ in range(2)]) for k in ("screen", "vars")}))
    for policy in (CNN, IMPALA_CNN):
        torso = torso_of(policy, space)
        assert len(torso.images) == 1 and dqn.q_torso(policy, space) == torso
        net = actor_critic(torso, 4)
        assert _count(net) == actor_critic_params(torso, 4)
        logits, values = net(x)
        assert logits.shape == (2, 4) and values.shape == (2,)
        q = dqn.q_net(torso, 4)
        assert _count(q) == dqn.q_net_params(torso, 4) and q(x).shape == (2, 4)
    torso = dqn.recurrent_q_torso(LSTM, space)
    assert (torso.kind, torso.lstm, torso.feed_width) == ("nature", 32, 512 + 5)
    net = recurrent_actor_critic(torso, 4)
    assert _count(net) == recurrent_actor_critic_params(torso, 4)
    logits, values, _ = net.step(x, torch.zeros(2, dtype=torch.bool), net.initial_state(2))
    assert logits.shape == (2, 4) and values.shape == (2,)
    small = gym.spaces.Dict({"screen": gym.spaces.Box(0, 255, (24, 32, 3), np.uint8), "vars": space["vars"]})
    with pytest.raises(Exception, match=r"^policy cnn needs image observations of at least 36x36 \(stacked frames "
                                        r"CxHxW or HxWxC\); got image 'screen' of 24x32 \(Box\(24, 32, 3\)\)$"):
        dqn.q_torso(CNN, small)


# -- a Dict with a screen: every learner that runs a policy network on the env's observations -------------------

DICT_IMAGE = {"obs": "dict_image", "screen": "48x64", "length": 6, "episode_len": 7}   # toyenvs' FPS-like Dict
SCREEN = (48, 64, 3)
ON_DICTS = {   # (policy, options) on 4 envs, the work split over 2 processes where the learner splits it
    "a3c": (CNN, {"workers": 2, "batch_T": 4, "updates_per_unit": 1}),
    "ga3c": (CNN, {"agents": 2, "t_max": 4, "train_batch": 2}),
    "ddp": (CNN, {"ranks": 2, "batch_T": 4}),
    "rlpyt-sync": (CNN, {"ranks": 1, "batch_T": 4}),
    "rlpyt-async": (PolicySpec("mlp", hidden=(16,)), {"workers": 2, "batch_T": 4, "minibatch": 8, "capacity": 256}),
    "apex": (CNN, {"workers": 2, "learn_start": 16, "batch": 8, "flush": 8, "capacity": 256}),
    "r2d2": (LSTM, {"workers": 2, "learn_start": 4, "batch": 2, "seq_len": 6, "burn_in": 2, "overlap": 2,
                    "capacity": 32}),
}


def _screen_buffers(adapter, session) -> list:
    """The arrays a learner keeps its observations' screen part in (shared memory, replay fields, rollouts)."""
    if adapter == "a3c":
        return [session.buf["obs_now"]["screen"]]
    if adapter in ("ddp", "rlpyt-sync"):
        return [session.rank0.obs["screen"], session.rank0.buf_obs["screen"]]
    if adapter == "rlpyt-async":
        return [session.ring["obs"]["screen"], session.ring["next_obs"]["screen"]]
    if adapter in ("apex", "r2d2"):
        data = session.replay.data()
        return [data[k] for k in data if k.endswith("/screen")]
    return []   # ga3c's agents send theirs through queues: the trainer's parameters tell they arrived


def _learner_net(adapter, session, workload):
    """The network the learner trains (a3c's cell holds none: one like its workers', with the shared values)."""
    if adapter == "a3c":
        space = gym.spaces.Dict({"screen": gym.spaces.Box(0, 255, SCREEN, np.uint8),
                                 "vars": gym.spaces.Box(-1.0, 1.0, (5,), np.float32)})
        net = actor_critic(torso_of(workload.policy, space), 3)
        torch.nn.utils.vector_to_parameters(torch.from_numpy(session.shared_params()), net.parameters())
        return net
    if adapter in ("ddp", "rlpyt-sync"):
        return session.rank0.model
    return session.net


def _flat_params(adapter, session, workload):
    if adapter == "ddp":
        return session.rank_params()
    return torch.nn.utils.parameters_to_vector(_learner_net(adapter, session, workload).parameters()).detach().clone()


@pytest.mark.parametrize("adapter", sorted(ON_DICTS))
def test_a_learner_trains_on_a_dict_with_a_screen_part_by_part(adapter, monkeypatch):
    """toyenvs' dict_image (a 48x64x3 uint8 screen beside 5 floats, a first-person shooter's) under `--policy cnn`
    (r2d2: lstm, the Nature CNN then the LSTM; rlpyt-async: its mlp): the learner keeps the screen uint8 and the
    floats as floats, a buffer each, its network puts the CNN on the screen's 3 channels, its parameters move, and
    every unit counts exactly the env steps its updates consumed (or the actors made)."""
    monkeypatch.syspath_prepend(str(REPO / "examples"))   # toyenvs, for forked workers
    monkeypatch.setenv("PYTHONPATH", str(REPO / "examples"))   # and for ddp's spawned rank
    policy, options = ON_DICTS[adapter]
    workload = Workload("toyenvs:make_corridor", 4, policy, seed=0, env_kwargs=DICT_IMAGE)
    cls = registry.get(adapter)
    resolved = cls.resolve_options(options)
    assert cls().supports(workload, resolved) is None
    session = cls().open(workload, resolved)
    try:
        screens = _screen_buffers(adapter, session)
        assert all(a.dtype == np.uint8 and a.shape[-3:] == SCREEN for a in screens)   # a byte per pixel
        before = _flat_params(adapter, session, workload)
        made = [session.step() for _ in range(4)]
        after = _flat_params(adapter, session, workload)
        net = _learner_net(adapter, session, workload)
        if adapter in ("ddp", "rlpyt-sync"):
            assert made == [4 * 4] * 4                              # every rank's envs x batch_T
        elif adapter == "a3c":
            assert all(m > 0 and m % (4 * 2) == 0 for m in made)     # updates x batch_T x envs per worker
            assert session.version >= 4
        elif adapter == "ga3c":
            assert all(m > 0 and m % (4 * 2) == 0 for m in made)     # experiences x t_max x envs per agent
        elif adapter == "rlpyt-async":
            assert sum(made) == int(session.ctrl[ADDED]) and sum(made) % (4 * 2) == 0   # batch_T x envs per sampler
        else:   # apex, r2d2: the env steps the actors made, a step of every env of one actor at a time
            assert sum(made) == session.steps_seen and sum(made) % 2 == 0 and session.updates == 4
        if adapter != "rlpyt-async":
            convs = [m for m in net.modules() if isinstance(m, torch.nn.Conv2d)]
            assert convs and convs[0].in_channels == 3                # the screen's RGB, the floats beside
        if adapter == "ddp":
            assert after[0].tobytes() == after[1].tobytes() and not np.array_equal(after[0], before[0])
        else:
            assert not torch.equal(before, after), "no parameter changed"
        assert all(a.any() for a in screens)                           # the screens were written
    finally:
        session.close()


def test_sb3_ppo_trains_sb3s_multi_input_policy_on_a_dict_with_a_screen(monkeypatch):
    """sb3-ppo builds SB3's own networks: a Dict goes to its MultiInputPolicy (CombinedExtractor: a NatureCNN on
    the screen, the floats flattened, the policy's hidden sizes on top); SB3's rollout buffer keeps the screen
    uint8, part by part; every unit is one rollout of num_steps x num_envs."""
    pytest.importorskip("stable_baselines3")
    monkeypatch.syspath_prepend(str(REPO / "examples"))
    workload = Workload("toyenvs:make_corridor", 4, PolicySpec("mlp", hidden=(32,)), seed=0, env_kwargs=DICT_IMAGE)
    cls = registry.get("sb3-ppo")
    options = cls.resolve_options({"num_steps": 8, "num_minibatches": 2, "update_epochs": 1})
    assert cls().supports(workload, options) is None
    session = cls().open(workload, options)
    try:
        policy = session.model.policy
        assert type(policy).__name__ == "MultiInputActorCriticPolicy"
        extractors = policy.features_extractor.extractors
        assert type(extractors["screen"]).__name__ == "NatureCNN" and type(extractors["vars"]).__name__ == "Flatten"
        assert [m.out_features for m in policy.mlp_extractor.policy_net if hasattr(m, "out_features")] == [32]
        before = torch.nn.utils.parameters_to_vector(policy.parameters()).detach().clone()
        assert [session.step() for _ in range(2)] == [8 * 4] * 2
        screen = session.model.rollout_buffer.observations["screen"]
        # the last rollout, flattened for the update: steps x envs screens, CHW as SB3 transposes them
        assert screen.dtype == np.uint8 and screen.shape == (8 * 4, 3, 48, 64) and screen.any()
        assert not torch.equal(before, torch.nn.utils.parameters_to_vector(policy.parameters()))
    finally:
        session.close()


@pytest.mark.slow
def test_every_learner_runs_a_dict_with_a_screen_through_a_suite(tmp_path, monkeypatch):
    """The learners above, one cell each through `rlbench run` (a fresh interpreter a cell, ~10 s each on 2
    cores): every row ok, its env steps whole units (ddp and rlpyt-sync: every unit ranks x envs x batch_T;
    a3c and ga3c: whole rollouts of a worker's envs; the replay learners: whole steps of an actor's envs)."""
    monkeypatch.setenv("PYTHONPATH", str(REPO / "examples"))
    monkeypatch.syspath_prepend(str(REPO / "examples"))
    kwargs = ", ".join(f"{k} = {v!r}" if isinstance(v, str) else f"{k} = {v}" for k, v in DICT_IMAGE.items())
    kwargs = kwargs.replace("'", '"')
    sweeps = ""
    for adapter, (policy, options) in sorted(ON_DICTS.items()):
        name = {CNN: "cnn", LSTM: "lstm:hidden=32"}.get(policy, "mlp:hidden=16")
        opts = ", ".join(f"{k} = [{v}]" for k, v in options.items())
        sweeps += (f'[[sweep]]\nadapters = ["{adapter}"]\nenvs = ["toyenvs:make_corridor"]\nnum_envs = [4]\n'
                   f'policy = ["{name}"]\nenv_kwargs = {{ {kwargs} }}\noptions.{adapter} = {{ {opts} }}\n')
    # half a second: rlpyt-async's units (transitions the samplers added meanwhile) see some in the window
    protocol = TINY_PROTOCOL.replace("duration_s = 0.05", "duration_s = 0.5")
    run = run_cli(["run", write_suite(tmp_path, sweeps, protocol=protocol)], tmp_path / "run")
    assert run.rc == 0, run.stderr
    for adapter, (_, options) in ON_DICTS.items():
        row = run.row(adapter)
        assert row["status"] == "ok", (adapter, row.get("error"))
        steps, units = row["env_steps"], row["units"]
        assert units > 0 and steps > 0, (adapter, row)
        if adapter in ("ddp", "rlpyt-sync"):
            assert steps == units * 4 * options["batch_T"], (adapter, steps, units)
        elif adapter in ("a3c", "ga3c", "rlpyt-async"):
            T = options.get("batch_T", options.get("t_max"))
            assert steps % (T * 2) == 0, (adapter, steps)   # rollouts of the 2 envs of a worker
        else:
            assert steps % 2 == 0, (adapter, steps)           # steps of an actor's 2 envs
