"""A forked worker never garbage-collects its parent's objects.

A fork copies every object of the parent, cyclic garbage included, but only the forking thread. When the
child's collector later frees such an object, its destructor runs there: EnvPool's joins threads the child
does not have, and the child dies of SIGSEGV (tests/core/test_forking.py shows it), closed pool or not.
So every fork of a process that runs adapters (vector envs' workers, actors, samplers: multiprocessing's
fork, SB3's, gymnasium's) moves the parent's objects out of the collector's reach first (gc.freeze, constant
time), in the child for good, in the parent until the fork returns. The child still collects what it makes;
what it inherited stays as the parent left it, which is also what keeps its pages shared (CPython's own
advice for fork without exec).
"""
import gc
import os

_installed = False
_froze = False   # whether this fork's freeze was ours (a framework may have frozen objects for its own reasons)


def _before() -> None:
    global _froze
    _froze = gc.get_freeze_count() == 0
    gc.freeze()


def _after_in_parent() -> None:
    if _froze:
        gc.unfreeze()


def freeze_gc_across_forks() -> None:
    """Install the fork hooks, once per process (a forked child inherits them)."""
    global _installed
    if not _installed:
        os.register_at_fork(before=_before, after_in_parent=_after_in_parent)
        _installed = True
