"""JAX env packages of thirteen kinds (tests/e2e/envzoo/requirements.txt, `make envzoo`; Craftax from constraints.txt),
each through its own factory as its users call it, under the JAX adapters: every (env, adapter) pair either runs
with exact counts (a row's env steps are its units x num_envs x steps per unit) or is dropped while planning with
its reason; none is an error row. The table is docs/compatibility-jax-envs.md, checked here (RLBENCH_WRITE_DOCS=1
rewrites it from this run). Planning and sessions run in subprocesses: JAX never starts in the test runner.
Slow: XLA compiles each env's step and each PPO (Craftax's ~1 min)."""
import json
import os
import subprocess
import sys

import pytest
from support import REPO, TINY_PROTOCOL, run_cli_subprocess, write_suite

ZOO_DIR = REPO / ".envzoo"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800),   # the run: ~13 min on 2 cores
              pytest.mark.skipif(not (ZOO_DIR / ".installed").exists(), reason="no .envzoo: make envzoo")]

# kind -> (package, env as rlbench names it, env_kwargs as the package's factory takes them)
ZOO = {
    "puzzle game": ("jumanji 1.1.2", "jumanji:make", {"id": "Snake-v1"}),
    "scheduling, multi-discrete actions": ("jumanji 1.1.2", "jumanji:make", {"id": "JobShop-v0"}),
    "multi-agent, a reward per agent": ("jumanji 1.1.2", "jumanji:make", {"id": "LevelBasedForaging-v0"}),
    "two-player board game": ("pgx 2.6.0", "pgx:make", {"env_id": "othello"}),
    "gridworld": ("xminigrid 0.9.3", "xminigrid:make", {"id": "MiniGrid-DoorKey-5x5"}),
    "open-world survival": ("craftax 1.6.1", "craftax.craftax_env:make_craftax_env_from_name",
                            {"name": "Craftax-Classic-Symbolic-v1", "auto_reset": True}),
    "rigid-body physics": ("brax 0.14.2", "brax.envs:get_environment", {"env_name": "ant"}),
    "gridworld, a Timestep API": ("navix 0.7.4", "navix:make", {"name": "Navix-DoorKey-5x5-v0"}),
    "multi-agent team, particle physics": ("jaxmarl 0.2.0", "jaxmarl:make", {"env_id": "MPE_simple_spread_v3"}),
    "multi-agent card game, legal-action masks": ("jaxmarl 0.2.0", "jaxmarl:make", {"env_id": "hanabi"}),
    "pixel POMDP arcade game, written for gymnax before 1.0": ("popgym-arcade 0.0.7", "popgym_arcade:make",
                                                               {"env_id": "MineSweeperEasy"}),
    "two-agent matrix game": ("matrax 0.0.5", "matrax:make", {"id": "Climbing-stateless-v0"}),
    "one API over other packages' envs": ("gxm 0.4.0", "gxm:make", {"id": "Pgx/othello"}),
}
# adapter -> (options, env steps per unit and env)
ADAPTERS = {"gymnax": ({"scan_T": 4}, 4),
            "purejaxrl-ppo": ({"num_steps": 4, "num_minibatches": 2, "update_epochs": 1}, 4)}
N = 8
POLICY = "mlp:hidden=16"
DOC = REPO / "docs" / "compatibility-jax-envs.md"

# what planning decides and what the env is, read in a subprocess (it imports JAX and the packages)
FACTS = """
import json, sys
from adapters._kit.jax_env import load
from rlbench import registry
from rlbench.api import Workload
from rlbench.workload import parse_policy
from rlbench.envs import env_api, refusal
import jax
out = []
for env, kwargs, adapters in json.loads(sys.argv[1]):
    workload = Workload(env, {n}, parse_policy({policy!r}), seed=0, env_kwargs=kwargs)
    fenv = load(jax, workload, "auto")
    kind, what = fenv.action[0], fenv.action[1]
    actions = (what if kind == "discrete" else f"{{what.size}} in [-1, 1]" if kind == "box" else
               f"{{what.size}} x {{what.max()}}" if what.min() == what.max() else " x ".join(map(str, what.ravel())))
    row = {{"api": env_api(env, kwargs), "obs_floats": fenv.obs_dim, "actions": str(actions),
           "legal": fenv.legal is not None, "decisions": {{}}}}
    for name, options in adapters:
        cls = registry.get(name)
        row["decisions"][name] = refusal(cls(), workload, cls.resolve_options(options))
    out.append(row)
print(json.dumps(out))
""".format(n=N, policy=POLICY)


def _env():
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ZOO_DIR), os.environ.get("PYTHONPATH"))
                                                         if p), "JAX_PLATFORMS": "cpu"}


