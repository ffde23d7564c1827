"""The brax adapters as the main environment sees them (no brax there; jax of another version): the module
imports without brax or jax, declares its own environment, resolves options, says why it cannot host a
workload, and its env ids are known to rlbench; adapters/envs/brax.txt is fully pinned.

SMOKE_SPECS are ready cell specs for the isolated environment: `DIR/bin/python -m rlbench.running.child SPEC_JSON`.
test_cells_run_in_the_brax_environment runs them in the environment the harness builds (cached; make test
builds it first)."""
import json
import re
import subprocess
import sys

import pytest
from support import REPO

from rlbench import registry
from rlbench.envs import env_info, make_env
from rlbench.errors import Unsupported
from rlbench.planning.plan import Cell, Settings
from rlbench.planning.suite import load_suite
from rlbench.workload import PolicySpec, Workload

MLP = PolicySpec("mlp", hidden=(32, 32))
SMOKE_SETTINGS = Settings(warmup_s=0.0, warmup_units=1, duration_s=0.2, min_units=2, timeout_s=300)


def smoke_specs() -> list:
    """Small cells: Brax stepping (random and MLP) and Brax's PPO, as the runner would send them."""
    cells = [("brax", Workload("brax/halfcheetah", 16, MLP, frameskip=5), {"scan_T": 8}),
             ("brax-ppo", Workload("brax/ant", 16, MLP, frameskip=5),
              {"batch_size": 16, "num_minibatches": 2, "num_updates_per_batch": 1, "episode_length": 100})]
    return [Cell(a, w, registry.get(a).resolve_options(o), o).spec(SMOKE_SETTINGS, 0) for a, w, o in cells]


