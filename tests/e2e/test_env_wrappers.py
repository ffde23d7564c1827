"""`--env-wrapper module:fn` (and `wrappers = [...]` in a suite): the wrappers a user always applies are
applied to every env built, in every process, in order; the wrapped env's spaces decide what each adapter
carries; the cell id names them; a bad or missing wrapper is one line before anything runs."""
import json
import sys

import pytest
from support import REPO, corridor, run_cli, run_cli_subprocess, write_suite

from rlbench import registry
from rlbench.api import PolicySpec, Workload
from rlbench.envs import env_call, env_info, spaces, wrapped_id

EXAMPLES = REPO / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))

FLAT = "toyenvs.wrappers:flatten"
TUPLE_CORRIDOR = wrapped_id("toyenvs:make_corridor", [FLAT])


@pytest.fixture(autouse=True)
def examples_on_pythonpath(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(EXAMPLES))


def _workload(env=TUPLE_CORRIDOR, obs="tuple"):
    return Workload(env, corridor.N, PolicySpec(), seed=0, env_kwargs={**corridor.SHORT, "obs": obs})


def test_the_wrapped_envs_spaces_decide_what_an_adapter_carries():
    bare, wrapped = _workload("toyenvs:make_corridor"), _workload()
    assert type(spaces(bare.env_id, bare.env_kwargs)[0]).__name__ == "Tuple"
    assert type(spaces(wrapped.env_id, wrapped.env_kwargs)[0]).__name__ == "Box"
    cls = registry.get("tianshou-dummy")
    options = cls.resolve_options({})
    assert "Tuple observations" in cls().supports(bare, options)
    assert cls().supports(wrapped, options) is None
    info = env_info(TUPLE_CORRIDOR)
    assert info.wrappers == (FLAT,) and info.native == () and info.probed
    assert env_call(wrapped) == ("toyenvs.wrappers.flatten(toyenvs.make_corridor(episode_len=7, length=6, "
                                 "obs='tuple'))")


@pytest.mark.parametrize("adapter, options", [("gymnasium-async", {"shared_memory": True}), ("tianshou-subproc", {}),
                                              ("sb3-subproc", {})])
def test_subprocess_workers_apply_the_wrapper_as_serial_does(adapter, options):
    workload = _workload()
    want = corridor._serial(workload)
    assert set(want[0]) == {""} and want[0][""].ndim == 2        # one flat vector per env
    corridor._assert_same(corridor._trajectory(adapter, workload, options), want, f"{adapter} wrapped")


def test_wrappers_apply_in_order_and_name_the_cell(tmp_path, capsys):
    run = run_cli(["run", "--adapter", "serial", "--adapter", "envpool-sync", "--num-envs", "2", "--repeats", "1",
                   "--duration", "0.05", "--warmup", "0.02", "--env", "CartPole-v1",
                   "--env-wrapper", "toyenvs.wrappers:stack4", "--env-wrapper", FLAT], tmp_path / "run", capsys)
    assert run.rc == 0, run.stderr
    row = run.row("serial")
    assert row["status"] == "ok" and row["cell_id"] == f"serial/CartPole-v1+toyenvs.wrappers:stack4+{FLAT}/n=2/random"
    assert "envpool has no native CartPole-v1+toyenvs.wrappers:stack4" in run.stderr    # a Python wrapper
    assert spaces(f"CartPole-v1+toyenvs.wrappers:stack4+{FLAT}")[0].shape == (16,)      # stacked, then flattened
    plan = json.loads((run.out / "plan.json").read_text())   # what rerun and resume plan from
    assert plan["args"]["env_wrapper"] == ["toyenvs.wrappers:stack4", FLAT]


def test_a_suite_names_its_wrappers(tmp_path, capsys):
    suite = write_suite(tmp_path, ('[[sweep]]\nadapters = ["serial"]\nenvs = ["toyenvs:make_corridor"]\n'
                                   'num_envs = [2]\nenv_kwargs = { obs = ["dict"] }\nwrappers = ["' + FLAT + '"]\n'))
    run = run_cli(["run", str(suite)], tmp_path / "run", capsys)
    assert run.rc == 0 and run.row("serial")["cell_id"].startswith(f"serial/toyenvs:make_corridor+{FLAT}(obs=dict)")


@pytest.mark.parametrize("wrapper, said", [
    ("toyenvs.wrappers:nothing", "env wrapper 'toyenvs.wrappers:nothing': module toyenvs.wrappers has no function "
                                 "'nothing'"),
    ("no_such_package.wrappers:flat", "env wrapper 'no_such_package.wrappers:flat': module no_such_package.wrappers "
                                      "failed to import: ModuleNotFoundError"),
    ("flatten", "bad env wrapper 'flatten' (expected package.module:fn"),
])
def test_a_bad_wrapper_is_one_line_and_nothing_runs(tmp_path, wrapper, said):
    run = run_cli_subprocess(["run", "--adapter", "serial", "--env", "CartPole-v1", "--env-wrapper", wrapper],
                             tmp_path / "run")
    assert run.rc == 2 and not (tmp_path / "run").exists()
    line = run.stderr.strip().splitlines()[-1]
    assert said in line
    if "ModuleNotFoundError" in said:
        assert "-m pip install" in line and "PYTHONPATH" in line


def test_a_missing_env_package_says_how_to_install_it(tmp_path):
    run = run_cli_subprocess(["run", "--adapter", "serial", "--env", "no_such_envs:Thing-v0"], tmp_path / "run")
    assert run.rc == 2
    line = run.stderr.strip().splitlines()[-1]
    assert "module no_such_envs failed to import: ModuleNotFoundError" in line and "-m pip install" in line


def test_wrappers_do_not_apply_to_a_family_workload():
    from rlbench.errors import UsageError
    with pytest.raises(UsageError, match="wrappers apply to gymnasium envs"):
        env_info(wrapped_id("replay/DQN-Qbert", [FLAT]))
