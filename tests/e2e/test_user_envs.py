"""The user's envs under every gymnasium-based stepping adapter, with every observation and action space.

examples/toyenvs' corridor (its Dict observation; registered as toyenvs:ToyCorridor-v0 and built by the
factory toyenvs:make_corridor) gives `serial`'s transitions under every adapter that builds gymnasium envs,
for a fixed seed: the random policy's generator is seeded by the workload's seed, so every adapter draws the
same actions, and an obs-only policy (toyenvs.policies:linear) gives each env the same actions wherever it
runs. step() counts exactly the env steps the envs made (a factory that counts them in shared memory).
Each (adapter, space) an adapter cannot carry gets supports()'s reason naming the space, never a crash;
EnvPool and gymnax run a plain gymnasium id only where their own registries have it.
"""
import multiprocessing
import os
import sys

import numpy as np
import pytest
from support import REPO, TINY, run_cli
from support.corridor import SHORT, N, _assert_same, _open, _parts, _serial, _trajectory

from rlbench import registry
from rlbench.api import PolicySpec, Unsupported, Workload

EXAMPLES = REPO / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))

REGISTERED, FACTORY = "toyenvs:ToyCorridor-v0", "toyenvs:make_corridor"
COUNTED = f"{__name__}:counted_corridor"   # this module's factory: the corridor counting its steps
RANDOM, LINEAR, MLP = PolicySpec(), PolicySpec("user", factory="toyenvs.policies:linear"), PolicySpec("mlp")

OBS = {"box": "Box", "dict": "Dict", "tuple": "Tuple", "discrete": "Discrete", "multidiscrete": "MultiDiscrete",
       "multibinary": "MultiBinary"}
ACT = {"discrete": "Discrete", "box": "Box", "multidiscrete": "MultiDiscrete", "multibinary": "MultiBinary"}
ALL_OBS, ARRAY_OBS = set(OBS), {"box", "discrete", "multidiscrete", "multibinary"}

# Every adapter that builds gymnasium envs (kind vector_env), as sessions opened here: (name, options).
SYNC = [("gymnasium-sync", {}), ("gymnasium-async", {"shared_memory": True}),
        ("gymnasium-async", {"shared_memory": False}), ("sb3-dummy", {}), ("sb3-subproc", {}),
        ("tianshou-dummy", {}), ("tianshou-subproc", {}), ("tianshou-shmem", {})]
RAY = [("ray-actors", {"actors": 2}), ("ray-actors", {"actors": 2, "transport": "object_store"}),
       ("tianshou-ray", {})]
RLPYT = [("rlpyt-serial", {}, RANDOM), ("rlpyt-gpu", {"workers": 2}, RANDOM),
         ("rlpyt-cpu", {"workers": 2}, LINEAR), ("rlpyt-alternating", {"workers": 2}, LINEAR)]

# What each adapter carries of the corridor's spaces: (observations, actions). The learners train an MLP
# with a categorical policy (cleanrl-ppo a Gaussian too) on Box, Dict and Tuple observations (a buffer per part),
# sb3-ppo on Box and Dict ones (SB3's MultiInputPolicy; SB3 has no Tuple observations); tianshou has no
# Tuple observations (its vector envs refuse them); Sample
# Factory's tensor dicts hold arrays only (not the Python int of a Discrete observation, also inside the
# corridor's Dict) and its action distributions are Discrete or Box.
EVERY_ACT = set(ACT)
CARRIES = {
    "serial": (ALL_OBS, EVERY_ACT),
    "gymnasium-sync": (ALL_OBS, EVERY_ACT), "gymnasium-async": (ALL_OBS, EVERY_ACT),
    "sb3-dummy": (ALL_OBS, EVERY_ACT), "sb3-subproc": (ALL_OBS, EVERY_ACT),
    "ray-actors": (ALL_OBS, EVERY_ACT),
    **{a: (ARRAY_OBS | {"dict"}, EVERY_ACT) for a in ("tianshou-dummy", "tianshou-subproc", "tianshou-shmem",
                                                      "tianshou-ray")},
    **{a: (ALL_OBS, EVERY_ACT) for a in ("rlpyt-serial", "rlpyt-cpu", "rlpyt-gpu", "rlpyt-alternating")},
    "sample-factory": ({"box", "multidiscrete", "multibinary"}, {"discrete", "box"}),
    "sb3-ppo": ({"box", "dict"}, {"discrete"}),
    **{a: ({"box", "dict", "tuple"}, {"discrete"}) for a in ("impala", "seed", "a3c", "ga3c", "ddp", "rlpyt-sync",
                                                             "rlpyt-async", "apex", "r2d2")},
    "cleanrl-ppo": ({"box", "dict", "tuple"}, {"discrete", "box"}),   # a Gaussian for Box actions
}
LEARNERS = {"cleanrl-ppo", "sb3-ppo", "impala", "seed", "a3c", "ga3c", "ddp", "rlpyt-sync", "rlpyt-async", "apex",
            "r2d2"}
