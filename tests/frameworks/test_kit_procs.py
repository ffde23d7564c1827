"""The process toolkit's shared pieces (adapters._kit.procs): what an object handed to a worker leaves out of
its pickle, the order a multi-process session's close() ends things in, and the one `context` option."""
import os
import pickle
import signal
import threading
import time

import pytest

from adapters._kit.procs import (
    CONTEXT_OPTION,
    POLL_S,
    WORKER_OPTIONS,
    ParamStore,
    Transient,
    WorkerSession,
    held,
    raise_if_exited,
    stop_processes,
)
from rlbench import registry


class _Writer(Transient):
    transient = ("_lock", "_views")

    def __init__(self):
        self.address, self._lock, self._views = "host:1", threading.Lock(), [1, 2]


def test_transient_attributes_stay_behind_and_arrive_as_none():
    writer = _Writer()
    copy = pickle.loads(pickle.dumps(writer))   # a lock alone would make the pickle fail
    assert copy.address == "host:1" and copy._lock is None and copy._views is None
    assert writer._views == [1, 2]              # the master's own object keeps them


class _Proc:
    def __init__(self, log):
        self.log, self.alive = log, True

    def join(self, timeout=None):
        self.log.append("join")
        self.alive = False

    def is_alive(self):
        return self.alive

    def kill(self):
        raise AssertionError("a process that exits in time is not killed")


class _Helpers:
    def __init__(self, log):
        self.log = log

    def stop(self):
        self.log.append("helpers")


class _Session(WorkerSession):
    def __init__(self, log, helpers):
        self.log, self.procs, self.helpers, self.sems = log, [_Proc(log), _Proc(log)], helpers, ["sem"]

    def drop_shared(self):
        self.log.append("drop")
        self.sems = []


def test_a_session_ends_its_workers_then_what_they_share_then_its_helpers():
    log = []
    session = _Session(log, _Helpers(log))
    session.end_workers()
    assert log == ["join", "join", "drop", "helpers"]
    assert session.procs == [] and session.sems == [] and session.helpers is None
    session.end_workers()                      # a second close() finds nothing left to end
    assert log == ["join", "join", "drop", "helpers", "drop"]


def test_a_session_that_started_no_helpers_ends_its_workers():
    log = []
    session = _Session(log, None)
    session.end_workers()
    assert log == ["join", "join", "drop"]


def test_every_adapter_with_a_start_method_offers_the_same_choices():
    assert CONTEXT_OPTION in WORKER_OPTIONS
    for name, cls in registry.discover().items():
        context = next((o for o in cls.options if o.name == "context"), None)
        if context is not None:
            assert (context.type, set(context.choices)) == (str, set(CONTEXT_OPTION.choices)), name


def _hold_forever(lock, holding):
    lock.acquire()
    holding.set()
    time.sleep(600)


def test_a_peer_killed_while_holding_the_parameter_lock_fails_publish_and_load_instead_of_hanging():
    """A sampler SIGKILLed inside ParamStore's lock never releases it: both sides must notice the dead peer."""
    import multiprocessing as mp

    import torch
    ctx = mp.get_context("fork")
    net = torch.nn.Linear(3, 2)
    store = ParamStore(ctx, sum(p.numel() for p in net.parameters()))
    store.attach()
    holding = ctx.Event()
    procs = [ctx.Process(target=_hold_forever, args=(store.lock, holding), daemon=True)]
    procs[0].start()
    try:
        assert holding.wait(30)
        os.kill(procs[0].pid, signal.SIGKILL)
        procs[0].join(30)
        t0 = time.monotonic()
        with pytest.raises(RuntimeError, match=r"sampler 0 \(pid \d+\) exited with code -9"):
            store.publish(net, lambda: raise_if_exited(procs, "sampler"))
        store._views["v"][0] = 7  # a version the reader has not loaded, so load() goes for the lock
        with pytest.raises(RuntimeError, match=r"exited with code -9"):
            store.load(net, lambda: raise_if_exited(procs, "sampler"))
        assert time.monotonic() - t0 < 4 * POLL_S + 5
    finally:
        stop_processes(procs, grace_s=0)


def test_held_releases_the_lock_when_the_body_raises():
    lock = threading.Lock()
    with pytest.raises(ValueError), held(lock, lambda: None):
        raise ValueError
    assert lock.acquire(blocking=False)
