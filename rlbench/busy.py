"""Busy work that costs CPU time, not sleep: stands in for env physics or policy inference.

It burns this thread's CPU time, not wall-clock time: with more processes than cores a preempted
step must still get its work done, so oversubscribing the machine cannot make steps look cheaper.
"""
from time import thread_time_ns


def busy_wait_us(us: float) -> None:
    if us <= 0:
        return
    deadline = thread_time_ns() + int(us * 1000)
    while thread_time_ns() < deadline:
        pass