# their buffers hold a Dict's or Tuple's parts, one each (sb3-ppo: a Dict's, SB3's MultiInputPolicy)
DICT_LEARNERS = {"impala", "seed", "cleanrl-ppo", "a3c", "ga3c", "ddp", "rlpyt-sync", "rlpyt-async", "apex", "r2d2"}
CARRY_DICT_AND_TUPLE = ("impala, seed, cleanrl-ppo, a3c, ga3c, ddp, rlpyt-sync, rlpyt-async, apex and r2d2 carry Dict "
                        "and Tuple observations")
REASON = {("sample-factory", "dict"): "Discrete observations inside a Dict: sample-factory carries Dicts of Box, "
                                      "MultiDiscrete, MultiBinary only"}

COUNT = multiprocessing.get_context("fork").Value("q", 0)   # env steps made, in this process and its forks


def counted_corridor(**kwargs):
    """The corridor, adding each step() it makes to COUNT (shared with forked workers)."""
    import toyenvs

    class Counted(toyenvs.Corridor):
        def step(self, action):
            with COUNT.get_lock():
                COUNT.value += 1
            return super().step(action)
    return Counted(**kwargs)


@pytest.fixture(autouse=True)
def examples_on_pythonpath(monkeypatch):
    """Processes that do not fork from this one (Ray's workers, spawned ones) import toyenvs too, and this
    module (COUNTED) with the support package it imports."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(EXAMPLES), str(REPO / "tests" / "e2e"),
                                                                  str(REPO / "tests"), os.environ.get("PYTHONPATH"))
                                                     if p))


def _workload(env=REGISTERED, obs="dict", act="discrete", policy=RANDOM, n=N, seed=0):
    return Workload(env, n, policy, seed=seed, env_kwargs={**SHORT, "obs": obs, "act": act})


def _supports(adapter, workload, options=None):
    cls = registry.get(adapter)
    return cls().supports(workload, cls.resolve_options(options or {}))


@pytest.mark.parametrize("env", [REGISTERED, FACTORY])
def test_serial_batches_the_dict_observation_as_gymnasium_does(env):
    want = _serial(_workload(env))
    assert set(want[0]) == {"/cell", "/position", "/walls"}
    assert want[0]["/position"].shape == (N, 2) and want[0]["/position"].dtype == np.float32
    assert want[0]["/cell"].shape == (N,) and want[0]["/walls"].shape == (N, 4)
    assert any(not np.array_equal(a["/cell"], b["/cell"]) for a, b in zip(want, want[1:]))  # the agents move
    other = _trajectory("serial", _workload(env, seed=1))
    assert any(not np.array_equal(a["/position"], b["/position"]) for a, b in zip(want, other))  # seeded


@pytest.mark.parametrize("env", [REGISTERED, FACTORY])
@pytest.mark.parametrize("adapter, options", SYNC, ids=[f"{a}{o or ''}" for a, o in SYNC])
def test_dict_observations_give_serials_transitions(adapter, options, env):
    workload = _workload(env)
    _assert_same(_trajectory(adapter, workload, options), _serial(workload), f"{adapter}{options} on {env}")


@pytest.mark.parametrize("adapter, obs, act", [(ad, o, a) for ad in ("gymnasium-sync", "sb3-dummy", "tianshou-dummy")
                                                for o in OBS for a in ACT
                                                if o in CARRIES[ad][0] and a in CARRIES[ad][1]])
def test_every_space_it_carries_gives_serials_transitions(adapter, obs, act):
    workload = _workload(obs=obs, act=act)
    _assert_same(_trajectory(adapter, workload, steps=12), _serial(workload)[:13], f"{adapter} {obs}/{act}")


def _rlpyt_trajectory(adapter, workload, options, batches=3, batch_T=5) -> list:
    """The sampler's observations, time step by time step, over `batches` batches."""
    session = _open(adapter, workload, {**options, "batch_T": batch_T})
    try:
        out = []
        for _ in range(batches):
            assert session.step() == batch_T * workload.num_envs
            parts = _parts(session.samples["obs"])
            out += [{k: v[t] for k, v in parts.items()} for t in range(batch_T)]
        return out
    finally:
        session.close()


