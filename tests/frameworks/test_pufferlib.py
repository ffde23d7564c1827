"""pufferlib-serial and pufferlib-mp: listed in the main environment, refused up front where PufferLib would
refuse, raced by tune; in their own environment (adapters/envs/pufferlib.txt), the transitions PufferLib makes
are gymnasium's under the same actions, each counted once (its next-step resets are not), and a run leaves
ok rows and nothing running."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from support import run_cli_subprocess, sweep, write_suite

from rlbench import registry
from rlbench.running.adapter_envs import environment_of
from rlbench.workload import Workload

EXAMPLES = str(Path(__file__).resolve().parents[2] / "examples")


def _supports(adapter, n=8, env="CartPole-v1", **given):
    cls = registry.get(adapter)
    return cls().supports(Workload(env, n), cls.resolve_options(given))


def test_listed_with_their_environment_without_pufferlibs_torch_pin():
    for name in ("pufferlib-serial", "pufferlib-mp"):
        cls = registry.get(name)
        assert cls.environment == "pufferlib" and cls.requires == ("pufferlib",)
    env = environment_of(registry.get("pufferlib-mp"))
    lines = [ln.strip() for ln in open(env.requirements) if ln.strip() and not ln.startswith("#")]
    pins = dict(ln.split("#")[0].strip().split("==") for ln in lines)
    assert pins["torch"] == "2.13.0" and pins["pufferlib-core"] == "3.0.23" and pins["gymnasium"] == "1.3.0"
    assert [ln for ln in lines if "# no-deps" in ln] == [next(ln for ln in lines if ln.startswith("pufferlib-core"))]


@pytest.mark.parametrize("given, words", [
    ({"num_workers": 3}, "num_envs=8 must be a multiple of num_workers=3"),
    ({"num_workers": 2, "batch_size": 3}, "batch_size=3 must be at most num_envs=8 and a multiple of the envs "
                                          "per worker (4)"),
    ({"num_workers": 64, "overwork": True}, "num_envs=8 must be a multiple of num_workers=64"),
])
def test_what_pufferlib_would_refuse_is_refused_before_anything_runs(given, words):
    assert _supports("pufferlib-mp", **given) == words


def test_more_workers_than_physical_cores_needs_overwork(monkeypatch):
    mod = __import__(registry.get("pufferlib-mp").__module__, fromlist=["physical_cores"])
    monkeypatch.setattr(mod, "physical_cores", lambda: 2)
    assert "num_workers=4 > 2 physical cores" in _supports("pufferlib-mp", num_workers=4)
    assert _supports("pufferlib-mp", num_workers=4, overwork=True) is None


def test_tune_races_sync_and_async_batches_on_the_cores_and_on_one_worker(monkeypatch):
    cls = registry.get("pufferlib-mp")
    mod = __import__(cls.__module__, fromlist=["physical_cores"])
    monkeypatch.setattr(mod, "physical_cores", lambda: 4)
    # one worker holds all 8 envs: only the whole batch divides by its envs (PufferLib's rule)
    assert cls().tune_space(8, 4) == [{"num_workers": 1, "batch_size": 8}, {"num_workers": 4, "batch_size": 8},
                                      {"num_workers": 4, "batch_size": 4}]
    snippet = cls().snippet(Workload("CartPole-v1", 8), cls.resolve_options({"num_workers": 4, "batch_size": 4}))
    assert snippet.startswith("pufferlib.vector.make(pufferlib.emulation.GymnasiumPufferEnv")
    assert "backend=pufferlib.vector.Multiprocessing, num_envs=8, num_workers=4, batch_size=4" in snippet


# -- in its own environment (built by make install-extras, as CI does) ------------------------------------------

REPLAY = textwrap.dedent("""
    import json, sys
    import gymnasium as gym, numpy as np
    from rlbench import registry
    from rlbench.workload import Workload
    backend, n = sys.argv[1], int(sys.argv[2])
    cls = registry.get(backend)
    opts = cls.resolve_options({"num_workers": 1} if backend == "pufferlib-mp" else {})
    session = cls().open(Workload("CartPole-v1", n, seed=3), opts)
    sent, obs, counts = [], [np.array(session.obs)], []
    act = session.policy
    def spy(o):
        a = np.array(act(o)); sent.append(a); return a
    session.policy = spy
    for _ in range(200):
        counts.append(session.step()); obs.append(np.array(session.obs))
    session.close()
    # the same actions through plain gymnasium envs, reset as PufferLib resets them (on the next send)
    envs = [gym.make("CartPole-v1") for _ in range(n)]
    want = [np.stack([e.reset(seed=3 + i)[0] for i, e in enumerate(envs)])]
    done, made = np.zeros(n, bool), []
    for a in sent:
        out, stepped = [], 0
        for i, e in enumerate(envs):
            if done[i]:
                o, _ = e.reset(); done[i] = False
            else:
                o, _, term, trunc, _ = e.step(int(a[i])); done[i] = term or trunc; stepped += 1
            out.append(o)
        want.append(np.stack(out)); made.append(stepped)
    print(json.dumps({"equal": bool(np.array_equal(np.stack(obs), np.stack(want))), "counts": counts,
                      "made": made, "resets": int(sum(n - m for m in made))}))
