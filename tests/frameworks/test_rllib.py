"""RLlib's own adapters (adapters/rllib.py): `rllib-envrunner` (RLlib's SingleAgentEnvRunners as Ray actors)
and `rllib-ppo` (RLlib's PPO train()), in their own environment (adapters/envs/rllib.txt: ray[rllib] 2.60.0,
gymnasium 1.2.2).

In the main environment: the module is listed, its options and supports() work without RLlib, the pins
are exact. The tests marked slow run real cells in the rllib environment the harness builds (cached under
.venvs/; they skip, naming the reason, only when it cannot be built): both adapters beside ray-actors, a
killed env runner an error row, and nothing of Ray (daemons, session directories, Algorithm log
directories) outliving a cell."""
import ast
import os
import re
import shutil
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest
from support import REPO, TINY_PROTOCOL, run_cli, write_suite
from support.procs import matching, ours, text

from rlbench import registry
from rlbench.api import PolicySpec, Unsupported, Workload
from rlbench.planning.plan import Cell, Settings

MLP = PolicySpec("mlp", hidden=(64, 64))
RAY_DAEMONS = ("raylet", "gcs_server")
ENV_FILE = REPO / "adapters" / "envs" / "rllib.txt"


def _supports(name, workload, **given):
    cls = registry.get(name)
    return cls().supports(workload, cls.resolve_options(given))


# -- in the main environment ----------------------------------------------------------------------------------

def test_adapters_declare_their_environment_and_kind():
    for name, kind in (("rllib-envrunner", "vector_env"), ("rllib-ppo", "learner")):
        cls = registry.get(name)
        assert cls.environment == "rllib" and cls.kind == kind and cls.requires == ("ray", "torch")
    assert ENV_FILE.is_file()


def test_module_imports_only_stdlib_rlbench_and_the_kit_at_top():
    tree = ast.parse((REPO / "adapters" / "rllib.py").read_text())
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    names = {a.name.split(".")[0] for n in top if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module.split(".")[0] for n in top if isinstance(n, ast.ImportFrom)}
    assert names <= {"collections", "math", "os", "shutil", "tempfile", "time", "rlbench", "adapters"}