@pytest.fixture(scope="module")
def facts():
    arg = json.dumps([(env, kw, [(a, o) for a, (o, _) in ADAPTERS.items()]) for _, env, kw in ZOO.values()])
    out = subprocess.run([sys.executable, "-c", FACTS, arg], capture_output=True, text=True, env=_env(),
                         cwd=REPO, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return dict(zip(ZOO, json.loads(out.stdout.strip().splitlines()[-1])))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One `rlbench run` of every env under both adapters, as a user would write the suite."""
    tmp = tmp_path_factory.mktemp("jaxzoo")
    options = "".join(f"options.{a} = {{ " + ", ".join(f"{k} = [{v}]" for k, v in o.items()) + " }\n"
                      for a, (o, _) in ADAPTERS.items())
    body = ""
    for _, env, kwargs in ZOO.values():
        kw = ", ".join(f"{k} = [{json.dumps(v)}]" for k, v in kwargs.items())
        body += (f'[[sweep]]\nadapters = {json.dumps(list(ADAPTERS))}\nenvs = ["{env}"]\nnum_envs = [{N}]\n'
                 f'policy = ["{POLICY}"]\nenv_kwargs = {{ {kw} }}\n{options}\n')
    suite = write_suite(tmp, body, protocol=TINY_PROTOCOL.replace("timeout_s = 60", "timeout_s = 300"))
    result = run_cli_subprocess(["run", str(suite), "--allow-errors"], tmp / "run", env=_env(), timeout=1800)
    assert result.rc == 0, result.stderr[-3000:]
    return result


def _rows(run, env, kwargs, adapter):
    return [r for r in run.rows if r["env"] == env and r["env_kwargs"] == kwargs and r["adapter"] == adapter]


def test_the_committed_table_is_what_planning_decides(facts):
    head = ("# JAX env packages\n\n"
            "JAX env packages of thirteen kinds, installed as tests/e2e/envzoo/requirements.txt pins them (`make envzoo`; "
            "Craftax is in constraints.txt), each through its own factory, under the JAX adapters: `runs` (an ok row "
            "whose env steps are exactly its units x num_envs x steps per unit: tests/e2e/test_jax_env_zoo.py) or "
            "`dropped` while planning with the reason. The API is the one rlbench detected; where the env has a "
            "mask of legal actions, the policies (random, MLP, PPO's) sample within it. Actions `k x n`: a "
            "multi-discrete action of k components of n choices each (a categorical per component; a mask over "
            "every combination makes it one choice among them); a reward per agent is summed (the team's: one "
            "policy acts for every agent of a JaxMARL env, on their observations together, and its episode "
            "ends at the env's `__all__`). "
            "Generated by "
            "`RLBENCH_WRITE_DOCS=1 pytest tests/e2e/test_jax_env_zoo.py`.\n\n")
    rows = ["| kind | package | env | API | observation (floats) | actions | legal-action mask | "
            + " | ".join(ADAPTERS) + " |", "|---" * (7 + len(ADAPTERS)) + "|"]
    for kind, (pkg, env, kwargs) in ZOO.items():
        f = facts[kind]
        env_text = f"`{env}` " + " ".join(f"`{k}={json.dumps(v)}`" for k, v in kwargs.items())
        cells = [f"dropped: {f['decisions'][a]}" if f["decisions"][a] else "runs" for a in ADAPTERS]
        rows.append(f"| {kind} | {pkg} | {env_text} | {f['api']} | {f['obs_floats']} | {f['actions']} | "
                    f"{'yes' if f['legal'] else 'no'} | " + " | ".join(cells) + " |")
    table = head + "\n".join(rows) + "\n"
    if os.environ.get("RLBENCH_WRITE_DOCS"):
        DOC.write_text(table)
    assert DOC.read_text() == table, "docs/compatibility-jax-envs.md is stale: RLBENCH_WRITE_DOCS=1 pytest " \
                                     "tests/e2e/test_jax_env_zoo.py"


CASES = [(kind, a) for kind in ZOO for a in ADAPTERS]


@pytest.mark.parametrize("kind, adapter", CASES, ids=[f"{k}-{a}" for k, a in CASES])
def test_each_pair_runs_with_exact_counts_or_is_dropped_with_a_reason(facts, run, kind, adapter):
    _, env, kwargs = ZOO[kind]
    reason = facts[kind]["decisions"][adapter]
    rows = _rows(run, env, kwargs, adapter)
    if reason is not None:
        assert "\n" not in reason and not rows, (reason, rows)
        return
    assert len(rows) == 1, rows
    row = rows[0]
    assert row["status"] == "ok", row.get("error")
    assert row["env_api"] == facts[kind]["api"]
    assert row["units"] > 0 and row["env_steps"] == row["units"] * N * ADAPTERS[adapter][1]
    assert row["compile_s"] > 0
