"""The fixtures and hooks of every test (this conftest applies to every folder under tests/): a private
calibration cache, no test leaving a process behind, the tests that load a threaded runtime last. The plain
helpers (REPO, run_cli, write_suite, ...) are in tests/support, imported as `from support import ...`."""
import os
import shutil
import signal
import sys
import tempfile

import psutil
import pytest
from support import alive, kill_tree, live_children, run_cli

# The tests run as from a terminal: started with SIGINT ignored (a script's background job, some CI runners), pytest
# and every run it starts would inherit that, and rlbench, as Python does, leaves an ignored SIGINT ignored; the
# SIGINT case of test_faults would then find a run Ctrl-C cannot stop.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# The tests' calibrations (rlbench tune, rlbench calibrate) go to a cache of their own, never the user's.
CACHE = tempfile.mkdtemp(prefix="rlbench-test-cache-")
os.environ["RLBENCH_CACHE"] = CACHE


@pytest.fixture(autouse=True)
def no_leaked_children():
    """Every test must leave the process tree of the test runner as it found it."""
    before = live_children()
    yield
    leaked = live_children() - before
    if leaked:  # give processes that are exiting right now a moment
        psutil.wait_procs([psutil.Process(p) for p in leaked if psutil.pid_exists(p)], timeout=3)
        leaked = {p for p in leaked if alive(p)}
        kill_tree(leaked)
    assert not leaked, f"test left child processes behind: {sorted(leaked)}"


def _jax_started() -> bool:
    bridge = sys.modules.get("jax._src.xla_bridge")
    return bool(getattr(bridge, "backends_are_initialized", lambda: False)())


@pytest.fixture(autouse=True)
def jax_never_started(request):
    """Only a test marked `threaded_runtime` may start JAX's backend in the test runner: its threads make every
    later fork of this process deadlock-prone, so a test that starts it elsewhere fails here, by name, and not
    whichever later test forks or checks (test_jax's) on the same worker."""
    before = _jax_started()
    yield
    if not before and request.node.get_closest_marker("threaded_runtime") is None:
        assert not _jax_started(), ("this test started JAX's backend in the test runner: run what starts it in a "
                                    "spawned interpreter (test_jax's `jax` fixture) or mark it threaded_runtime")


def pytest_sessionfinish(session, exitstatus):
    """Nothing a failed test left behind may hold the run open (a vector env's __del__ at exit waits on it)."""
    kill_tree(live_children())
    shutil.rmtree(CACHE, ignore_errors=True)


def pytest_collection_modifyitems(session, config, items):
    """Tests marked `threaded_runtime` load JAX or Ray into this process; their threads make a later fork of
    it deadlock-prone (as JAX warns), and many tests fork it. So they run after every other test."""
    items.sort(key=lambda item: item.get_closest_marker("threaded_runtime") is not None)


@pytest.fixture
def cli_run(tmp_path, capsys):
    """cli_run(args, name="run") -> Run, in-process, into tmp_path/name."""
    def go(args, name="run"):
        return run_cli(args, tmp_path / name, capsys)
    return go
