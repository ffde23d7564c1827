"""A user's JAX env (`--env package.module:factory` returning an env with gymnax's, Jumanji's, Brax's, Navix's,
JaxMARL's or gxm's API) runs on the JAX adapters with the same accounting as gymnax's own envs; every other adapter is
dropped while planning with the reason; the APIs give the same transitions; a real package's env (Craftax) runs
end to end.

The envs: examples/toyenvs/jax_corridor.py (one corridor, every API). Nothing here imports JAX into the test
runner (later forks would be unsafe): planning runs in `rlbench` subprocesses, sessions in a spawned
interpreter (`jax` fixture)."""
import importlib.util
import json
import os
import sys

import numpy as np
import pytest
from support import REPO, TINY_PROTOCOL, run_cli_subprocess, write_suite
from support.procs import spawned

MISSING = [m for m in ("jax", "gymnax", "optax") if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"not installed: {', '.join(MISSING)}")
EXAMPLES = str(REPO / "examples")
GYMNAX_API = "toyenvs.jax_corridor:make_gymnax"
GYMNAX_BEFORE_1 = "toyenvs.jax_corridor:make_gymnax_before_1"
JUMANJI_API = "toyenvs.jax_corridor:make_jumanji"
BRAX_API = "toyenvs.jax_corridor:make_brax"
NAVIX_API = "toyenvs.jax_corridor:make_navix"
JAXMARL_API = "toyenvs.jax_corridor:make_jaxmarl"
GXM_API = "toyenvs.jax_corridor:make_gxm"
PIXELS = "toyenvs.jax_corridor:make_gymnax_pixels"   # 48x64x3 uint8 (layout=chw: 4x48x64 float32)
CRAFTAX = "craftax.craftax_env:make_craftax_env_from_name"


@pytest.fixture(autouse=True)
def examples_on_pythonpath(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (EXAMPLES, os.environ.get("PYTHONPATH")) if p))


def _run(tmp_path, *args, timeout=300):
    return run_cli_subprocess(["run", "--repeats", "1", "--duration", "0.05", "--warmup", "0.02", *args],
                              tmp_path / "run", timeout=timeout)


def test_gymnasium_adapters_are_dropped_before_anything_runs_with_the_api_named(tmp_path):
    run = _run(tmp_path, "--adapter", "serial", "--adapter", "gymnasium-sync", "--env", GYMNAX_API)
    assert run.rc == 2 and not (tmp_path / "run").exists()
    line = run.stderr.strip().splitlines()[-1]
    assert line.count("\n") == 0 and "no cell can run" in line
    assert (f"{GYMNAX_API} is a JAX env (gymnax API): serial steps gymnasium envs; JAX envs of this API run on "
            "gymnax, purejaxrl-ppo") in line


def _jax_suite(tmp_path, adapters: list, env: str, policy: str):
    """A suite of `env` at 8 envs under `adapters`, gymnax's scans of 5 steps and PPO's updates of 4."""
    names = ", ".join(f'"{a}"' for a in adapters)
    return write_suite(tmp_path, (
        f'[[sweep]]\nadapters = [{names}]\nenvs = ["{env}"]\nnum_envs = [8]\npolicy = ["{policy}"]\n'
        "options.gymnax = { scan_T = [5] }\n"
        "options.purejaxrl-ppo = { num_steps = [4], num_minibatches = [2], update_epochs = [1] }\n"))


@pytest.mark.slow
@pytest.mark.parametrize("env", [GYMNAX_API, JUMANJI_API, BRAX_API, NAVIX_API, JAXMARL_API, GXM_API])
def test_each_api_runs_on_gymnax_and_purejaxrl_with_exact_counts(tmp_path, env):
    """Brax's API has continuous actions (Brax's convention): PPO samples them from a Gaussian."""
    suite = _jax_suite(tmp_path, ["gymnax", "purejaxrl-ppo", "serial"], env, "mlp:hidden=16")
    run = run_cli_subprocess(["run", str(suite)], tmp_path / "run", timeout=300)
    assert run.rc == 0, run.stderr[-2000:]
    assert "serial steps gymnasium envs" in run.stderr       # dropped, not a row
    gymnax = run.row("gymnax")
    assert gymnax["status"] == "ok", run.rows
    assert gymnax["env_steps"] % (8 * 5) == 0 and gymnax["env_steps"] > 0 and gymnax["compile_s"] > 0
    assert gymnax["env_api"] == env.rsplit("_", 1)[1]
    assert {r["adapter"] for r in run.rows} == {"gymnax", "purejaxrl-ppo"}
    ppo = run.row("purejaxrl-ppo")
    assert ppo["status"] == "ok", run.rows
    assert ppo["env_steps"] % (8 * 4) == 0 and ppo["updates_per_s"] > 0