def test_requirements_are_fully_pinned_with_rllibs_gymnasium_and_the_local_torch():
    pins = {}
    for line in ENV_FILE.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([A-Za-z0-9_.+\-]+)", line)
            assert m, f"not an exact pin: {line}"
            pins[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = m.group(2)
    assert pins["ray"] == "2.60.0" and pins["torch"] == "2.13.0"
    assert pins["gymnasium"] == "1.2.2" and pins["numpy"] == "2.4.6"   # what ray[rllib]==2.60.0 resolves to
    assert pins["pandas"] == "3.1.1" and pins["pyarrow"] == "26.0.1"
    assert {"psutil", "filelock", "dm-tree", "lz4", "ormsgpack", "scipy", "pyyaml"} <= set(pins)
    assert "rlbench" not in pins and "pip" not in pins


def test_options_resolve_and_name_valid_choices():
    env = registry.get("rllib-envrunner").resolve_options({"num_env_runners": "0"})
    assert env["num_env_runners"] == 0 and env["batch_mode"] == "truncate_episodes"
    assert env["rollout_fragment_length"] == 32 and env["vectorize_mode"] == "sync"
    ppo = registry.get("rllib-ppo").resolve_options({})
    assert ppo["num_steps"] == 128 and ppo["update_epochs"] == 4 and ppo["num_minibatches"] == 4
    assert ppo["num_env_runners"] == 2 and ppo["num_learners"] == 0 and ppo["total_timesteps"] == 500_000
    with pytest.raises(ValueError, match="valid: truncate_episodes, complete_episodes"):
        registry.get("rllib-envrunner").resolve_options({"batch_mode": "episodes"})
    with pytest.raises(ValueError, match="valid: sync, async"):
        registry.get("rllib-ppo").resolve_options({"vectorize_mode": "threads"})


def test_supports_gives_reasons():
    cart = Workload("CartPole-v1", 4)
    assert _supports("rllib-envrunner", cart) is None
    assert _supports("rllib-envrunner", Workload("CartPole-v1", 3), num_env_runners=0) is None
    assert "multiple of num_env_runners=2" in _supports("rllib-envrunner", Workload("CartPole-v1", 3))
    assert "policy random or mlp" in _supports("rllib-envrunner", Workload("CartPole-v1", 4,
                                                                           PolicySpec("fixed_cost", cost_us=5)))
    assert "not Pong-v5" in _supports("rllib-envrunner", Workload("Pong-v5", 4, frameskip=4))
    assert _supports("rllib-envrunner", Workload("rlbench/Synthetic-v0", 4, MLP)) is None
    assert _supports("rllib-ppo", Workload("CartPole-v1", 4, MLP)) is None
    assert "policy mlp" in _supports("rllib-ppo", cart)
    assert "multiple of num_minibatches=3" in _supports("rllib-ppo", Workload("CartPole-v1", 4, MLP),
                                                          num_minibatches=3, num_steps=1)


@pytest.mark.parametrize("name", ["rllib-envrunner", "rllib-ppo"])
def test_no_cuda_is_unsupported_before_ray_starts(name):
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    cls = registry.get(name)
    with pytest.raises(Unsupported, match="^no CUDA device$"):
        cls().open(Workload("CartPole-v1", 4, PolicySpec("mlp", device="cuda")), cls.resolve_options({}))


def test_cell_specs_resolve_in_the_isolated_environment():
    for name, w, o in (("rllib-envrunner", Workload("CartPole-v1", 4), {"num_env_runners": 2}),
                       ("rllib-ppo", Workload("CartPole-v1", 4, MLP), {"num_env_runners": 0})):
        cls = registry.get(name)
        spec = Cell(name, w, cls.resolve_options(o), o).spec(Settings(), 0)
        assert spec["adapter"] == name and cls.resolve_options(spec["options"]) == spec["options"]


def test_episode_returns_as_train_hands_them_back():
    from adapters.rllib import _items
    assert _items(None) == [] and _items([]) == [] and _items(24.0) == [24.0] and _items([9.0, 18.0]) == [9.0, 18.0]


def test_snippet_is_rllibs_own_api():
    cls = registry.get("rllib-envrunner")
    text = cls().snippet(Workload("CartPole-v1", 4), cls.resolve_options({}))
    assert "PPOConfig()" in text and "num_envs_per_env_runner=2" in text and "EnvRunnerGroup" in text


# -- real cells in the rllib environment (slow) -------------------------------------------------------------

def _ray_daemons(since) -> set:
    return {p.pid for p in matching(RAY_DAEMONS, since)}


@pytest.fixture(scope="module")
def rllib_env():
    """The rllib environment, built (or found cached) as `rlbench run` would; skipped only if it cannot be."""
    from rlbench.running.adapter_envs import EnvBuildError, environment_of
    try:
        return environment_of(registry.get("rllib-envrunner")).ensure()
    except EnvBuildError as exc:
        pytest.skip(f"the rllib environment cannot be built here: {exc}")


@pytest.fixture
def nothing_of_ray_left(monkeypatch, rllib_env):
    """Ray's temp root (RAY_TMPDIR) and ~/ray_results-equivalent checked after the test: no Ray daemon the test
    started still runs, no session directory is left under the temp root, no Algorithm log directory in ~."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    root = tempfile.mkdtemp(prefix="rlt", dir="/tmp")   # short: Ray's socket paths live under it
    monkeypatch.setenv("RAY_TMPDIR", root)
    results = Path.home() / "ray_results"
    results_before = set(os.listdir(results)) if results.is_dir() else set()
    since = time.time()
    daemons = _ray_daemons(since)
    yield root
    deadline = time.monotonic() + 10
    while _ray_daemons(since) - daemons and time.monotonic() < deadline:
        time.sleep(0.2)
    try:
        assert _ray_daemons(since) - daemons == set(), "a Ray daemon outlived the cell"
        sessions = [p for p in Path(root).glob("ray/session_*") if p.is_dir() and not p.is_symlink()]
        assert sessions == [], f"Ray session directories left: {sessions}"
        left = (set(os.listdir(results)) if results.is_dir() else set()) - results_before
        assert left == set(), f"Algorithm log directories left in {results}: {left}"
    finally:
        shutil.rmtree(root, ignore_errors=True)


PROTOCOL = """[protocol]
repeats = 1
warmup_s = 0.2
warmup_units = 2
duration_s = 1.0
min_units = 3
timeout_s = 300
"""

SUITE = """
[[sweep]]   # RLlib's env runners beside the hand-written Ray actors, same workload (2 actors x 2 envs)
adapters = ["rllib-envrunner", "ray-actors"]
envs = ["CartPole-v1"]
num_envs = [4]

[[sweep]]   # one local EnvRunner, RLlib's RLModule acting (no Ray actor)
adapters = ["rllib-envrunner"]
envs = ["CartPole-v1"]
num_envs = [2]
policy = ["mlp:hidden=64x64"]
options.rllib-envrunner = { num_env_runners = [0], batch_mode = ["complete_episodes"] }

[[sweep]]   # RLlib's PPO beside cleanrl-ppo: one train() iteration per unit
adapters = ["rllib-ppo", "cleanrl-ppo"]
envs = ["CartPole-v1"]
num_envs = [4]
policy = ["mlp:hidden=64x64"]
options.rllib-ppo = { num_steps = [32] }
options.cleanrl-ppo = { num_steps = [32] }

[[sweep]]   # no GPU here: unsupported, never a crash
adapters = ["rllib-envrunner"]
envs = ["CartPole-v1"]
num_envs = [2]
policy = ["mlp:device=cuda"]
"""


@pytest.fixture(scope="module")
def real_run(tmp_path_factory, rllib_env):
    """Run once for the module's checks (the nothing-left checks are the killed-runner tests' and this
    module's last test's)."""
    base = tmp_path_factory.mktemp("rllib-real")
    suite = write_suite(base, SUITE, protocol=PROTOCOL)
    return run_cli(["run", str(suite)], base / "out")


@pytest.mark.slow
def test_real_cells_run_beside_ray_actors_and_cleanrl(real_run):
    rows = {(r["adapter"], r["policy"]): r for r in real_run.rows}
    bad = [(r["cell_id"], r["status"], r.get("error")) for r in real_run.rows
           if r["status"] != "ok" and r["policy"] != "mlp64x64-cuda-t1"]
    assert not bad, bad

    runners = rows[("rllib-envrunner", "random")]
    units, steps = runners["units"], runners["env_steps"]
    # 2 runners x 2 envs x 32 steps per sample(); RLlib stops a runner's loop at the first vector step that
    # reaches its 64, and an autoreset step is no env step: at most 1 extra step per runner per unit
    assert units * 128 <= steps <= units * 130, (units, steps)
    assert runners["workers"] == 2 and runners["batch_size"] == 128 and runners["runtime_init_s"] > 0
    assert sorted(p["runner"] for p in runners["placement"]) == [1, 2]
    assert all(p["pid"] > 0 for p in runners["placement"])
    assert rows[("ray-actors", "random")]["status"] == "ok"

    local = rows[("rllib-envrunner", "mlp64x64-cpu-t1")]
    assert local["workers"] == 1 and [p["runner"] for p in local["placement"]] == [0]
    assert local["env_steps"] >= 2 * 9 * local["units"]   # whole CartPole episodes (at least 9 steps), 2 envs

    ppo = rows[("rllib-ppo", "mlp64x64-cpu-t1")]
    assert ppo["kind"] == "learner" and ppo["batch_size"] == 128 and ppo["workers"] == 2
    assert ppo["units"] >= 3 and 128 * ppo["units"] <= ppo["env_steps"] <= 130 * ppo["units"]
    # 4 epochs over 128-130 steps plus one bootstrap row per episode chunk, in full minibatches of 32
    updates = ppo["updates_per_s"] * ppo["seconds"]
    assert updates == pytest.approx(round(updates)) and 16 <= updates / ppo["units"] <= 20, updates
    assert ppo["samples_per_s"] == pytest.approx(ppo["steps_per_s"])
    assert ppo["return_mean"] is not None and ppo["return_mean"] > 8   # CartPole returns are at least 8
    assert "time_to_target_s" in ppo and rows[("cleanrl-ppo", "mlp64x64-cpu-t1")]["status"] == "ok"

    cuda = rows[("rllib-envrunner", "mlp64x64-cuda-t1")]
    assert cuda["status"] == "unsupported" and cuda["error"] == "no CUDA device"


@pytest.mark.slow
def test_env_json_records_the_rllib_environment(real_run):
    record = real_run.env["adapter_envs"]["rllib"]
    assert record["packages"]["ray"] == "2.60.0" and record["packages"]["gymnasium"] == "1.2.2"
    assert record["python"].endswith("/bin/python")


def _cpu_s(p) -> float:
    t = p.cpu_times()
    return t.user + t.system


def _kill_a_runner(killed, sampled_cpu_s=1.0, deadline_s=240):
    """Kill an RLlib env runner actor once it is sampling: after its __init__ (the process title Ray gives it
    is `ray::SingleAgentEnvRunner.__init__` until then), the set-up calls cost it milliseconds, so a CPU
    second more means sample() rounds, i.e. the cell is inside its timed protocol."""
    deadline, runner, base = time.monotonic() + deadline_s, None, 0.0
    while not killed and time.monotonic() < deadline:
        try:
            if runner is None:
                for p in ours():   # this test's cell's runners, never another run's
                    title = text(p)
                    if "ray::SingleAgentEnvRunner" in title and "__init__" not in title:
                        runner, base = p, _cpu_s(p)
                        break
            elif _cpu_s(runner) - base >= sampled_cpu_s:
                runner.kill()
                killed.append(runner.pid)
                return
        except psutil.Error:
            runner = None
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("adapter, policy", [("rllib-envrunner", "random"), ("rllib-ppo", "mlp")])
def test_a_killed_env_runner_is_an_error_row_and_nothing_outlives_the_cell(tmp_path, nothing_of_ray_left,
                                                                           adapter, policy):
    suite = write_suite(tmp_path, f"""
