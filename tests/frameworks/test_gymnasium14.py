"""gymnasium14-sync and gymnasium14-async: gymnasium-sync's and gymnasium-async's code (adapters._kit.gym_vec)
with gymnasium 1.4.0 in its own environment (adapters/envs/gymnasium-1.4.txt). Listed with the same options,
left out of `rlbench tune` unless named; in their environment they step gymnasium 1.4's vector envs, give the
main environment's transitions under the same seed, and a run leaves ok rows with exact counts."""
import json
import subprocess
import textwrap

import numpy as np
import pytest
from support import REPO, run_cli_subprocess, sweep, write_suite
from support.equivalence import STEPS, _trajectory

from rlbench import registry
from rlbench.running.adapter_envs import environment_of
from rlbench.tuning.candidates import Space
from rlbench.workload import PolicySpec, Workload

TWINS = {"gymnasium14-sync": "gymnasium-sync", "gymnasium14-async": "gymnasium-async"}


def test_listed_as_the_main_adapters_twins_in_the_gymnasium_1_4_environment():
    workload = Workload("CartPole-v1", 4, PolicySpec(), seed=0)
    for name, twin in TWINS.items():
        cls, main = registry.get(name), registry.get(twin)
        assert cls.environment == "gymnasium-1.4" and main.environment == ""
        assert cls.options == main.options and cls.requires == main.requires == ("gymnasium",)
        opts = cls.resolve_options({})
        assert cls().snippet(workload, opts) == main().snippet(workload, opts)
        assert cls().tune_space(8, 2) == main().tune_space(8, 2)
        assert cls().supports(workload, opts) is None
    env = environment_of(registry.get("gymnasium14-async"))
    assert env.name == "gymnasium-1.4" and env.adapters == ["gymnasium14-async"]
    lines = [ln.strip() for ln in open(env.requirements) if ln.strip() and not ln.startswith("#")]
    pins = dict(ln.split("==") for ln in lines)
    assert pins["gymnasium"] == "1.4.0" and pins["torch"] == "2.13.0"


def test_a_refusal_is_the_main_adapters_naming_itself(monkeypatch):
    """Text observations are read from gymnasium's shared memory as a copy: both refuse them the same way, each
    naming itself (planning asks the main environment's gymnasium)."""
    monkeypatch.setenv("PYTHONPATH", str(REPO / "examples"))
    monkeypatch.syspath_prepend(str(REPO / "examples"))
    workload = Workload("toyenvs:make_corridor", 4, PolicySpec(), seed=0, env_kwargs={"obs": "text"})
    cls, main = registry.get("gymnasium14-async"), registry.get("gymnasium-async")
    mine, theirs = (c().supports(workload, c.resolve_options({})) for c in (cls, main))
    assert "read as a copy" in theirs and theirs.endswith("gymnasium-async carries them with shared_memory=false, "
                                                          "through its pipes")
    assert mine == theirs.replace("gymnasium-async carries", "gymnasium14-async carries")


def test_tune_leaves_them_out_unless_named(monkeypatch):
    monkeypatch.delenv("RLBENCH_ENVS_HERE", raising=False)
    workload = Workload("CartPole-v1", 4, PolicySpec())
    space = Space(workload, None, 16, 2)
    left = {item.adapter: item.status for item in space.left}
    assert left["gymnasium14-sync"] == left["gymnasium14-async"] == "own-environment"
    assert "gymnasium-async" in space.adapters and "gymnasium14-async" not in space.adapters
    assert Space(workload, ["gymnasium14-async"], 16, 2).adapters == ["gymnasium14-async"]


def test_rlbench_list_shows_them_with_their_environment():
    run = run_cli_subprocess(["list"])
    assert run.rc == 0, run.stderr[-2000:]
    listed = {line.split()[0]: line for line in run.stdout.splitlines() if line[:1].strip()}
    for name in TWINS:
        assert "own environment 'gymnasium-1.4'" in listed[name]


# -- in their own environment (built by make install-extras, as CI does) ------------------------------------------

REPLAY = textwrap.dedent("""
    import json, sys
    import gymnasium, numpy as np
    from rlbench import registry
    from rlbench.workload import PolicySpec, Workload
    name, options, steps = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
    cls = registry.get(name)
    workload = Workload("CartPole-v1", 4, PolicySpec(), seed=0)
    session = cls().open(workload, cls.resolve_options(options))
    kind = type(session.envs).__name__
    obs, counts = [np.array(session.obs, copy=True)], []
    for _ in range(steps):
        counts.append(session.step()); obs.append(np.array(session.obs, copy=True))
    session.close()
    print(json.dumps({"gymnasium": gymnasium.__version__, "kind": kind, "counts": counts,
                      "obs": np.stack(obs).tolist()}))
""")


@pytest.fixture(scope="module")
def env_python():
    return environment_of(registry.get("gymnasium14-sync")).ensure()["python"]


@pytest.mark.slow
@pytest.mark.parametrize("name, options, kind", [("gymnasium14-sync", {}, "SyncVectorEnv"),
                                                 ("gymnasium14-async", {"shared_memory": True}, "AsyncVectorEnv"),
                                                 ("gymnasium14-async", {"shared_memory": False}, "AsyncVectorEnv")])
def test_gymnasium_1_4_gives_the_main_environments_transitions(env_python, name, options, kind):
    """Same seed, same random actions: gymnasium 1.4's vector env in its environment steps CartPole exactly as
    gymnasium 1.3's does in the main one (same-step autoreset included: ~20-step episodes over 300 steps)."""
    out = subprocess.run([env_python, "-c", REPLAY, name, json.dumps(options), str(STEPS)], capture_output=True,
                         text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["gymnasium"] == "1.4.0" and got["kind"] == kind
    assert got["counts"] == [4] * STEPS
    want = _trajectory(TWINS[name], Workload("CartPole-v1", 4, PolicySpec(), seed=0), options)
    np.testing.assert_array_equal(np.array(got["obs"], dtype=np.float32), want)


@pytest.mark.slow
def test_a_run_gives_ok_rows_with_exact_counts_in_gymnasium_1_4(tmp_path, env_python):
    suite = write_suite(tmp_path, sweep(["gymnasium14-sync", "gymnasium14-async"], num_envs=(4,)))
    run = run_cli_subprocess(["run", str(suite)], out=tmp_path / "run")
    assert run.rc == 0, run.stderr[-2000:]
    rows = {r["adapter"]: r for r in run.rows}
    assert sorted(rows) == ["gymnasium14-async", "gymnasium14-sync"] and len(run.rows) == 2
    for row in rows.values():
        assert row["status"] == "ok" and row["num_envs"] == 4 and row["units"] >= 5
        assert row["env_steps"] == 4 * row["units"] and row["warmup_steps"] == 4 * row["warmup_units"]
    assert rows["gymnasium14-sync"]["workers"] == 1 and rows["gymnasium14-async"]["workers"] == 4
    used = json.loads((tmp_path / "run" / "env.json").read_text())["adapter_envs"]
    assert list(used) == ["gymnasium-1.4"]
    assert used["gymnasium-1.4"]["packages"]["gymnasium"] == "1.4.0" and used["gymnasium-1.4"]["python"] == env_python
