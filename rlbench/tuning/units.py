"""A strategy's unit of work sized from the env's profiled cost, so that a unit takes a bounded time whatever a
step costs, from a microsecond to a second. A unit is what a session's `step()` does once (a vector step, rlpyt's
batch of batch_T steps of every env, a compiled scan of scan_T steps); the harness times at least
`warmup_units + min_units` of them a job. An adapter's defaults are sized for cheap envs (rlpyt's batch_T=32): on a
driving simulator of 29 ms a step, one rlpyt unit at 16 envs took ~15 s, seven of them outlived tune's 60 s job
and the strategy that pays most there was never measured (issue 63). So where the adapter names the option that
sets its unit's length (`Adapter.unit_option`), tune gives it the largest length, at most the adapter's own
default or tune_space's value, whose unit takes at most UNIT_S when one process steps every env; a length the
adapter chose stays as it is wherever it fits, so the cells of cheap envs are what they were.
"""
import math

UNIT_S = 0.5   # the most one unit may take, its steps costed as one process stepping them one after another


def cost_s_per_step(profile, device: str = None) -> float:
    """One env step's cost as the profile measured it: the env's own (resets spread over the steps) and the
    policy's at its cheapest batch, in seconds."""
    from rlbench.tuning import calibrate
    return (calibrate.env_us(profile) + calibrate.policy_us_per_step(profile, device)) / 1e6


def longest(num_envs: int, cost_s: float, unit_s: float = UNIT_S) -> int:
    """The most steps per env a unit of num_envs envs may take: unit_s at cost_s a step, at least 1."""
    per_length_s = max(num_envs, 1) * cost_s
    return max(1, math.floor(unit_s / per_length_s)) if per_length_s > 0 else math.inf


def sized(adapter_cls, given: dict, num_envs: int, cost_s: float) -> dict:
    """`given` (a tune_space setting) with the adapter's unit length brought down to `longest` where its value
    (given, else the default) is longer; unchanged where the adapter names no unit option or the length fits."""
    name = getattr(adapter_cls, "unit_option", "")
    if not name:
        return given
    length = int(given.get(name, adapter_cls.option(name).default))
    cap = longest(num_envs, cost_s)
    return given if length <= cap else {**given, name: int(cap)}