@pytest.mark.parametrize("env", [REGISTERED, FACTORY])
@pytest.mark.parametrize("adapter, options, policy", RLPYT, ids=[a for a, _, _ in RLPYT])
def test_rlpyt_samplers_lay_out_dict_observations_part_by_part(adapter, options, policy, env):
    workload = _workload(env, policy=policy)
    got = _rlpyt_trajectory(adapter, workload, options)
    _assert_same(got, _serial(workload)[:len(got)], f"{adapter} on {env}")


@pytest.mark.parametrize("act", ["tuple", "dict"])
@pytest.mark.parametrize("adapter, options, _", RLPYT, ids=[a for a, _, _ in RLPYT])
def test_rlpyt_samplers_carry_a_multi_agent_tuple_of_observations_and_of_actions(adapter, options, _, act):
    """A multi-agent wrapper's env (highway-env's intersection: a Tuple of each agent's observations, a Tuple of
    each agent's actions, asserted a tuple by the env; or a Dict of actions): rlpyt's buffers hold each part in an
    array of its own, the recorded actions too, each env steps with its own tuple or dict (the corridor raises
    otherwise), and the observations are serial's under the obs-only linear policy (the same actions wherever an
    env runs)."""
    workload = _workload(obs="tuple", act=act, policy=LINEAR)
    got = _rlpyt_trajectory(adapter, workload, options)
    _assert_same(got, _serial(workload)[:len(got)], f"{adapter} tuple/{act}")
    session = _open(adapter, workload, {**options, "batch_T": 2})
    try:
        session.step()
        shapes = {k: v.shape for k, v in _parts(session.samples["act"]).items()}
        assert shapes == ({"/0": (2, N), "/1": (2, N)} if act == "tuple" else {"/move": (2, N), "/speed": (2, N, 1)})
    finally:
        session.close()


def _per_env_async(adapter, workload, options, steps=20) -> tuple:
    """(each env's observations in the order it received them, the env steps step() counted)."""
    session = _open(adapter, workload, options)
    try:
        first = _parts(session.obs)
        seen = [[{k: v[i] for k, v in first.items()}] for i in range(workload.num_envs)]
        counted = 0
        for _ in range(steps):
            n = session.step()
            assert 1 <= n <= workload.num_envs and n == len(session.ready)
            counted += n
            now = _parts(session.obs)
            for i in session.ready:
                seen[i].append({k: v[i].copy() for k, v in now.items()})
        return seen, counted
    finally:
        session.close()


@pytest.mark.parametrize("adapter", ["tianshou-subproc", "tianshou-shmem"])
def test_tianshou_async_mode_carries_dict_observations_env_by_env(adapter):
    """Envs come back in any order; each one's observations are still those it has under `serial` with an
    obs-only policy, and the counts add up to what the envs received."""
    workload = _workload(policy=LINEAR)
    want = _serial(workload)
    seen, counted = _per_env_async(adapter, workload, {"wait_num": 2})
    assert counted == sum(len(s) - 1 for s in seen)
    for i, got in enumerate(seen):
        _assert_same(got, [{k: v[i] for k, v in w.items()} for w in want[:len(got)]], f"{adapter} env {i}")


# -- step counts: what step() returns is what the envs made -------------------------------------------

def _counted_run(adapter, workload, options, units) -> tuple:
    with COUNT.get_lock():
        COUNT.value = 0
    session = _open(adapter, workload, options)
    try:
        counted = sum(session.step() for _ in range(units))
    finally:
        session.close()
    return counted, COUNT.value


COUNT_CASES = [*SYNC, ("rlpyt-serial", {"batch_T": 3}), ("rlpyt-cpu", {"workers": 2, "batch_T": 3}),
               ("rlpyt-gpu", {"workers": 2, "batch_T": 3}), ("rlpyt-alternating", {"workers": 2, "batch_T": 3})]


@pytest.mark.parametrize("adapter, options", COUNT_CASES, ids=[f"{a}{o or ''}" for a, o in COUNT_CASES])
def test_each_counted_env_step_is_one_the_envs_made(adapter, options):
    counted, made = _counted_run(adapter, _workload(COUNTED), options, units=10)
    assert counted == made == 10 * N * options.get("batch_T", 1)


