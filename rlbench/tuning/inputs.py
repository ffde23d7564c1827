"""What both tunes (`rlbench tune`, its --train) read from their request before anything runs: the budget, the
workload (the env built once, its kwargs typed) and how the answer names it."""
import re

from rlbench import registry
from rlbench.envs import planned_env_kwargs, wrapped_id
from rlbench.errors import UsageError
from rlbench.planning.flags import pairs
from rlbench.workload import Workload, kv_label, parse_policy


def parse_budget(raw: str) -> float:
    """'10m', '90s', '1h', '1h30m' or plain seconds -> seconds."""
    text = str(raw).strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        seconds = float(text)
    else:
        parts = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text)
        if not parts or not any(parts.groups()):
            raise UsageError(f"--budget {raw!r} (valid: seconds, or like 90s, 10m, 1h, 1h30m)")
        h, m, s = (int(g or 0) for g in parts.groups())
        seconds = 3600 * h + 60 * m + s
    if seconds < 10:
        raise UsageError(f"--budget {raw!r} must be at least 10s (one configuration, twice)")
    return seconds


def label(workload) -> str:
    env = workload.env_id + (f"({kv_label(workload.env_kwargs)})" if workload.env_kwargs else "")
    return f"{env} with policy {workload.policy.label}"


def plan_workload(args) -> Workload:
    env_kwargs = pairs("--env-kwarg", args.env_kwarg)
    if registry.family_of_workload(args.env) is not None:
        raise UsageError(f"--env {args.env}: tune races env-stepping strategies; give an env, not a workload")
    env_id = wrapped_id(args.env, args.env_wrapper)
    kwargs, frameskip = planned_env_kwargs(env_id, env_kwargs, from_cli=True)
    return Workload(env_id, 1, parse_policy(args.policy), 0, frameskip, kwargs)
