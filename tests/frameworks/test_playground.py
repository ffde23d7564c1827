"""The playground adapter: imported by the main environment for names and supports() only; its tasks are the
dm_control family's env ids, whose physics steps per env step are the same in EnvPool and in Playground; in the
brax environment, where it runs, a cell gives an ok row whose counts are exact and which names Playground's
solver settings."""
import json
import os
import subprocess
import sys

import pytest
from support import REPO

from rlbench import registry
from rlbench.envs import ENVS
from rlbench.planning.plan import Cell, Settings
from rlbench.workload import PolicySpec, Workload

SETTINGS = Settings(warmup_s=0.0, warmup_units=1, duration_s=0.3, min_units=2, timeout_s=400)
DM_CONTROL = sorted(k for k, v in ENVS.items() if v.family == "dm_control")


def _supports(workload, **given):
    cls = registry.get("playground")
    return cls().supports(workload, cls.resolve_options(given))


def test_module_imports_without_jax_or_playground():
    code = ("import sys; from rlbench import registry; registry.get('playground'); "
            "print(sorted(m for m in ('jax', 'mujoco_playground') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_supports_gives_reasons():
    from adapters.playground import TASKS
    assert sorted(TASKS) == DM_CONTROL
    cls = registry.get("playground")
    assert cls.environment == "brax" and cls.kind == "vector_env"
    assert _supports(Workload("CheetahRun-v1", 16)) is None
    assert _supports(Workload("HumanoidWalk-v1", 8, PolicySpec("mlp", hidden=(32, 32)))) is None
    assert "playground has no env Ant-v4 (valid: CheetahRun-v1" in _supports(Workload("Ant-v4", 4))
    assert "policy random or mlp" in _supports(Workload("CheetahRun-v1", 4, PolicySpec("fixed_cost")))
    with pytest.raises(ValueError, match="valid: default, jax, warp"):
        cls.resolve_options({"impl": "cuda"})


def test_envpool_steps_the_tasks_with_the_same_physics_steps_per_env_step():
    envpool = pytest.importorskip("envpool")
    assert {k: envpool.make_spec(k).config.frame_skip for k in DM_CONTROL} == \
        {k: ENVS[k].frameskip for k in DM_CONTROL}
    assert all(registry.get("envpool-sync")().supports(Workload(k, 4), {}) is None for k in DM_CONTROL)


def test_gymnasium_adapters_refuse_the_tasks_with_the_reason():
    from rlbench.api import Unsupported, make_env
    with pytest.raises(Unsupported, match="CheetahRun-v1 is a DeepMind Control task"):
        make_env("CheetahRun-v1")


def _brax_python():
    from rlbench.running.adapter_envs import environment_of
    return environment_of(registry.get("playground")).ensure()["python"]


@pytest.mark.slow
def test_playground_steps_each_task_as_the_env_id_counts_it():
    code = ("import json; from adapters.playground import TASKS; from mujoco_playground import registry; "
            "print(json.dumps({k: [registry.get_default_config(v).ctrl_dt, registry.get_default_config(v).sim_dt] "
            "for k, v in TASKS.items()}))")
    out = subprocess.run([_brax_python(), "-c", code], cwd=REPO, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert out.returncode == 0, out.stderr[-3000:]
    steps = json.loads(out.stdout.strip().splitlines()[-1])
    assert {k: round(ctrl / sim) for k, (ctrl, sim) in steps.items()} == {k: ENVS[k].frameskip for k in DM_CONTROL}


@pytest.mark.slow
def test_a_cheetah_cell_runs_with_exact_counts():
    options = {"scan_T": 4, "impl": "jax"}
    spec = Cell("playground", Workload("CheetahRun-v1", 16), registry.get("playground").resolve_options(options),
                options).spec(SETTINGS, 0)
    out = subprocess.run([_brax_python(), "-m", "rlbench.running.child", json.dumps(spec)], cwd=REPO,
                         capture_output=True, text=True, timeout=600)
    row = json.loads(out.stdout.strip().splitlines()[-1])
    assert row["status"] == "ok", (row.get("error"), out.stderr[-2000:])
    assert row["env_steps"] == row["units"] * 4 * 16 and row["compile_s"] > 0
    physics = row["device_settings"]["physics"]
    assert physics == {**physics, "impl": "jax", "frame_skip": 1, "timestep": 0.01, "iterations": 4,
                       "ls_iterations": 8, "precision": "float32"}


def test_brax_ppo_trains_the_tasks_and_no_other_adapter_steps_them_as_brax_envs():
    mlp = PolicySpec("mlp", hidden=(32, 32))
    ppo = registry.get("brax-ppo")
    assert ppo().supports(Workload("HumanoidWalk-v1", 16, mlp), ppo.resolve_options({"batch_size": 16})) is None
    assert "valid: brax/ant, brax/halfcheetah, CheetahRun-v1" in ppo().supports(
        Workload("Ant-v4", 16, mlp), ppo.resolve_options({"batch_size": 16}))
    brax = registry.get("brax")
    assert "valid: brax/ant, brax/halfcheetah)" in brax().supports(Workload("CheetahRun-v1", 16),
                                                                   brax.resolve_options({}))


@pytest.mark.slow
def test_brax_ppo_trains_a_playground_task_with_playgrounds_wrappers():
    options = {"impl": "jax", "batch_size": 16, "num_minibatches": 4}
    spec = Cell("brax-ppo", Workload("CheetahRun-v1", 16, PolicySpec("mlp", hidden=(32, 32))),
                registry.get("brax-ppo").resolve_options(options), options).spec(SETTINGS, 0)
    out = subprocess.run([_brax_python(), "-m", "rlbench.running.child", json.dumps(spec)], cwd=REPO,
                         capture_output=True, text=True, timeout=600)
    row = json.loads(out.stdout.strip().splitlines()[-1])
    assert row["status"] == "ok", (row.get("error"), out.stderr[-2000:])
    # one unit = one Brax training step: batch_size x unroll_length x num_minibatches env steps
    assert row["env_steps"] == row["units"] * 16 * 5 * 4 and row["updates_per_s"] > 0
    settings = row["device_settings"]
    assert settings["playground_env"] == "CheetahRun" and settings["physics"]["impl"] == "jax"
    assert "backend" not in settings