@pytest.mark.parametrize("adapter", ["tianshou-subproc", "tianshou-shmem"])
def test_async_counts_never_exceed_the_steps_made(adapter):
    """The envs not returned keep stepping: at most one step each is made but not yet counted."""
    counted, made = _counted_run(adapter, _workload(COUNTED), {"wait_num": 2}, units=15)
    assert 2 * 15 <= counted <= made <= counted + N


# -- what an adapter cannot carry, it says ------------------------------------------------------------

@pytest.mark.parametrize("adapter", sorted(CARRIES))
def test_supports_names_each_space_it_cannot_carry(adapter):
    carried_obs, carried_act = CARRIES[adapter]
    policy = MLP if adapter in LEARNERS else RANDOM
    wrong = []
    for obs in OBS:
        for act in ACT:
            reason = _supports(adapter, _workload(obs=obs, act=act, policy=policy))
            if obs not in carried_obs:
                want = REASON.get((adapter, obs), f"{OBS[obs]} observations: {adapter} carries ")
            elif act not in carried_act:
                want = f"{ACT[act]} actions: {adapter} carries "
            else:
                want = None
            if (want is None and reason is not None) or (want is not None and want not in (reason or "")):
                wrong.append((obs, act, reason, want))
    assert not wrong, wrong


@pytest.mark.parametrize("adapter, options, reason", [
    ("tianshou-dummy", {}, "Tuple observations: tianshou-dummy carries Box, Discrete, MultiDiscrete, MultiBinary, Dict only"),
    ("rlpyt-cpu", {}, None),   # a Tuple's parts an array each, as a Dict's (docs/strategies/stepping.md)
    ("sample-factory", {}, "Tuple observations: sample-factory carries Box, MultiDiscrete, MultiBinary, Dict only"),
])
def test_the_reason_lists_what_it_carries(adapter, options, reason):
    assert _supports(adapter, _workload(obs="tuple"), options) == reason


def test_learners_carry_dict_observations_or_say_which_do_before_building_anything():
    for adapter in sorted(LEARNERS):
        for obs in ("dict", "tuple"):
            reason = _supports(adapter, _workload(obs=obs, policy=MLP))
            if adapter in DICT_LEARNERS or (adapter, obs) == ("sb3-ppo", "dict"):
                assert reason is None, (adapter, obs, reason)
            else:
                assert reason == ("Tuple observations: sb3-ppo carries Box, Dict only (SB3's policies take no Tuple "
                                  f"observations; {CARRY_DICT_AND_TUPLE})"), (adapter, obs, reason)
    for adapter in sorted(DICT_LEARNERS):   # a part no array holds (MiniGrid's mission, a str) is named
        assert _supports(adapter, _workload(obs="mission", policy=MLP)) == (
            f"MissionSpace observations (at mission): {adapter} carries Box, Discrete, MultiDiscrete, MultiBinary, "
            "in Dicts and Tuples too, only")
    assert _supports("sb3-ppo", _workload(obs="mission", policy=MLP)) == (
        "MissionSpace observations (at mission): sb3-ppo's MultiInputPolicy takes a Dict of Box, Discrete, "
        "MultiDiscrete, MultiBinary parts only")


def test_sb3_ppo_refuses_a_screen_too_small_for_sb3s_cnn():
    """SB3's CombinedExtractor puts its NatureCNN on every uint8 image part of a Dict: smaller than 36x36, refused
    up front (mission's 3x3 image is named after its text part); at 36x36 it runs."""
    small = Workload(FACTORY, N, MLP, seed=0, env_kwargs={**SHORT, "obs": "dict_image", "screen": "24x40"})
    assert _supports("sb3-ppo", small) == ("image 'screen' of 24x40: sb3-ppo's MultiInputPolicy puts SB3's NatureCNN "
                                           "on it, which needs at least 36x36")
    assert _supports("sb3-ppo", Workload(FACTORY, N, MLP, seed=0,
                                         env_kwargs={**SHORT, "obs": "dict_image", "screen": "36x36"})) is None


