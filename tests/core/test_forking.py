"""A forked worker never frees its parent's objects (rlbench/running/forking.py): a fresh interpreter leaves
cyclic garbage behind (an EnvPool, or an object whose finalizer says where it ran), forks, and the child
collects. Without the hooks EnvPool's destructor kills the child with SIGSEGV, or deadlocks it on a lock one of
the parent's threads held as it forked (seen on a loaded machine); with them the child lives and nothing of the
parent is finalized there, and the parent collects as before."""
import ast
import importlib.util
import re
import signal
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import gc, multiprocessing as mp, os, sys
    gc.disable()
    if sys.argv[1] == "hooks":
        import rlbench.api  # what every process that runs an adapter imports
    def cycle(thing):
        class Holder:
            pass
        h = Holder()
        h.thing, h.me = thing, h
    if sys.argv[2] == "envpool":
        import envpool
        pool = envpool.make("CartPole-v1", env_type="gymnasium", num_envs=2)
        pool.reset()
        pool.close()
        cycle(pool)
        del pool
    else:
        r, w = os.pipe()
        class Tell:
            def __del__(self):
                os.write(w, str(os.getpid()).encode() + b" ")
        cycle(Tell())
    def child():
        gc.collect()
    p = mp.get_context("fork").Process(target=child)
    p.start()
    p.join(float(sys.argv[3]))
    hung = p.is_alive()
    if hung:
        p.kill()
        p.join()
    frozen_after = gc.get_freeze_count()
    gc.collect()
    if sys.argv[2] != "envpool":
        os.close(w)
        print("finalized in", os.read(r, 100).decode().split(), "parent", os.getpid())
    print("exitcode", "hung" if hung else p.exitcode, "frozen after", frozen_after)
""")


JOIN_S = 30   # a child that collects takes under 2 s here, alone; one still there after JOIN_S is deadlocked


def _run(hooks: bool, garbage: str) -> str:
    out = subprocess.run([sys.executable, "-c", SCRIPT, "hooks" if hooks else "none", garbage, str(JOIN_S)],
                         capture_output=True, text=True, timeout=JOIN_S + 120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_child_never_finalizes_the_parents_garbage_and_the_parent_still_does():
    out = _run(True, "finalizer")
    finalized, parent = out.split("finalized in ")[1].split(" parent ")
    assert ast.literal_eval(finalized) == [parent.split()[0]]          # once, in the parent, by its own collection
    assert "exitcode 0 frozen after 0" in out              # the parent's objects collectable again


def test_without_the_hooks_the_child_finalizes_them():
    """The hazard the hooks remove is real: the same script without them runs the finalizer in the child."""
    out = _run(False, "finalizer")
    finalized, parent = out.split("finalized in ")[1].split(" parent ")
    assert len(ast.literal_eval(finalized)) == 2 and parent.split()[0] in ast.literal_eval(finalized)


@pytest.mark.skipif(importlib.util.find_spec("envpool") is None, reason="envpool not installed")
def test_an_envpool_in_the_parents_garbage_no_longer_kills_a_forked_worker():
    assert re.search(rf"exitcode ({-signal.SIGSEGV}|hung) ", _run(False, "envpool"))
    assert "exitcode 0 frozen after 0" in _run(True, "envpool")
