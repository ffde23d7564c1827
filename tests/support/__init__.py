"""Plain helpers every test may import (`from support import ...`; pyproject.toml puts tests/ on sys.path):
run the CLI (in this process or in a fresh one), read a run directory back, write suite files, find the
processes and /dev/shm entries a test left behind. The pytest fixtures and hooks are in tests/conftest.py."""
import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import psutil

from rlbench import cli
from rlbench.results.store import read_rows

SUPPORT = Path(__file__).resolve().parent      # tests/support: also the modules cells import by name
TESTS = SUPPORT.parent
REPO = TESTS.parent

# Every CLI run in the tests is this small: one repeat, a 50 ms timed window.
TINY = ["--repeats", "1", "--duration", "0.05"]
# For learners whose actors run apart (rlpyt-async, Ape-X, R2D2): the learner also samples what was added before
# the window, so on a loaded machine 50 ms may see no transition added (replay_ratio nan); half a second does.
TINY_ASYNC = ["--repeats", "1", "--duration", "0.5"]
# The same for suite files, with a short warm-up too (flags cannot set the warm-up).
TINY_PROTOCOL = """[protocol]
repeats = 1
warmup_s = 0.02
warmup_units = 2
duration_s = 0.05
min_units = 5
timeout_s = 60
"""


@dataclass
class Run:
    """What one `rlbench run` left behind."""
    rc: int
    out: Path
    stdout: str = ""
    stderr: str = ""
    rows: list = field(default_factory=list)

    @property
    def env(self) -> dict:
        return json.loads((self.out / "env.json").read_text())

    def row(self, adapter: str) -> dict:
        matches = [r for r in self.rows if r["adapter"] == adapter]
        assert len(matches) == 1, f"expected one {adapter} row, got {len(matches)}: {self.rows}"
        return matches[0]


def read_run(out: Path) -> list:
    path = Path(out) / "results.jsonl"
    return read_rows(str(path)) if path.exists() else []


def run_cli(args, out=None, capsys=None) -> Run:
    """`rlbench ARGS [--out OUT]` in this process (cheap; the cells still run in fresh processes)."""
    argv = [str(a) for a in args] + (["--out", str(out)] if out is not None else [])
    rc = cli.main(argv)
    captured = capsys.readouterr() if capsys is not None else None
    return Run(rc, Path(out) if out is not None else None,
               captured.out if captured else "", captured.err if captured else "",
               read_run(out) if out is not None else [])


def run_cli_subprocess(args, out=None, env=None, cwd=None, timeout=240) -> Run:
    """`python -m rlbench.cli ARGS` in a fresh interpreter (for plugins on PYTHONPATH)."""
    argv = [str(a) for a in args] + (["--out", str(out)] if out is not None else [])
    proc = subprocess.run([sys.executable, "-m", "rlbench.cli", *argv], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=timeout)
    return Run(proc.returncode, Path(out) if out is not None else None, proc.stdout, proc.stderr,
               read_run(out) if out is not None else [])


def write_suite(directory: Path, body: str, name: str = "suite.toml", protocol: str = TINY_PROTOCOL) -> Path:
    path = Path(directory) / name
    path.write_text(protocol + body)
    return path


def sweep(adapters, envs=("CartPole-v1",), num_envs=(1,)) -> str:
    """One [[sweep]] table."""
    return (f"[[sweep]]\nadapters = {json.dumps(list(adapters))}\nenvs = {json.dumps(list(envs))}\n"
            f"num_envs = {json.dumps(list(num_envs))}\n")