LEARNER_UNITS = {   # (options, env steps per unit with N envs)
    "impala": ({"workers": 2, "unroll": 4, "batch": 2}, 2 * 4 * N // 2),
    "seed": ({"workers": 2, "batch_T": 4}, 4 * N),
    "cleanrl-ppo": ({"num_steps": 4, "num_minibatches": 2, "update_epochs": 1}, 4 * N),
    "ddp": ({"ranks": 1, "batch_T": 4}, 4 * N),
    "rlpyt-sync": ({"ranks": 1, "batch_T": 4}, 4 * N),
    "sb3-ppo": ({"num_steps": 4, "num_minibatches": 2, "update_epochs": 1}, 4 * N),
}
EXACT = [(a, o) for a in sorted(LEARNER_UNITS) for o in ("dict", "tuple") if (a, o) != ("sb3-ppo", "tuple")]


@pytest.mark.parametrize("adapter, obs", EXACT, ids=[f"{a}-{o}" for a, o in EXACT])
def test_the_learners_that_carry_dicts_train_an_mlp_on_every_part(adapter, obs):
    """The corridor's Dict (a Box, a Discrete, a MultiBinary) and Tuple (a Box, a Discrete): every part in a buffer
    of its own, the network reading them as one flat input; each unit's env steps exact."""
    options, per_unit = LEARNER_UNITS[adapter]
    session = _open(adapter, _workload(FACTORY, obs=obs, policy=MLP), options)
    try:
        assert [session.step() for _ in range(3)] == [per_unit] * 3
    finally:
        session.close()


# the learners whose units count what updates consumed while actors run on (a3c, ga3c), or what actors made
# (rlpyt-async, apex, r2d2): (options, the steps a unit counts a multiple of)
ASYNC_UNITS = {
    "a3c": ({"workers": 2, "batch_T": 4, "updates_per_unit": 1}, 4 * N // 2),
    "ga3c": ({"agents": 2, "t_max": 4, "train_batch": 2}, 4 * N // 2),
    "rlpyt-async": ({"workers": 2, "batch_T": 4, "minibatch": 8, "capacity": 256}, 4 * N // 2),
    "apex": ({"workers": 2, "learn_start": 16, "batch": 8, "flush": 8, "capacity": 256}, N // 2),
    "r2d2": ({"workers": 2, "learn_start": 4, "batch": 2, "seq_len": 6, "burn_in": 2, "overlap": 2, "capacity": 32},
             N // 2),
}


@pytest.mark.parametrize("obs", ["dict", "tuple"])
@pytest.mark.parametrize("adapter", sorted(ASYNC_UNITS))
def test_the_asynchronous_learners_count_no_step_the_envs_did_not_make(adapter, obs):
    """The corridor's Dict and Tuple, counted in shared memory as the actors step them: every unit counts whole
    rollouts (or whole steps of an actor's envs), and never more env steps than the envs made."""
    options, granule = ASYNC_UNITS[adapter]
    with COUNT.get_lock():
        COUNT.value = 0
    session = _open(adapter, _workload(COUNTED, obs=obs, policy=MLP), options)
    try:
        counted = [session.step() for _ in range(4)]
        made = COUNT.value
    finally:
        session.close()
    assert all(c % granule == 0 for c in counted) and sum(counted) > 0, counted
    assert sum(counted) <= made, (counted, made)


@pytest.mark.parametrize("adapter", ["envpool-sync", "envpool-async", "envpool-xla", "gymnax", "purejaxrl-ppo",
                                     "brax"])
@pytest.mark.parametrize("env", [REGISTERED, FACTORY])
def test_the_users_own_env_is_native_nowhere(adapter, env):
    reason = _supports(adapter, _workload(env, obs="box", policy=MLP if adapter == "purejaxrl-ppo" else RANDOM))
    assert reason is not None and env in reason


def test_policy_mlp_flattens_any_observation_and_refuses_actions_it_cannot_pick():
    for obs in ("dict", "tuple", "multibinary"):
        for act in ("discrete", "box"):
            workload = _workload(obs=obs, act=act, policy=MLP)
            got = _trajectory("serial", workload, steps=3)
            assert len(got) == 4
    for act in ("multidiscrete", "multibinary"):
        with pytest.raises(Unsupported, match=f"{ACT[act]} actions: policy mlp picks Discrete, Box actions only"):
            registry.get("serial")().open(_workload(act=act, policy=MLP), {})


# -- plain gymnasium ids: native in EnvPool and gymnax where their registries have the same id ----------

@pytest.mark.parametrize("adapter, workload, options, reason", [
    ("envpool-sync", Workload("Acrobot-v1", 4), {}, None),
    ("envpool-async", Workload("Pendulum-v1", 4), {}, None),
    ("envpool-xla", Workload("MountainCar-v0", 4), {}, None),
    ("cleanrl-ppo", Workload("Acrobot-v1", 4, MLP), {"vec": "envpool"}, None),
    ("envpool-sync", Workload("Taxi-v4", 4), {}, "envpool has no native Taxi-v4"),
    ("sb3-ppo", _workload(obs="box", policy=MLP), {"vec": "envpool"}, f"envpool has no native {REGISTERED}"),
    ("cleanrl-ppo", Workload("Taxi-v4", 4, MLP), {"vec": "envpool"}, "Discrete observations: cleanrl-ppo carries Box"),
    ("envpool-sync", Workload("Acrobot-v1", 4, env_kwargs={"render_mode": None}), {},
     "envpool-sync runs envpool's own Acrobot-v1, which takes envpool's arguments, not gymnasium's: no env_kwargs "
     "(got render_mode)"),
    ("gymnax", Workload("Acrobot-v1", 4), {}, None),
    ("gymnax", Workload("Pendulum-v1", 4), {}, None),                 # Box actions: the session samples them
    ("gymnax", Workload("MountainCarContinuous-v0", 4), {}, None),
    ("purejaxrl-ppo", Workload("Acrobot-v1", 4, MLP), {}, None),
    ("purejaxrl-ppo", Workload("Pendulum-v1", 4, MLP), {}, None),        # Box actions: a Gaussian
    ("gymnax", Workload("FrozenLake-v1", 4), {}, "gymnax has no native FrozenLake-v1"),
    ("gymnax", Workload("Pong-v5", 4), {}, "gymnax has no Pong-v5 (valid: CartPole-v1"),
])
def test_gymnasium_ids_are_native_where_the_frameworks_registry_has_them(adapter, workload, options, reason):
    got = _supports(adapter, workload, options)
    assert got == reason if reason is None else reason in (got or ""), got


def test_gymnax_registry_is_read_without_starting_jax_here():
    from adapters._kit import native
    had_gymnax = "gymnax" in sys.modules
    native._gymnax_ids.cache_clear()
    ids = native._gymnax_ids()
    assert {"CartPole-v1", "Acrobot-v1", "Pendulum-v1", "MountainCar-v0"} <= ids
    assert had_gymnax or "gymnax" not in sys.modules


def test_envpool_steps_a_gymnasium_id_it_has():
    workload = Workload("Acrobot-v1", 4, seed=0)
    session = _open("envpool-sync", workload)
    try:
        counts = [session.step() for _ in range(20)]
        assert all(0 <= c <= 4 for c in counts) and sum(counts) == 80   # Acrobot's episodes last 500 steps
        assert session.obs.shape == (4, 6)
    finally:
        session.close()


# -- slower: Ray, and whole runs through the CLI (cells in their own processes) ------------------------

@pytest.mark.slow
@pytest.mark.parametrize("adapter, options", RAY, ids=[f"{a}{o or ''}" for a, o in RAY])
def test_ray_adapters_give_serials_transitions(adapter, options):
    workload = _workload(FACTORY)
    _assert_same(_trajectory(adapter, workload, options, steps=10), _serial(workload)[:11], f"{adapter}{options}")


@pytest.mark.slow
def test_gymnax_and_envpool_run_gymnasium_ids_through_the_cli(tmp_path, capsys):
    run = run_cli(["run", "--adapter", "gymnax", "--adapter", "envpool-xla", "--adapter", "envpool-sync",
                   "--env", "Acrobot-v1", "--env", "Pendulum-v1", "--env", REGISTERED, "--num-envs", 4, *TINY],
                  tmp_path / "run", capsys)
    assert run.rc == 0, run.stderr
    ok = {(r["adapter"], r["env"]) for r in run.rows if r["status"] == "ok"}
    assert ok == {(a, e) for a in ("gymnax", "envpool-xla", "envpool-sync") for e in ("Acrobot-v1", "Pendulum-v1")}
    assert not any(r["env"] == REGISTERED and r["status"] == "ok" for r in run.rows)  # dropped, or unsupported


@pytest.mark.slow
def test_sample_factory_runs_the_users_env_in_its_own_environment(tmp_path, capsys):
    from rlbench.running.adapter_envs import environment_of
    if environment_of(registry.get("sample-factory")).record() is None:
        pytest.skip("sample-factory's own environment is not built (rlbench envs --build sample-factory)")
    run = run_cli(["run", "--adapter", "sample-factory", "--env", FACTORY, "--env-kwarg", "obs=multibinary",
                   "--env-kwarg", "act=box", "--num-envs", 2, *TINY], tmp_path / "run", capsys)
    assert run.rc == 0, run.stderr
    row = run.row("sample-factory")
    assert row["status"] == "ok", row.get("error")
    assert row["env_steps"] > 0 and row["env_steps"] % (2 * 32) == 0
