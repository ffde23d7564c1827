"""Busy work that costs CPU time, not sleep: stands in for env physics or policy inference."""
from time import perf_counter_ns


def busy_wait_us(us: float) -> None:
    if us <= 0:
        return
    deadline = perf_counter_ns() + int(us * 1000)
    while perf_counter_ns() < deadline:
        pass
