"""`--policy lstm` under impala and seed (issue 43): a recurrent actor-critic (adapters._kit.nets
.recurrent_actor_critic) whose parameter count is known before the fork, whose unroll zeroes the state where an
episode starts, and which both learners train with the feed-forward learners' exact step counts: impala's actors
carry each env's state across trajectories and store the state at a trajectory's start, seed's central inference
keeps one state per env, and both learners re-unroll from the stored state to the logits the actions were drawn
from."""
import gymnasium as gym
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from support import TINY, run_cli  # noqa: E402

from adapters._kit.nets import (  # noqa: E402
    actor_critic_params,
    recurrent_actor_critic,
    recurrent_actor_critic_params,
    torso_of,
)
from rlbench import registry  # noqa: E402
from rlbench.planning.plan import TimingProtocol  # noqa: E402
from rlbench.running.timing import measure  # noqa: E402
from rlbench.workload import Workload, parse_policy  # noqa: E402

FRAMES = "rlbench/Frames-v0"
SMALL_FRAMES = {"size": 36, "episode_len": 5}   # 4x36x36, the smallest frame the Nature CNN takes; short episodes
LSTM_FRAMES = parse_policy("lstm:hidden=32")     # the Nature CNN, then 32 LSTM units
LSTM_VECTORS = parse_policy("lstm:hidden=32x16")  # a tanh MLP of 32, then 16 LSTM units
CARTPOLE_SPACE = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
FRAME_SPACE = gym.spaces.Box(0, 255, (4, 36, 36), np.uint8)
PROTOCOL = TimingProtocol(warmup_s=0.05, warmup_units=1, duration_s=0.3, min_units=3)
IMPALA = {"workers": 2, "unroll": 4, "batch": 2, "queue": 2}
SEED = {"workers": 2, "batch_T": 4}


def frames(num_envs=4):
    return Workload(FRAMES, num_envs, LSTM_FRAMES, seed=0, env_kwargs=SMALL_FRAMES)


def cartpole(num_envs=4):
    return Workload("CartPole-v1", num_envs, LSTM_VECTORS, seed=0)


def _open(adapter, workload, **options):
    cls = registry.get(adapter)
    resolved = cls.resolve_options(options)
    assert cls().supports(workload, resolved) is None
    return cls().open(workload, resolved)


def _count(net) -> int:
    return sum(p.numel() for p in net.parameters())


# -- the network ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("policy, space", [(LSTM_FRAMES, FRAME_SPACE), (LSTM_VECTORS, CARTPOLE_SPACE),
                                           (parse_policy("lstm:hidden=8"), CARTPOLE_SPACE)],
                         ids=["frames", "vectors", "lstm-only"])
def test_the_parameter_count_is_torchs(policy, space):
    torso = torso_of(policy, space)
    net = recurrent_actor_critic(torso, 3)
    assert _count(net) == recurrent_actor_critic_params(torso, 3) == actor_critic_params(torso, 3)
    assert isinstance(net.cell, torch.nn.LSTMCell) and net.cell.hidden_size == policy.hidden[-1]


def test_a_feed_forward_torso_is_refused():
    with pytest.raises(ValueError, match="needs a torso with an LSTM"):
        recurrent_actor_critic(torso_of(parse_policy("mlp:hidden=8"), CARTPOLE_SPACE), 2)


def _net_and_inputs(T=6, B=3):
    torch.manual_seed(0)
    net = recurrent_actor_critic(torso_of(LSTM_VECTORS, CARTPOLE_SPACE), 2)
    x = torch.randn(T, B, 4)
    state = (torch.randn(B, 16), torch.randn(B, 16))
    return net, x, state


def test_unroll_zeroes_the_state_where_an_episode_starts():
    net, x, state = _net_and_inputs()
    first = torch.zeros(6, 3, dtype=torch.bool)
    first[3, 1] = True   # env 1's episode starts at step 3
    with torch.no_grad():
        logits, values, _ = net.unroll(x, first, state)
        fresh_logits, fresh_values, _ = net.unroll(x[3:], torch.zeros(3, 3, dtype=torch.bool), net.initial_state(3))
        carried, _, _ = net.unroll(x, torch.zeros(6, 3, dtype=torch.bool), state)
    assert torch.allclose(logits[3:, 1], fresh_logits[:, 1], atol=1e-6)    # as if from a zero state
    assert torch.allclose(values[3:, 1], fresh_values[:, 1], atol=1e-6)
    assert torch.equal(logits[:, [0, 2]], carried[:, [0, 2]])               # the other envs keep theirs
    assert torch.equal(logits[:3, 1], carried[:3, 1])
    assert not torch.allclose(carried[3:, 1], fresh_logits[:, 1], atol=1e-4)  # the state mattered there


def test_stepping_is_unrolling():
    """What the actors act with (`step`, one observation at a time) is what the learner re-unrolls."""
    net, x, state = _net_and_inputs()
    first = torch.rand(6, 3, generator=torch.Generator().manual_seed(1)) < 0.3
    with torch.no_grad():
        logits, values, end = net.unroll(x, first, state)
        s = state
        for t in range(6):
            step_logits, step_values, s = net.step(x[t], first[t], s)
            assert torch.allclose(step_logits, logits[t], atol=1e-6)
            assert torch.allclose(step_values, values[t], atol=1e-6)
    assert torch.allclose(s[0], end[0]) and torch.allclose(s[1], end[1])