""")


@pytest.fixture(scope="module")
def puffer_python():
    return environment_of(registry.get("pufferlib-serial")).ensure()["python"]


@pytest.mark.parametrize("backend", ["pufferlib-serial", "pufferlib-mp"])
def test_transitions_are_gymnasiums_under_the_same_actions_and_resets_are_not_counted(puffer_python, backend):
    out = subprocess.run([puffer_python, "-c", REPLAY, backend, "4"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["equal"]
    assert got["counts"] == got["made"] and got["resets"] > 0   # random CartPole episodes end within ~20 steps


RECURRENT = textwrap.dedent("""
    import json, sys
    import numpy as np
    from rlbench import registry
    from rlbench.workload import Workload, parse_policy
    backend, given = sys.argv[1], json.loads(sys.argv[2])
    spec = parse_policy("toyenvs.policies:recurrent_linear:decay=1.0")
    cls = registry.get(backend)
    session = cls().open(Workload("CartPole-v1", 4, spec, seed=3), cls.resolve_options(given))
    calls, act = [], session.policy.fn
    def spy(obs, starts, ids):
        actions = act(obs, starts, ids)
        calls.append([np.array(obs).tolist(), np.array(starts).tolist(), np.array(ids).tolist(),
                      np.array(session.resetting).tolist(), np.array(actions).tolist()])
        return actions
    session.policy.fn = spy
    for _ in range(300):
        session.step()
    session.close()
    print(json.dumps(calls))
""")


@pytest.mark.parametrize("backend, given", [("pufferlib-serial", {}),
                                            ("pufferlib-mp", {"num_workers": 2, "batch_size": 2, "overwork": True})])
def test_a_recurrent_policy_is_told_each_envs_episode_starts_and_ids(puffer_python, backend, given):
    """A recurrent user policy (its state sums an env's observations since its episode began): an observation
    starts an episode where it is the env's first or its last one ended (PufferLib resets on the next send), and
    replayed one env at a time the same policy gives the same actions, so each env kept its own state, async
    batches of any envs included."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [EXAMPLES, os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([puffer_python, "-c", RECURRENT, backend, json.dumps(given)], capture_output=True,
                         text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    calls = json.loads(out.stdout.strip().splitlines()[-1])
    per_env = {}
    for obs, starts, ids, resetting, actions in calls:
        for j, i in enumerate(ids):
            per_env.setdefault(i, []).append((obs[j], starts[j], resetting[j], actions[j]))
    assert sorted(per_env) == [0, 1, 2, 3] and any(len(set(ids)) < 4 for _, _, ids, _, _ in calls) == ("mp" in backend)
    sys.path.insert(0, EXAMPLES)
    try:
        from toyenvs.policies import recurrent_linear
    finally:
        sys.path.remove(EXAMPLES)
    import gymnasium as gym
    space = gym.make("CartPole-v1")
    for seen in per_env.values():
        assert [start for _, start, _, _ in seen] == [True] + [done for _, _, done, _ in seen[:-1]]
        assert sum(start for _, start, _, _ in seen) >= 2      # an episode ended and another began
        alone = recurrent_linear(space.observation_space, space.action_space, 1, decay=1.0)
        for obs, start, _, action in seen:
            assert alone(np.array([obs], np.float32), np.array([start]), None)[0] == action


def test_a_run_gives_ok_rows_with_workers_and_batches(tmp_path, puffer_python):
    suite = write_suite(tmp_path, sweep(["pufferlib-serial", "pufferlib-mp"], num_envs=(4,))
                        + "options.pufferlib-mp = { num_workers = [2], batch_size = [2], overwork = [true] }\n")
    run = run_cli_subprocess(["run", str(suite)], out=tmp_path / "run")
    assert run.rc == 0, run.stderr[-2000:]
    rows = {r["adapter"]: r for r in run.rows}
    assert {r["status"] for r in rows.values()} == {"ok"}
    assert rows["pufferlib-mp"]["workers"] == 2 and rows["pufferlib-mp"]["batch_size"] == 2
    assert rows["pufferlib-serial"]["env_steps"] > 0


SCREENS = textwrap.dedent("""
    import json, sys
    import numpy as np
    from rlbench import registry
    from rlbench.policy import make_policy
    from rlbench.workload import Workload, parse_policy
    from toyenvs import make_corridor
    kwargs = {"obs": "dict_image", "screen": "48x64"}
    workload = Workload("toyenvs:make_corridor", 4, parse_policy(sys.argv[1]), seed=3, env_kwargs=kwargs)
    cls = registry.get("pufferlib-serial")
    session = cls().open(workload, cls.resolve_options({}))
    seen, act = [], session.policy
    def spy(obs, *state):
        actions = act(obs, *state); seen.append((obs, np.array(actions))); return actions
    session.policy = spy
    for _ in range(3):
        session.step()
    session.close()
    env = make_corridor(**kwargs)
    first = [env.reset(seed=3 + i)[0] for i in range(4)]
    alone = make_policy(workload, env.observation_space, env.action_space)
    obs = seen[0][0]
    print(json.dumps({"keys": sorted(obs), "shape": list(obs["screen"].shape), "dtype": str(obs["screen"].dtype),
                      "first": all(np.array_equal(obs[k][i], first[i][k]) for i in range(4) for k in obs),
                      "same": all(np.array_equal(alone(o, *([None, None] if alone.recurrent else [])), a)
                                  for o, a in seen[:1])}))
""")


@pytest.mark.parametrize("policy", ["cnn", "mlp"])
def test_a_network_gets_a_dict_observation_back_from_pufferlibs_records(puffer_python, policy):
    """PufferLib hands a Dict observation over as one record of bytes per env: rlbench's networks get the env's own
    Dict back (a CNN per image entry needs the screen), the same observations and actions as built alone."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [EXAMPLES, os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([puffer_python, "-c", SCREENS, policy], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"keys": ["screen", "vars"], "shape": [4, 48, 64, 3], "dtype": "uint8", "first": True, "same": True}