def test_module_imports_without_brax_or_jax():
    code = ("import sys; from rlbench import registry; registry.get('brax'); registry.get('brax-ppo'); "
            "print(sorted(m for m in ('brax', 'jax', 'flax', 'optax') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_adapters_declare_their_environment():
    for name, kind in (("brax", "vector_env"), ("brax-ppo", "learner")):
        cls = registry.get(name)
        assert cls.kind == kind and cls.environment == "brax" and cls.requires == ("brax", "jax")
    assert (REPO / "adapters" / "envs" / "brax.txt").is_file()


def test_requirements_are_fully_pinned():
    lines = [ln.split("#")[0].strip() for ln in (REPO / "adapters" / "envs" / "brax.txt").read_text().splitlines()]
    reqs = [ln for ln in lines if ln]   # a pin's own comment (`# no-deps: ...`) cut off
    pins = {}
    for req in reqs:
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([A-Za-z0-9_.+\-]+)", req)
        assert m, f"not an exact pin: {req}"
        pins[m.group(1).lower().replace("_", "-")] = m.group(2)
    assert pins["jax"] == "0.9.2" and pins["jaxlib"] == "0.9.2" and "brax" in pins
    assert {"numpy", "psutil", "gymnasium", "setuptools"} <= set(pins)
    assert "rlbench" not in pins and pins.get("torch", "2.13.0") == "2.13.0"


def test_options_resolve_and_name_valid_choices():
    opts = registry.get("brax").resolve_options({})
    assert opts["backend"] == "positional" and opts["scan_T"] == 128 and opts["devices"] == 1
    ppo = registry.get("brax-ppo").resolve_options({"num_minibatches": "8"})
    assert ppo["num_minibatches"] == 8 and ppo["eval_envs"] == 0
    with pytest.raises(ValueError, match="valid: positional, generalized, spring, mjx"):
        registry.get("brax").resolve_options({"backend": "bullet"})
    with pytest.raises(ValueError, match="unknown option"):
        registry.get("brax-ppo").resolve_options({"num_timesteps": 10})


def _supports(name, workload, **given):
    cls = registry.get(name)
    return cls().supports(workload, cls.resolve_options(given))


def test_supports_gives_reasons():
    assert _supports("brax", Workload("brax/ant", 16)) is None
    assert _supports("brax", Workload("brax/halfcheetah", 16, MLP), backend="generalized") is None
    assert _supports("brax-ppo", Workload("brax/ant", 64, MLP)) is None
    assert "valid: brax/ant, brax/halfcheetah" in _supports("brax", Workload("CartPole-v1", 16))
    assert "valid: brax/ant, brax/halfcheetah" in _supports("brax-ppo", Workload("Ant-v4", 64, MLP))
    with pytest.raises(ValueError, match="option scan_T=0 must be an integer >= 1"):
        _supports("brax", Workload("brax/ant", 16), scan_T=0)
    assert "multiple of devices=3" in _supports("brax", Workload("brax/ant", 16), devices=3)
    assert "policy random or mlp" in _supports("brax", Workload("brax/ant", 16, PolicySpec("fixed_cost")))
    assert "needs policy mlp" in _supports("brax-ppo", Workload("brax/ant", 64))
    assert "multiple of num_envs=96" in _supports("brax-ppo", Workload("brax/ant", 96, MLP))
    assert "no env_kwargs" in _supports("brax", Workload("brax/ant", 16, env_kwargs={"x": 1}))


def test_brax_env_ids_are_known_and_only_run_in_jax():
    for env_id in ("brax/ant", "brax/halfcheetah"):
        info = env_info(env_id)
        assert info.family == "brax" and info.frameskip == 5
        with pytest.raises(Unsupported, match="Brax env"):
            make_env(env_id)


def test_suite_expands():
    suite = load_suite(str(REPO / "suites" / "brax.toml"))
    adapters = {c.adapter for c in suite.cells}
    assert adapters == {"brax", "brax-ppo"}
    for cell in suite.cells:
        cls = registry.get(cell.adapter)
        assert cls().supports(cell.workload, cell.options) is None, cell.cell_id


def test_smoke_specs_are_valid_json_for_the_cell_process():
    for spec in smoke_specs():
        spec = json.loads(json.dumps(spec))
        cls = registry.get(spec["adapter"])
        w = Workload.from_dict(spec["workload"])
        assert cls().supports(w, cls.resolve_options(spec["options"])) is None


@pytest.mark.slow
def test_cells_run_in_the_brax_environment():
    from rlbench.running.adapter_envs import environment_of
    python = environment_of(registry.get("brax")).ensure()["python"]
    for spec in smoke_specs():
        out = subprocess.run([python, "-m", "rlbench.running.child", json.dumps(spec)],
                             cwd=REPO, capture_output=True, text=True, timeout=600)
        result = json.loads(out.stdout.strip().splitlines()[-1])
        assert result["status"] == "ok", (spec["adapter"], result.get("error"), out.stderr[-2000:])
        assert result["env_steps"] > 0 and result["compile_s"] > 0
        if spec["adapter"] == "brax":
            assert result["env_steps"] == result["units"] * 8 * 16
        else:
            assert result["env_steps"] == result["units"] * 16 * 2 * 5 and result["updates_per_s"] > 0


DROP_INS = """
import jax, numpy as np
from adapters.brax import restore_device_put
restored = restore_device_put(jax)
assert restore_device_put(jax) == []          # once there, nothing is put back twice
devices = jax.local_devices()[:1]
tree = {"w": np.arange(6.0).reshape(2, 3), "n": np.int32(4)}
out = jax.device_put_replicated(tree, devices)
assert out["w"].shape == (1, 2, 3) and out["n"].shape == (1,)
assert np.array_equal(np.asarray(out["w"][0]), tree["w"]) and int(out["n"][0]) == 4
doubled = jax.pmap(lambda t: t["w"] * 2)(out)  # what train() does with it
assert np.array_equal(np.asarray(doubled[0]), tree["w"] * 2)
shards = jax.device_put_sharded([tree], devices)
assert np.array_equal(np.asarray(shards["w"][0]), tree["w"])
print("restored", restored)
"""


def test_jaxs_drop_ins_stand_in_for_the_device_put_brax_ppo_calls_where_jax_removed_it():
    """Brax 0.14.2's PPO calls jax.device_put_replicated, gone from JAX 0.10 (the main environment's, and a GPU
    machine's newer one): JAX's documented drop-in stands in for it, in pmap's layout, and only where it is gone.
    In a child interpreter: JAX's backend never starts in the test runner (later tests fork)."""
    pytest.importorskip("jax")
    r = subprocess.run([sys.executable, "-c", DROP_INS], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "restored [" in r.stdout