[[sweep]]
adapters = ["{adapter}"]
envs = ["CartPole-v1"]
num_envs = [2]
policy = ["{policy}"]
""", protocol=TINY_PROTOCOL.replace("duration_s = 0.05", "duration_s = 60").replace("timeout_s = 60",
                                                                                       "timeout_s = 300"))
    killed = []
    killer = threading.Thread(target=_kill_a_runner, args=(killed,))
    killer.start()
    run = run_cli(["run", str(suite)], tmp_path / "run")
    killer.join()
    assert killed, "no RLlib env runner process was found to kill"
    assert run.rc == 1  # an error row: exit 1, the report still written
    row = run.row(adapter)   # the window (60 s) ends early: the unit the runner's death failed ends the cell
    assert row["status"] == "error" and row["error"].startswith("ActorDiedError"), row
    assert "SingleAgentEnvRunner" in row["error"] and str(killed[0]) in row["error"], row["error"]
    log = (tmp_path / "run" / row["log"]).read_text()
    assert "in measure" in log and "rllib.py" in log, log[-3000:]   # a unit failed, not open()


@pytest.mark.slow
def test_a_cell_leaves_nothing_of_ray(tmp_path, nothing_of_ray_left):
    suite = write_suite(tmp_path, """
[[sweep]]
adapters = ["rllib-envrunner", "rllib-ppo"]
envs = ["CartPole-v1"]
num_envs = [2]
policy = ["mlp"]
options.rllib-ppo = { num_steps = [16] }
""", protocol=TINY_PROTOCOL.replace("timeout_s = 60", "timeout_s = 300"))
    run = run_cli(["run", str(suite)], tmp_path / "run")
    assert run.rc == 0, [(r["cell_id"], r.get("error")) for r in run.rows]
    assert {r["adapter"] for r in run.rows if r["status"] == "ok"} == {"rllib-envrunner", "rllib-ppo"}
