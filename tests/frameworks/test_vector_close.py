"""A gymnasium vector env whose worker died in the middle of a call closes at once and leaves no process behind
(gymnasium's own close() would wait for the pipes read before the failure and never return), through every
adapter that steps one: gymnasium-async and cleanrl-ppo's subproc envs."""
import os
import signal
import time

import psutil
import pytest

from rlbench import registry
from rlbench.api import Workload

WORKLOAD = Workload("CartPole-v1", 3, seed=1)


def _gymnasium_async():
    cls = registry.get("gymnasium-async")
    session = cls().open(WORKLOAD, cls.resolve_options({}))
    return session.envs, session.close


def _cleanrl_subproc():
    from adapters.cleanrl_ppo import GymVec
    vec = GymVec(WORKLOAD, subproc=True)
    return vec.envs, vec.close


@pytest.mark.timeout(60)
@pytest.mark.parametrize("make", [_gymnasium_async, _cleanrl_subproc], ids=["gymnasium-async", "cleanrl-subproc"])
def test_a_worker_dying_mid_call_leaves_a_prompt_close_and_no_process(make):
    envs, close = make()
    victim = envs.processes[-1]   # the last pipe read: the others are read before its end is found closed
    os.kill(victim.pid, signal.SIGSTOP)
    envs.reset_async(seed=0)
    for pipe in envs.parent_pipes[:-1]:
        assert pipe.poll(10), "a live worker did not answer"
    os.kill(victim.pid, signal.SIGKILL)
    with pytest.raises((EOFError, ConnectionError)):   # which one: whether its message was still unread
        envs.reset_wait()
    t0 = time.monotonic()
    close()
    assert time.monotonic() - t0 < 3
    assert not any(p.is_alive() for p in envs.processes)   # the autouse fixture checks the whole tree too


@pytest.mark.timeout(60)
def test_a_stopped_worker_beside_a_dead_one_is_killed():
    """SIGTERM waits while a worker is stopped (SIGSTOP): it gets SIGKILL once TERM_WAIT_S have passed."""
    from adapters._kit.gym_vec import TERM_WAIT_S
    envs, close = _gymnasium_async()
    stopped, dead = envs.processes[0], envs.processes[1]
    os.kill(stopped.pid, signal.SIGSTOP)
    os.kill(dead.pid, signal.SIGKILL)
    dead.join(10)
    deadline = time.monotonic() + 10
    while psutil.Process(stopped.pid).status() != psutil.STATUS_STOPPED and time.monotonic() < deadline:
        time.sleep(0.01)   # a SIGTERM sent before the stop takes effect would be delivered first
    t0 = time.monotonic()
    close()
    assert time.monotonic() - t0 < TERM_WAIT_S + 3
    assert stopped.exitcode == -signal.SIGKILL and dead.exitcode == -signal.SIGKILL
