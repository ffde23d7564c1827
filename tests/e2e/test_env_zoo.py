"""Third-party env packages of six kinds (tests/e2e/envzoo/requirements.txt, `make envzoo`), run as a user brings
them: every (env, adapter) pair either gives serial's observations step for step or is dropped while
planning with its reason; none is an `error` row. The table is docs/compatibility-envs.md, checked here
(RLBENCH_WRITE_DOCS=1 rewrites it from this run). Slow: real envs, a Ray start per Ray session."""
import os
import shutil
import tempfile

import pytest
from support import REPO, canon_batch

from rlbench import registry
from rlbench.api import PolicySpec, Workload
from rlbench.envs import refusal, spaces

ZOO_DIR = REPO / ".envzoo"
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (ZOO_DIR / ".installed").exists(), reason="no .envzoo: make envzoo")]

# kind -> (package, env as rlbench names it, env_kwargs)
ZOO = {
    "gridworld, text missions": ("minigrid 3.2.0", "minigrid:MiniGrid-DoorKey-5x5-v0", {}),
    "driving": ("highway-env 1.12.1", "highway_env:parking-v0", {}),
    "goal-conditioned robotics": ("gymnasium-robotics 1.4.2", "gymnasium_robotics:PointMaze_UMaze-v3", {}),
    "board game": ("gymnasium_2048 0.1.2", "gymnasium_2048:gymnasium_2048/TwentyFortyEight-v0", {}),
    "Box2D physics": ("Box2D 2.3.10", "LunarLander-v3", {}),
    "procedurally generated": ("crafter 1.8.3 (wrapped: tests/e2e/envzoo/crafter_gym.py)", "crafter_gym:make_env", {}),
}
ADAPTERS = [("serial", {}), ("gymnasium-sync", {}), ("gymnasium-async", {}), ("gymnasium-async", {"shared_memory": False}),
            ("sb3-dummy", {}), ("sb3-subproc", {}), ("tianshou-dummy", {}), ("tianshou-subproc", {}),
            ("tianshou-shmem", {}), ("tianshou-ray", {}), ("ray-actors", {}), ("rlpyt-serial", {}),
            ("rlpyt-cpu", {"workers": 2}), ("envpool-sync", {})]
N, STEPS = 2, 8
DOC = REPO / "docs" / "compatibility-envs.md"


PATHS = [str(ZOO_DIR), str(REPO / "tests" / "e2e" / "envzoo"), str(REPO / "examples")]


@pytest.fixture(autouse=True)
def zoo_on_pythonpath(monkeypatch):
    """Here and in worker processes (spawned, Ray's) only while these tests run: the folder must not shadow
    the main environment's packages for the other tests."""
    for path in reversed(PATHS):
        monkeypatch.syspath_prepend(path)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(PATHS))


@pytest.fixture(autouse=True)
def own_tmpdir(monkeypatch):
    """gymnasium-robotics' mazes write their MJCF into TMPDIR (beside a TemporaryDirectory) and never remove it;
    these tests make the envs in this process and its workers, not in a cell's TMPDIR: a short folder of the
    test's (Ray's socket paths have a length limit), removed after it."""
    folder = tempfile.mkdtemp(prefix="rlbench-zoo-")
    monkeypatch.setenv("TMPDIR", folder)
    monkeypatch.setattr(tempfile, "tempdir", folder)
    yield
    shutil.rmtree(folder, ignore_errors=True)


# rlpyt-cpu's workers pick their own actions: a deterministic policy, so serial's are the same
RANDOM, LINEAR = PolicySpec(), PolicySpec("user", factory="toyenvs.policies:linear")
POLICY = {"rlpyt-cpu": LINEAR}


def _workload(env, kwargs, policy=RANDOM):
    return Workload(env, N, policy, seed=0, env_kwargs=dict(kwargs))


def _label(adapter, options):
    return adapter + "".join(f" ({k}={str(v).lower()})" for k, v in options.items())