def test_a_declared_api_the_env_lacks_and_a_gymnasium_factory_are_refused_on_gymnax(tmp_path):
    run = _run(tmp_path, "--adapter", "gymnax", "--env", GYMNAX_API, "--opt", "env_api=jumanji")
    assert run.rc == 2 and f"env_api=jumanji: {GYMNAX_API} has no jumanji API" in run.stderr
    run = _run(tmp_path, "--adapter", "gymnax", "--env", "toyenvs:make_corridor")
    assert run.rc == 2 and "gymnax runs JAX envs: toyenvs:make_corridor builds a gymnasium.Env" in run.stderr


def test_a_factory_returning_neither_api_is_a_usage_error_naming_both(tmp_path):
    (tmp_path / "notanenv.py").write_text("def make():\n    return object()\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(tmp_path), EXAMPLES))}
    run = run_cli_subprocess(["run", "--adapter", "gymnax", "--env", "notanenv:make"], tmp_path / "run", env=env)
    assert run.rc == 2 and not (tmp_path / "run").exists()
    line = run.stderr.strip().splitlines()[-1]
    assert "the factory returned object, not a gymnasium.Env nor a JAX env with gymnax's (" in line
    assert "Jumanji's" in line and "Brax's" in line


def test_a_factory_named_by_a_dotted_path_and_a_multi_agent_env(tmp_path):
    """`module:object.function`, as entry points name one (MuJoCo Playground's `mujoco_playground:registry.load`),
    is a factory; a multi-agent env (JaxMARL's: `agents`, `num_agents`) is one policy acting for the team: every
    agent's observation, a choice per agent (or their boxes joined); agents with mixed action kinds are refused."""
    (tmp_path / "userreg.py").write_text(
        "from toyenvs import jax_corridor\n"
        "class registry:\n    load = staticmethod(jax_corridor.make_brax)\n"
        "class Box:\n    low, high, shape = -1.0, 1.0, (2,)\n"
        "class Mixed(jax_corridor.JaxMARLCorridors):\n"
        "    def action_space(self, agent):\n"
        "        return Box() if agent == 'agent_1' else jax_corridor.Discrete(3)\n"
        "def make_mixed():\n    return Mixed(num_agents=2)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(tmp_path), EXAMPLES))}
    code = ("from rlbench.envs import env_api, spaces; "
            "print(env_api('userreg:registry.load', {}), *spaces('userreg:registry.load')); "
            f"print(env_api({JAXMARL_API!r}, {{}}), *spaces({JAXMARL_API!r}, {{'num_agents': 3}}), sep='|')")
    import subprocess
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    brax, marl = out.stdout.strip().splitlines()
    assert brax == "brax Box(-inf, inf, (3,), float32) Box(-1.0, 1.0, (1,), float32)"
    boxes = ", ".join(f"'agent_{i}': Box(-inf, inf, (3,), float32)" for i in range(3))
    assert marl == f"jaxmarl|Dict({boxes})|MultiDiscrete([3 3 3])"
    run = run_cli_subprocess(["run", "--adapter", "gymnax", "--env", "userreg:make_mixed"], tmp_path / "run", env=env)
    assert run.rc == 2 and not (tmp_path / "run").exists()
    assert ("env 'userreg:make_mixed': its agents' actions are Box, Discrete: rlbench carries a JaxMARL env whose "
            "agents all have a Discrete action or all a Box") in run.stderr.strip().splitlines()[-1]


def test_a_cnn_on_an_image_too_small_or_no_image_is_refused_while_planning_naming_the_size(tmp_path):
    """The Nature CNN's three convolutions leave no cell of a side under 36 (nets.py's torch refusal, word for
    word); the IMPALA ResNet takes any side; a vector observation is no image for either."""
    run = _run(tmp_path, "--adapter", "gymnax", "--adapter", "purejaxrl-ppo", "--env", PIXELS, "--env-kwarg",
               "height=32", "--policy", "cnn")
    assert run.rc == 2 and not (tmp_path / "run").exists()
    line = run.stderr.strip().splitlines()[-1]
    assert ("all 2 planned cells are impossible: policy cnn needs image observations of at least 36x36 (stacked "
            "frames CxHxW or HxWxC); got Box(32, 64, 3) (x2)") in line
    run = _run(tmp_path, "--adapter", "gymnax", "--env", GYMNAX_API, "--policy", "cnn:impala")
    assert run.rc == 2 and "policy cnn:impala needs image observations of at least 36x36" in run.stderr
    assert "got Box(3,)" in run.stderr


def test_planning_a_jax_env_keeps_jax_off_the_accelerator_and_out_of_the_cells_settings():
    """rlbench's own process plans on JAX's CPU backend, preallocating nothing, and leaves the variables as
    they were, so the cells (fresh processes) start JAX as their adapter sets it."""
    code = ("import os, sys; from rlbench.envs import env_api; "
            f"print(env_api({GYMNAX_API!r}, {{}})); "
            "import jax; print(jax.config.jax_platforms); "
            "print(os.environ.get('JAX_PLATFORMS'), os.environ.get('XLA_PYTHON_CLIENT_PREALLOCATE'))")
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_PLATFORMS", "XLA_PYTHON_CLIENT_PREALLOCATE")}
    import subprocess
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["gymnax", "cpu", "None", "None"]


# -- in a spawned JAX interpreter --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def jax():
    with spawned() as call:
        yield call


def _in_jax_trajectory(env_id, actions):
    """(flat obs, reward, done) per step of 4 corridors under the given actions, through the functional
    interface the adapters use."""
    sys.path.insert(0, EXAMPLES)
    import jax

    from adapters._kit.jax_env import flat, load
    from rlbench.api import PolicySpec, Workload
    env = load(jax, Workload(env_id, 4, PolicySpec(), env_kwargs={"length": 4, "episode_len": 6}))
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    obs, state = jax.vmap(env.reset)(keys)
    out = [(np.asarray(flat(jax, obs)), np.zeros(4), np.zeros(4, bool))]
    step = jax.jit(jax.vmap(env.step))
    for a in actions:   # a discrete move 0, 1, 2 (one agent's: a component); Brax's API, one float in [-1, 1]
        a = {"discrete": np.asarray(a, np.int32), "multidiscrete": np.asarray(a, np.int32)[:, None]}.get(
            env.action[0], np.asarray(a, np.float32)[:, None] - 1)
        obs, state, reward, done = step(keys, state, a)
        out.append((np.asarray(flat(jax, obs)), np.asarray(reward), np.asarray(done)))
    return env.obs_dim, env.action, out


def test_the_apis_give_the_same_transitions_resets_included(jax):
    """Brax's env neither ends at its time limit nor resets: rlbench does both (the time limit: the env's
    episode_length, else 1000); the corridor's own limit of 6 ends its episodes first, as in the others. An env
    written for gymnax before 1.0 (no `time` in its state for 1.0's step to read) steps as gymnax then did."""
    rng = np.random.default_rng(0)
    actions = [rng.integers(0, 3, 4) for _ in range(25)] + [np.full(4, 2)] * 4   # goals reached, time limits hit
    dim_g, act_g, gym_api = jax(_in_jax_trajectory, GYMNAX_API, actions)
    dim_o, act_o, old_api = jax(_in_jax_trajectory, GYMNAX_BEFORE_1, actions)
    dim_j, act_j, jum_api = jax(_in_jax_trajectory, JUMANJI_API, actions)
    dim_b, act_b, brax_api = jax(_in_jax_trajectory, BRAX_API, actions)
    dim_n, act_n, navix_api = jax(_in_jax_trajectory, NAVIX_API, actions)
    dim_m, act_m, marl_api = jax(_in_jax_trajectory, JAXMARL_API, actions)
    dim_x, act_x, gxm_api = jax(_in_jax_trajectory, GXM_API, actions)
    assert dim_g == dim_o == dim_j == dim_b == dim_n == dim_m == dim_x == 3
    assert act_g == act_o == act_j == act_n == act_x == ("discrete", 3)
    assert act_b[0] == "box" and act_b[1].tolist() == [-1.0] and act_b[2].tolist() == [1.0]
    assert act_m[0] == "multidiscrete" and act_m[1].tolist() == [3] and act_m[2].tolist() == [0]
    for steps in zip(gym_api, old_api, jum_api, brax_api, navix_api, marl_api, gxm_api):
        for i in range(3):   # observation, reward, done
            for other in steps[1:]:
                np.testing.assert_array_equal(steps[0][i], other[i])
    dones = np.array([d for _, _, d in gym_api])
    rewards = np.array([r for _, r, _ in gym_api])
    assert dones.sum() >= 4 and rewards.sum() >= 4      # episodes ended and envs went on (auto-reset)
    assert (rewards[dones == 0] == 0).all()             # the goal pays only on the step that ends there


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("craftax") is None, reason="craftax not installed")
def test_craftax_classic_runs_under_gymnax_with_its_own_factory(tmp_path):
    """Craftax (a package rlbench's authors did not write), through its own factory: ~30 s, most of it
    XLA compiling Craftax's step."""
    suite = write_suite(tmp_path, (
        f'[[sweep]]\nadapters = ["gymnax", "gymnasium-sync"]\nenvs = ["{CRAFTAX}"]\nnum_envs = [4]\n'
        'env_kwargs = { name = ["Craftax-Classic-Symbolic-v1"], auto_reset = [true] }\n'
        "options.gymnax = { scan_T = [4] }\n"), protocol=TINY_PROTOCOL.replace("timeout_s = 60", "timeout_s = 240"))
    run = run_cli_subprocess(["run", str(suite)], tmp_path / "run", timeout=400)
    assert run.rc == 0, run.stderr[-2000:]
    assert "gymnasium-sync steps gymnasium envs" in run.stderr
    row = run.row("gymnax")
    assert row["status"] == "ok" and row["env_steps"] % (4 * 4) == 0 and row["env_steps"] > 0
    assert row["env_api"] == "gymnax" and row["compile_s"] > 0


@pytest.mark.slow
def test_tune_races_the_jax_adapters_on_a_jax_env_from_2_to_the_8_envs_up(tmp_path):
    run = run_cli_subprocess(["tune", "--env", JUMANJI_API, "--budget", "20s"], tmp_path / "tune", timeout=300)
    assert run.rc == 0, run.stderr[-2000:]
    record = json.loads((tmp_path / "tune" / "tune.json").read_text())
    assert record["profile"]["api"] == "jumanji" and record["profile"]["adapter"] == "gymnax"
    assert record["profile"]["step"]["median_us"] > 0 and record["profile"]["policy_us_per_batch"] == {}
    assert record["calibration"]["adapters"] == {}          # a JAX env: no CPU calibration
    win = record["decision"]["winner"]
    assert win["adapter"] == "gymnax" and win["num_envs"] >= 256
    rows = [json.loads(line) for line in (tmp_path / "tune" / "results.jsonl").read_text().splitlines()]
    assert {r["adapter"] for r in rows} == {"gymnax"} and min(r["num_envs"] for r in rows) >= 256
    serial = next(s for s in record["decision"]["strategies"] if s["adapter"] == "serial")
    assert "is a JAX env (jumanji API): serial steps gymnasium envs" in serial["why"]
    assert "rlbench run --adapter gymnax" in run.stdout and "inside the program gymnax compiles" in run.stdout


def _masked_session(adapter, policy, options, env="jax_masked:make", env_kwargs=None):
    """Open `adapter` on tests/support/jax_masked.py (its state holds the observation; two of five actions
    legal per step), run 3 units; (env steps, returns): gymnax's reward summed per env, PPO's mean return."""
    sys.path.insert(0, str(REPO / "tests" / "support"))
    import numpy as np

    from rlbench import registry
    from rlbench.api import PolicySpec, Workload
    cls = registry.get(adapter)
    session = cls().open(Workload(env, 4, PolicySpec(policy, hidden=(16,)), seed=0, env_kwargs=env_kwargs or {}),
                         cls.resolve_options(options))
    try:
        steps = sum(session.step() for _ in range(3))
        out = session.returns() if adapter == "gymnax" else session.agent_returns()
        return steps, np.asarray(out).tolist()
    finally:
        session.close()


@pytest.mark.parametrize("policy", ["random", "mlp"])
def test_a_carry_holding_one_array_twice_runs_and_the_policy_keeps_to_the_legal_actions(jax, policy):
    """Before: 'Attempt to donate the same buffer twice' from the first compiled call; a policy blind to the
    env's action_mask ends episodes with -1000 (random: 3 of 5 actions illegal at every step)."""
    steps, returns = jax(_masked_session, "gymnax", policy, {"scan_T": 10})
    assert steps == 3 * 10 * 4
    assert returns == [30.0] * 4          # +1 a step, every step legal (time-limit resets included)


def test_action_spaces_are_read_as_each_package_writes_them():
    """gymnax's Discrete and Box, Jumanji's DiscreteArray, MultiDiscreteArray and integer BoundedArray
    (MultiCVRP's), gymnasium's MultiDiscrete (nvec) and Kinetix's (a scalar n, their total, with a count per
    component): read without JAX."""
    from types import SimpleNamespace as S

    from adapters._kit.jax_env import _action, action_kind
    assert _action(S(n=4, shape=()), "n", "low", "high") == ("discrete", 4)
    kind, nvec, low = _action(S(num_values=np.array([3, 4]), shape=(2,), dtype=np.int32), "num_values", "minimum",
                              "maximum")
    assert kind == "multidiscrete" and nvec.tolist() == [3, 4] and nvec.dtype == np.int32 and low.tolist() == [0, 0]
    kind, nvec, low = _action(S(shape=(2,), dtype=np.int16, minimum=np.int16(1), maximum=np.int16(21)),
                              "num_values", "minimum", "maximum")
    assert kind == "multidiscrete" and nvec.tolist() == [21, 21] and low.tolist() == [1, 1] and nvec.dtype == np.int16
    kinetix = S(n=3, shape=(4,), number_of_dims_per_distribution=np.array([3, 3, 2, 2]), dtype=np.int32)
    assert _action(kinetix, "n", "low", "high")[1].tolist() == [3, 3, 2, 2]
    assert action_kind(S(nvec=np.array([2, 5]), shape=(2,), dtype=np.int64)) == "MultiDiscrete"
    kind, lo, hi = _action(S(shape=(2,), dtype=np.float32, low=-np.inf, high=2.0), "n", "low", "high")
    assert kind == "box" and lo.tolist() == [-1.0, -1.0] and hi.tolist() == [2.0, 2.0]
    assert action_kind(S(shape=(2,), dtype=np.int64, low=0, high=2**40)) == "Box"   # too many values: a box


@pytest.mark.parametrize("mask", ["joint", "each", "bounded"])
@pytest.mark.parametrize("policy", ["random", "mlp"])
def test_a_multi_discrete_action_is_a_choice_per_component_within_the_legal_ones(jax, mask, policy):
    """Jumanji's BinPack, Sudoku, Tetris (a mask over every combination), JobShop and its multi-agent envs (a mask
    per component, a reward per agent: summed) and MultiCVRP (integers between bounds) once crashed the random
    policy (a float box sampled in int32) and were trained as a Gaussian by PPO. Every step legal: +1."""
    steps, returns = jax(_masked_session, "gymnax", policy, {"scan_T": 10}, "jax_masked:make_multi", {"mask": mask})
    assert steps == 3 * 10 * 4
    assert returns == [30.0] * 4


@pytest.mark.parametrize("adapter, options", [("gymnax", {"scan_T": 10}),
                                               ("purejaxrl-ppo", {"num_steps": 25, "num_minibatches": 2,
                                                                  "update_epochs": 1, "updates_per_unit": 2})])
def test_a_team_of_agents_chooses_each_within_its_own_legal_actions(jax, adapter, options):
    """JaxMARL's API: agents of 3 and 4 actions, `get_avail_actions` by agent (padded to one mask), a reward
    each (summed): a step all legal pays 1, one illegal choice -500 and ends the episode."""
    steps, returns = jax(_masked_session, adapter, "mlp", options, "jax_masked:make_team")
    if adapter == "gymnax":
        assert steps == 3 * 10 * 4 and returns == [30.0] * 4
    else:
        assert steps == 3 * 2 * 25 * 4 and returns == [50.0]


def test_a_team_whose_masks_are_its_legal_moves_keeps_to_them(jax):
    """Hanabi's masks are `get_legal_moves` (its `get_avail_actions` is the base class's, raising)."""
    steps, returns = jax(_masked_session, "gymnax", "random", {"scan_T": 10}, "jax_masked:make_team",
                         {"masks": "get_legal_moves"})
    assert steps == 3 * 10 * 4 and returns == [30.0] * 4


@pytest.mark.parametrize("mask", [pytest.param("joint", marks=pytest.mark.slow), "each",   # a PPO compile each
                                  pytest.param("bounded", marks=pytest.mark.slow)])
def test_ppo_samples_a_multi_discrete_action_within_the_legal_ones(jax, mask):
    """150 steps of each of 4 envs: 3 episodes of 50 legal steps each (an illegal one: -1000 and the end)."""
    options = {"num_steps": 25, "num_minibatches": 2, "update_epochs": 1, "updates_per_unit": 2}
    steps, returns = jax(_masked_session, "purejaxrl-ppo", "mlp", options, "jax_masked:make_multi", {"mask": mask})
    assert steps == 3 * 2 * 25 * 4
    assert returns == [50.0]


def _in_jax_gaussian_ppo(seed):
    """PPO on the Brax corridor (one action in [-1, 1], rounded to a move) until its last 100 episodes reach
    the goal 95% of the time, 200k env steps at most: (env steps to that, mean return, learned log std)."""
    sys.path.insert(0, EXAMPLES)
    from rlbench import registry
    from rlbench.api import PolicySpec, Workload
    cls = registry.get("purejaxrl-ppo")
    workload = Workload(BRAX_API, 8, PolicySpec("mlp", hidden=(16,)), seed=seed,
                        env_kwargs={"length": 8, "episode_len": 50})
    session = cls().open(workload, cls.resolve_options({"num_steps": 32, "updates_per_unit": 5,
                                                        "total_timesteps": 200_000, "target_return": 0.95}))
    try:
        first = session.step() and session.return_mean()
        while session.steps_to_target is None and session.iterations * 256 < 200_000:
            session.step()
        return first, session.steps_to_target, session.return_mean(), np.asarray(session.params(0)["log_std"])
    finally:
        session.close()


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_ppo_learns_continuous_actions(jax, seed):
    """A Gaussian whose log probability, clipping or loss had a wrong sign would stay near the random walk's
    return (about half its episodes reach the goal in 50 steps)."""
    first, steps, last, log_std = jax(_in_jax_gaussian_ppo, seed)
    assert first < 0.8, first
    assert steps is not None and steps <= 200_000, (first, last)
    assert log_std.shape == (1,) and np.isfinite(log_std).all()


@pytest.mark.slow
def test_ppo_samples_within_the_mask_while_it_learns(jax):
    steps, returns = jax(_masked_session, "purejaxrl-ppo", "mlp",
                         {"num_steps": 60, "num_minibatches": 2, "update_epochs": 1})
    assert steps == 3 * 60 * 4
    assert returns == [50.0]              # every finished episode ran to the time limit: never an illegal action


def _pixel_session(adapter, policy, options, env_kwargs):
    """Open `adapter` with `policy` on the pixel corridor (4 envs), run 3 units: (env steps, the actor's
    parameters by part: {"torso": n, "heads": n})."""
    sys.path.insert(0, EXAMPLES)
    import jax

    from adapters._kit.jax_cnn import torso_params
    from rlbench import registry
    from rlbench.api import PolicySpec, Workload
    cls = registry.get(adapter)
    opts = cls.resolve_options(options)
    workload = Workload(PIXELS, 4, PolicySpec(policy), seed=0, env_kwargs=env_kwargs)
    assert cls().supports(workload, opts) is None
    session = cls().open(workload, opts)
    try:
        steps = sum(session.step() for _ in range(3))
        params = session.params(0)["net"] if adapter == "purejaxrl-ppo" else session.params
        total = sum(leaf.size for leaf in jax.tree.leaves(params))
        return steps, {"torso": torso_params(params), "heads": total - torso_params(params)}
    finally:
        session.close()


GYMNAX_T5 = ("gymnax", {"scan_T": 5}, 5)
PPO_2X4 = ("purejaxrl-ppo", {"num_steps": 4, "num_minibatches": 2, "update_epochs": 1, "updates_per_unit": 2}, 2 * 4)


@pytest.mark.parametrize("adapter, options, per_unit, policy, layout", [
    (*GYMNAX_T5, "cnn", "hwc"), (*GYMNAX_T5, "cnn", "chw"), (*GYMNAX_T5, "cnn:impala", "chw"),
    (*PPO_2X4, "cnn", "hwc"),   # ~10-15 s on 2 cores, most of it XLA compiling the CNN's PPO
    pytest.param(*PPO_2X4, "cnn", "chw", marks=pytest.mark.slow),
    pytest.param(*PPO_2X4, "cnn:impala", "hwc", marks=pytest.mark.slow)])
def test_a_cnn_acts_and_trains_on_a_pixel_jax_env_with_exact_counts_and_nets_parameter_count(
        jax, adapter, options, per_unit, policy, layout):
    """The observation reaches the CNN in its own shape (48x64x3 uint8, or 4x48x64 float32 planes, transposed to
    NHWC); its torso has the torch CNN's parameters on the same frame (nets.cnn_params), the heads a linear layer
    from its features to the 3 actions (PPO's: and to the value)."""
    from adapters._kit.nets import CNN_OUT, CNN_POLICIES, cnn_params, dense_params, image_layout
    steps, params = jax(_pixel_session, adapter, policy, options, {"layout": layout})
    assert steps == 3 * per_unit * 4
    kind = CNN_POLICIES[policy]
    assert params["torso"] == cnn_params(kind, image_layout((48, 64, 3) if layout == "hwc" else (4, 48, 64)))
    heads = [3] if adapter == "gymnax" else [3, 1]
    assert params["heads"] == sum(dense_params([CNN_OUT[kind], h]) for h in heads)


@pytest.mark.slow
def test_policy_cnn_runs_on_a_pixel_jax_env_through_the_cli(tmp_path):
    suite = _jax_suite(tmp_path, ["gymnax", "purejaxrl-ppo"], PIXELS, "cnn")
    run = run_cli_subprocess(["run", str(suite)], tmp_path / "run", timeout=400)
    assert run.rc == 0, run.stderr[-2000:]
    gymnax, ppo = run.row("gymnax"), run.row("purejaxrl-ppo")
    assert gymnax["status"] == "ok" and ppo["status"] == "ok", run.rows
    assert gymnax["env_steps"] % (8 * 5) == 0 and gymnax["env_steps"] > 0 and gymnax["env_api"] == "gymnax"
    assert ppo["env_steps"] % (8 * 4) == 0 and ppo["env_steps"] > 0 and ppo["updates_per_s"] > 0


def _in_jax_patches_and_convolutions(policy, shape):
    """One CNN's actor and critic outputs and their gradients, through XLA's convolutions and through the im2col
    products PPO trains with on the CPU, with the same variables."""
    import jax
    import jax.numpy as jnp

    from adapters._kit.jax_cnn import cnn_network
    heads = (("actor", 3, 0.01), ("critic", 1, 1.0))
    init, native = cnn_network(jax, policy, shape, heads)
    init_patches, patches = cnn_network(jax, policy, shape, heads, patches=True)
    variables = init(jax.random.PRNGKey(0))
    same_tree = jax.tree.structure(variables) == jax.tree.structure(init_patches(jax.random.PRNGKey(0)))
    obs = jax.random.uniform(jax.random.PRNGKey(1), (16, *shape), maxval=255.0).astype(jnp.uint8)
    out = [jax.jit(apply)(variables, obs) for apply in (native, patches)]
    grads = [jax.jit(jax.grad(lambda v, apply=apply: sum((o ** 2).sum() for o in apply(v, obs))))(variables)
             for apply in (native, patches)]
    return same_tree, [[np.asarray(o) for o in outs] for outs in out], [
        [np.asarray(g) for g in jax.tree.leaves(grad)] for grad in grads]


@pytest.mark.parametrize("policy, shape", [("cnn", (48, 64, 3)),
                                           pytest.param("cnn:impala", (4, 33, 50), marks=pytest.mark.slow)])
def test_the_im2col_convolutions_ppo_trains_with_on_the_cpu_are_xlas(jax, policy, shape):
    same_tree, (native, patches), (g_native, g_patches) = jax(_in_jax_patches_and_convolutions, policy, shape)
    assert same_tree
    for a, b in zip(native, patches):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)
    for a, b in zip(g_native, g_patches):
        np.testing.assert_allclose(b, a, rtol=1e-3, atol=1e-5 * np.abs(a).max())
