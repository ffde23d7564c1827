"""The mjx adapter: imported by the main environment for names and supports() only (no mujoco.mjx, no jax there);
in the brax environment, where it runs, k env steps of MJX from one state under one action sequence agree with
CPU MuJoCo's (float32 against float64), and a cell of Ant-v4 x 64 gives an ok row whose counts are exact."""
import json
import os
import subprocess
import sys

import pytest
from support import REPO

from rlbench import registry
from rlbench.envs import env_info
from rlbench.planning.plan import Cell, Settings
from rlbench.workload import PolicySpec, Workload

MLP = PolicySpec("mlp", hidden=(32, 32))
SETTINGS = Settings(warmup_s=0.0, warmup_units=1, duration_s=0.3, min_units=2, timeout_s=400)
# MJX (float32) against CPU MuJoCo (float64), as a fraction of the state's largest magnitude, over 20 env steps (100
# physics steps): HalfCheetah, contacts and all, stays within 1e-2 (measured: 4e-3); Ant within 1e-5 until its first
# contact (measured: 2e-6), after which, with Ant's own friction cones (pyramidal, MuJoCo's default), MJX's contact
# response departs from CPU MuJoCo's (qvel 45% apart within 20 steps), while with elliptic cones it stays within 1e-2
# (measured: 1.3e-3). MuJoCo Warp departs and agrees the same way (test_mujoco_warp.py): docs/strategies/jax.md says
# so, and this test keeps the measured facts from drifting silently.
# Humanoid-v4 (RK4, PGS, which MJX lacks: Newton on both sides, pyramidal cones) stays within 1e-4 through its
# first contacts (measured: qvel 1e-5); elliptic cones MJX refuses on its condim-1 geoms.
TOLERANCE_CHEETAH = 1e-2
TOLERANCE_FREE = 1e-5
TOLERANCE_HUMANOID = 1e-4

def _supports(workload, **given):
    cls = registry.get("mjx")
    return cls().supports(workload, cls.resolve_options(given))


def test_module_imports_without_jax_or_mjx():
    code = ("import sys; from rlbench import registry; registry.get('mjx'); "
            "print(sorted(m for m in ('jax', 'mujoco.mjx') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_supports_gives_reasons():
    cls = registry.get("mjx")
    assert cls.environment == "brax" and cls.kind == "vector_env"
    assert _supports(Workload("Ant-v4", 64)) is None and _supports(Workload("HalfCheetah-v4", 8, MLP)) is None
    assert "not CartPole-v1" in _supports(Workload("CartPole-v1", 4))
    assert "Ant-v4, HalfCheetah-v4, Hopper-v4, Humanoid-v4" in _supports(Workload("Pusher-v4", 4))
    assert _supports(Workload("Walker2d-v4", 4)) is None
    assert _supports(Workload("Humanoid-v4", 4)) is None
    with pytest.raises(ValueError, match="valid: model, newton, cg"):
        cls.resolve_options({"solver": "pgs"})
    assert "policy random or mlp" in _supports(Workload("Ant-v4", 4, PolicySpec("fixed_cost")))
    assert "multiple of devices=3" in _supports(Workload("Ant-v4", 16), devices=3)


def _brax_python():
    from rlbench.running.adapter_envs import environment_of
    return environment_of(registry.get("mjx")).ensure()["python"]


def _gaps(env_id, cone="model"):
    code = (f"import json; from adapters.mjx import states_gap; "
            f"print(json.dumps(states_gap({env_id!r}, 20, cone={cone!r})))")
    out = subprocess.run([_brax_python(), "-c", code], cwd=REPO, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_k_steps_agree_with_cpu_mujoco():
    cheetah = _gaps("HalfCheetah-v4")
    assert max(max(g["qpos"], g["qvel"]) for g in cheetah) <= TOLERANCE_CHEETAH, cheetah
    ant = _gaps("Ant-v4")
    free = [g for g in ant if not g["contact"]]
    assert free and max(max(g["qpos"], g["qvel"]) for g in free) <= TOLERANCE_FREE, ant
    elliptic = _gaps("Ant-v4", cone="elliptic")
    assert any(g["contact"] for g in elliptic)
    assert max(max(g["qpos"], g["qvel"]) for g in elliptic) <= TOLERANCE_CHEETAH, elliptic
    humanoid = _gaps("Humanoid-v4")
    assert any(g["contact"] for g in humanoid)
    assert max(max(g["qpos"], g["qvel"], g["obs"]) for g in humanoid) <= TOLERANCE_HUMANOID, humanoid
    for env_id in ("Hopper-v4", "Swimmer-v4"):   # a foot's contacts, a fluid's drag: measured 1.1e-5 and 1.8e-6
        gaps = _gaps(env_id)
        assert max(max(g["qpos"], g["qvel"], g["obs"]) for g in gaps) <= TOLERANCE_HUMANOID, (env_id, gaps)


@pytest.mark.slow
@pytest.mark.parametrize("env_id, num_envs, policy", [("Ant-v4", 64, PolicySpec()), ("Ant-v4", 64, MLP),
                                                      ("Humanoid-v4", 16, MLP), ("Walker2d-v4", 16, PolicySpec())],
                         ids=["random", "mlp", "humanoid", "walker"])
def test_a_cell_runs_with_exact_counts(env_id, num_envs, policy):
    options = {"scan_T": 4}
    spec = Cell("mjx", Workload(env_id, num_envs, policy), registry.get("mjx").resolve_options(options),
                options).spec(SETTINGS, 0)
    out = subprocess.run([_brax_python(), "-m", "rlbench.running.child", json.dumps(spec)], cwd=REPO,
                         capture_output=True, text=True, timeout=600)
    row = json.loads(out.stdout.strip().splitlines()[-1])
    assert row["status"] == "ok", (row.get("error"), out.stderr[-2000:])
    assert row["env_steps"] == row["units"] * 4 * num_envs and row["compile_s"] > 0
    physics = row["device_settings"]["physics"]
    assert physics["frame_skip"] == env_info(env_id).frameskip and physics["precision"] == "float32"
    assert physics["timestep"] > 0
    assert physics.get("model_solver") == ("PGS" if env_id == "Humanoid-v4" else None)