def _decision(adapter, options, env, kwargs):
    cls = registry.get(adapter)
    return refusal(cls(), _workload(env, kwargs), cls.resolve_options(options))


def _native(adapter, env) -> bool:
    """EnvPool carries an env by its own C++ port of it (LunarLander-v3): not gymnasium's transitions."""
    return adapter.startswith("envpool")


def _trajectory(adapter, options, env, kwargs, policy=RANDOM):
    """The observation batches after reset and after each step (rlpyt's samplers: their samples' obs, time
    step by time step, which are the same)."""
    workload = _workload(env, kwargs, policy)
    space = spaces(workload.env_id, workload.env_kwargs)[0]
    cls = registry.get(adapter)
    rlpyt = adapter.startswith("rlpyt")
    session = cls().open(workload, cls.resolve_options({**options, **({"batch_T": STEPS} if rlpyt else {})}))
    try:
        if rlpyt:
            assert session.step() == STEPS * N
            obs = session.samples["obs"]
            return [canon_batch(_at(obs, t), space) for t in range(STEPS)]
        out = [canon_batch(session.obs, space)]
        for _ in range(STEPS - 1):
            assert session.step() == N
            out.append(canon_batch(session.obs, space))
        return out
    finally:
        session.close()


def _at(batch, t):
    """Time step t of a (T, num_envs, ...) batch, every part."""
    if isinstance(batch, dict):
        return {k: _at(v, t) for k, v in batch.items()}
    if isinstance(batch, tuple):
        return tuple(_at(v, t) for v in batch)
    return batch[t]


def _cell(adapter, options, env, kwargs) -> str:
    reason = _decision(adapter, options, env, kwargs)
    if reason is not None:
        return f"dropped: {reason}"
    return "runs its own port" if _native(adapter, env) else "carries"


def test_the_committed_table_is_what_planning_decides():
    head = ("# Third-party env packages\n\n"
            "Six popular env packages of different kinds, installed as tests/e2e/envzoo/requirements.txt pins them "
            "(`make envzoo`), under each adapter of the main environment: `carries` (runs, with serial's "
            "observations step for step: tests/e2e/test_env_zoo.py), `runs its own port` (EnvPool's C++ env of the "
            "same id), or `dropped` while planning with the reason. Generated by `RLBENCH_WRITE_DOCS=1 pytest "
            "tests/e2e/test_env_zoo.py`.\n\n")
    rows = ["| adapter | " + " | ".join(f"{kind}: `{env}` ({pkg})" for kind, (pkg, env, _) in ZOO.items()) + " |",
            "|---" * (len(ZOO) + 1) + "|"]
    for adapter, options in ADAPTERS:
        rows.append(f"| {_label(adapter, options)} | "
                    + " | ".join(_cell(adapter, options, env, kw) for _, env, kw in ZOO.values()) + " |")
    table = head + "\n".join(rows) + "\n"
    if os.environ.get("RLBENCH_WRITE_DOCS"):
        DOC.write_text(table)
    assert DOC.read_text() == table, "docs/compatibility-envs.md is stale: RLBENCH_WRITE_DOCS=1 pytest tests/e2e/test_env_zoo.py"


CASES = [(kind, a, o) for kind in ZOO for a, o in ADAPTERS if a != "serial"]


@pytest.mark.parametrize("kind, adapter, options", CASES, ids=[f"{k}-{_label(a, o)}" for k, a, o in CASES])
def test_each_pair_gives_serials_observations_or_is_dropped_with_a_reason(kind, adapter, options):
    _, env, kwargs = ZOO[kind]
    reason = _decision(adapter, options, env, kwargs)
    if reason is not None:
        assert "\n" not in reason and ("observations" in reason or "native" in reason), reason
        return
    if _native(adapter, env):
        return
    policy = POLICY.get(adapter, RANDOM)
    assert _trajectory(adapter, options, env, kwargs, policy) == _trajectory("serial", {}, env, kwargs, policy)
