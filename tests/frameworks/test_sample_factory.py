"""sample-factory in rlbench's main environment: listed, options and supports() work without Sample Factory.

Running it needs its own environment (adapters/envs/sample-factory.txt); that is the isolation tests' job.
"""
import ast
import os

import pytest
from support import REPO

from rlbench import registry
from rlbench.workload import PolicySpec, Workload

ROOT = str(REPO)


def _adapter():
    return registry.get("sample-factory")


def _supports(env="Pong-v5", n=2, policy=PolicySpec(), **given):
    cls = _adapter()
    return cls().supports(Workload(env, n, policy=policy, frameskip=4), cls.resolve_options(given))


def test_listed_with_its_environment_and_requirement():
    cls = _adapter()
    assert cls.environment == "sample-factory" and cls.requires == ("sample_factory",)
    assert cls.kind == "vector_env"
    assert {o.name for o in cls.options} >= {"workers", "envs_per_worker", "worker_num_splits", "batched_sampling"}


def test_module_imports_only_stdlib_rlbench_and_the_kit_at_top():
    tree = ast.parse(open(os.path.join(ROOT, "adapters", "sample_factory.py")).read())
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    names = {a.name.split(".")[0] for n in top if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module.split(".")[0] for n in top if isinstance(n, ast.ImportFrom)}
    assert names <= {"os", "shutil", "tempfile", "threading", "time", "rlbench", "adapters"}


def test_requirements_are_fully_pinned_with_the_local_torch():
    path = os.path.join(ROOT, "adapters", "envs", "sample-factory.txt")
    lines = [ln.strip() for ln in open(path) if ln.strip() and not ln.startswith("#")]
    assert all("==" in ln for ln in lines)
    pins = dict(ln.split("==") for ln in lines)
    assert pins["torch"] == "2.13.0" and pins["sample-factory"] == "2.1.1"
    assert pins["gymnasium"].startswith("0.29.") and pins["numpy"].startswith("1.26.")
    assert {"psutil", "ale-py"} <= set(pins) and "rlbench" not in pins


@pytest.mark.parametrize("n,given,ok", [
    (2, {}, True),                                               # 1 worker x 2 envs, double-buffered
    (1, {}, False),                                              # 1 env cannot be split in two
    (1, {"worker_num_splits": 1}, True),                         # EnvPool's setting: 1 env per worker
    (2, {"workers": 2, "worker_num_splits": 1}, True),
    (4, {"envs_per_worker": 2}, True),                           # -> 2 workers
    (3, {"workers": 2}, False),                                  # workers must divide num_envs
    (4, {"workers": 2, "envs_per_worker": 3}, False),            # inconsistent with num_envs
])
def test_layout_of_workers_and_envs(n, given, ok):
    reason = _supports(n=n, **given)
    assert (reason is None) == ok, reason


def test_layout_resolves_the_other_option():
    from adapters.sample_factory import layout
    cls = _adapter()
    assert layout(4, cls.resolve_options({"envs_per_worker": 2})) == (2, 2)
    assert layout(4, cls.resolve_options({})) == (1, 4)
    assert layout(6, cls.resolve_options({"workers": 3})) == (3, 2)


def test_envs_and_policies_it_supports():
    assert _supports(env="rlbench/Synthetic-v0") is None
    assert _supports(env="CartPole-v1") is None
    from rlbench.families.replay import driver as replay
    reason = _supports(env=replay.PREFIX + next(iter(replay.WORKLOADS)))
    assert "Pong-v5" in reason and "Synthetic-v0" in reason
    assert "random" in _supports(policy=PolicySpec(name="fixed_cost", cost_us=10.0))
    with pytest.raises(ValueError, match="valid: 1, 2"):
        _adapter().resolve_options({"worker_num_splits": 3})


def test_cell_spec_for_the_isolated_environment():
    """The spec the runner hands `DIR/bin/python -m rlbench.running.child`: it must resolve here too."""
    from rlbench.planning.plan import Cell, Settings
    cls = _adapter()
    cell = Cell("sample-factory", Workload("Pong-v5", 2, frameskip=4), cls.resolve_options({"workers": 2,
                "worker_num_splits": 1}), {"workers": 2, "worker_num_splits": 1})
    spec = cell.spec(Settings(), 0)
    assert spec["adapter"] == "sample-factory" and spec["options"]["workers"] == 2
    assert cls.resolve_options(spec["options"]) == spec["options"]