def alive(pid: int) -> bool:
    """True while the pid runs (a zombie has already died)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


# multiprocessing's own helpers of the test process (forkserver, resource tracker): started by the first
# test that uses forkserver or spawn, they live as long as the process that started them, by design
MP_HELPERS = ("from multiprocessing.forkserver import main", "from multiprocessing.resource_tracker import main")


def live_children() -> set:
    out, me = set(), psutil.Process()
    for p in me.children(recursive=True):
        try:
            helper = p.ppid() == me.pid and any(h in " ".join(p.cmdline()) for h in MP_HELPERS)
            if p.status() != psutil.STATUS_ZOMBIE and not helper:
                out.add(p.pid)
        except psutil.NoSuchProcess:
            pass
    return out


def kill_tree(pids) -> None:
    """Kill these processes and everything under them; a leaked worker must not outlive its test, or later
    tests (and pytest's own exit, which may wait on it) inherit it."""
    procs = []
    for pid in pids:
        try:
            p = psutil.Process(pid)
            procs += [p, *p.children(recursive=True)]
        except psutil.NoSuchProcess:
            pass
    for p in procs:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=5)


# -- misbehaving adapters, installed through a fake distribution's entry points -----------------------

def misbehaving_adapters_env(root: Path, pid_dir: Path) -> dict:
    """An environment whose processes see tests/support/fake_adapters.py as adapters test-hang, test-boom,
    test-leaky, test-shm-leak and the test-*-env ones (entry points of a fake distribution on PYTHONPATH)."""
    from support._dist import fake_distribution
    root.mkdir(parents=True, exist_ok=True)
    module = "rlbench_test_adapters"
    env = fake_distribution(root, module, {n: f"{module}:{cls}" for n, cls in (
        ("hang", "Hang"), ("boom", "Boom"), ("leaky", "Leaky"), ("shm_leak", "ShmLeak"),
        ("own_env", "OwnEnv"), ("broken_env", "BrokenEnv"), ("missing_env", "MissingEnv"))},
        {module: (SUPPORT / "fake_adapters.py").read_text()})
    env["RLBENCH_TEST_PIDDIR"] = str(pid_dir)
    return env


def shm_left_since(before: dict, settle_s: float = 10.0) -> dict:
    """/dev/shm entries new since `before` (proctree.shm_snapshot()) that no process outside this test's
    own tree holds and that are still there after `settle_s`: what the test left behind. Another run's
    segments on the machine are not counted, nor one another run is removing right now (its cell killed,
    the segment not yet unlinked: unheld for that moment)."""
    from support.procs import settle
    return settle(lambda: _unheld_since(before), timeout=settle_s)


def _unheld_since(before: dict) -> dict:
    import os

    from rlbench.running import proctree
    new = {k: n for k, n in proctree.shm_snapshot().items() if k not in before}
    if new:
        ours = {os.getpid(), *proctree.descendants(os.getpid())}
        held_by_others = proctree.held_shm([p for p in proctree.all_pids() if p not in ours])
        new = {k: n for k, n in new.items() if k not in held_by_others and not _another_bystanders(n, ours)}
    return new


def _another_bystanders(name: str, ours: set) -> bool:
    """A loose file test_faults' bystander of another pytest session writes on purpose (unheld, named
    rlbenchtest_bystander_<its pid>_<i>, removed by it when it stops): not this test's leak while that
    process lives outside this test's tree."""
    import re

    import psutil
    m = re.fullmatch(r"rlbenchtest_bystander_(\d+)_\d+", name)
    return bool(m) and int(m.group(1)) not in ours and psutil.pid_exists(int(m.group(1)))


def canon_batch(batch, space):
    """A batch as {path: list of python values}, whatever container the adapter returned it in (a tuple of
    str, or numpy's array of str; a tuple of GraphInstances), so carriers compare by value."""
    kind = type(space).__name__
    if kind == "Dict":
        return {f"/{k}{p}": v for k in space.spaces for p, v in canon_batch(batch[k], space[k]).items()}
    if kind == "Tuple":
        return {f"/{i}{p}": v for i, s in enumerate(space.spaces) for p, v in canon_batch(batch[i], s).items()}
    if kind == "Graph":
        return {"": [(g.nodes.tolist(), g.edges.tolist(), g.edge_links.tolist()) for g in batch]}
    if kind == "Sequence":
        return {"": [tuple(np.asarray(x).tolist()) for x in batch]}
    return {"": np.asarray(batch).tolist() if isinstance(batch, np.ndarray) else list(batch)}