def test_a_step_with_first_set_acts_from_a_zero_state():
    net, x, state = _net_and_inputs()
    with torch.no_grad():
        got, _, _ = net.step(x[0], torch.ones(3, dtype=torch.bool), state)
        fresh, _, _ = net.step(x[0], torch.zeros(3, dtype=torch.bool), net.initial_state(3))
    assert torch.equal(got, fresh)


# -- the learners ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("adapter, workload", [
    ("impala", frames()), ("impala", cartpole()), ("seed", frames()), ("seed", cartpole()),
], ids=["impala-frames", "impala-cartpole", "seed-frames", "seed-cartpole"])
def test_a_learner_trains_lstm_with_exact_step_counts(adapter, workload):
    options = IMPALA if adapter == "impala" else SEED
    session = _open(adapter, workload, **options)
    try:
        assert session.recurrent
        net = session.net
        assert isinstance(net.cell, torch.nn.LSTMCell)
        before = [p.detach().clone() for p in net.parameters()]
        result = measure(session.step, PROTOCOL, session.metrics)
        updates = session.updates
        torso = torso_of(workload.policy, _space(workload))
        assert _count(net) == recurrent_actor_critic_params(torso, _actions(workload))
        if adapter == "impala":   # the shared memory the actors load parameters from fits the network
            assert session.params.views["p"].shape[1] == _count(net)
    finally:
        session.close()
    assert updates > 0 and result["units"] >= 3
    assert any(not p.equal(q) for p, q in zip(before, net.parameters())), "no parameter changed"
    if adapter == "impala":   # as test_impala: batch trajectories of unroll steps x the actor's envs, per update
        per_update = options["batch"] * options["unroll"] * workload.num_envs // options["workers"]
        assert result["env_steps"] == result["units"] * per_update
    else:                     # as test_learners_seed_a3c: batch_T x num_envs per update, every step consumed
        per_update = options["batch_T"] * workload.num_envs
        assert result["env_steps"] == result["units"] * per_update
        assert result["samples_per_s"] == pytest.approx(result["steps_per_s"])
        assert result["actor_steps_per_s"] == pytest.approx(result["steps_per_s"])
    assert session.info["batch_size"] == per_update


def _space(workload):
    return FRAME_SPACE if workload.env_id == FRAMES else CARTPOLE_SPACE


def _actions(workload):
    return 6 if workload.env_id == FRAMES else 2


def test_impala_re_unrolls_the_actors_state_to_their_log_probabilities():
    """With parameters that do not move (lr 1e-30), the learner's unroll from the stored state over the stored
    episode starts gives back every behaviour log-probability: the state carried across trajectories (not zero
    after the first) and zeroed where an episode started (5-step episodes inside 4-step trajectories)."""
    session = _open("impala", frames(), **IMPALA, lr=1e-30)
    seen = []
    learn = session._learn

    def spy(obs, b):
        with torch.no_grad():
            logits, _, _ = session.net.unroll(obs, b["first"], b["state"])
            logp = torch.log_softmax(logits[:-1], -1).gather(2, b["act"][..., None]).squeeze(2)
        seen.append(((logp - b["logp"]).abs().max().item(), bool(b["first"][1:].any()),
                     bool(b["state"][0].abs().sum() > 0)))
        return learn(obs, b)

    _check_re_unrolled(session, spy, 8, seen)


def test_seed_re_unrolls_the_central_state_to_the_logits_it_acted_with():
    session = _open("seed", frames(), **SEED)
    seen = []
    learn = session._learn

    def spy():
        with torch.no_grad():
            logits, _, _ = session.net.unroll(session.traj_obs, session.traj_first, session.start_state)
        seen.append(((logits[:-1] - session.traj_logits).abs().max().item(), bool(session.traj_first[1:].any()),
                     bool(session.start_state[0].abs().sum() > 0)))
        return learn()

    _check_re_unrolled(session, spy, 6, seen)


def _check_re_unrolled(session, spy, units, seen):
    """Run `units` with the learner's step replaced by `spy` (which records (the largest difference from what
    the actors acted with, an episode started inside, a carried state not zero)): every difference under
    1e-4, with episode starts and carried states among them."""
    session._learn = spy
    try:
        for _ in range(units):
            session.step()
    finally:
        session.close()
    assert max(d for d, _, _ in seen) < 1e-4, seen
    assert any(f for _, f, _ in seen) and any(s for _, _, s in seen), seen


@pytest.mark.parametrize("adapter", ["impala", "seed"])
def test_lstm_runs_through_rlbench_run(tmp_path, adapter):
    opts = [x for k, v in (IMPALA if adapter == "impala" else SEED).items() for x in ("--opt", f"{k}={v}")]
    run = run_cli(["run", "--adapter", adapter, "--env", "CartPole-v1", "--num-envs", "4",
                   "--policy", "lstm:hidden=32x16", *opts, *TINY], tmp_path / "run")
    assert run.rc == 0, run.stderr
    row = run.row(adapter)
    assert row["status"] == "ok", row.get("error")
    assert row["updates_per_s"] > 0
