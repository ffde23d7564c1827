"""Env arguments: checked against an env of rlbench's own (its known keys, their types, choices and ranges), taken
as given by the user's env (read as TOML reads a value from the command line, except where the env declares a
string), and planned: the user's env is built once with them, so one that does not build is refused before
anything runs."""
import inspect
import math
import types

from rlbench.envs import users
from rlbench.envs.catalogue import WRAP, env_info, frameskip_of
from rlbench.envs.probing import spaces
from rlbench.errors import UsageError


def typed_env_kwargs(env_id: str, given: dict, from_cli: bool = False) -> dict:
    """given env arguments checked against the env's known ones and typed like their defaults."""
    info = env_info(env_id)
    if info.kwargs is None:
        return user_env_kwargs(env_id, given, from_cli)
    out = {}
    for key, raw in given.items():
        if key not in info.kwargs:
            raise UsageError(f"unknown key '{key}' for {env_id} (valid: {', '.join(info.kwargs) or 'none'})")
        kind = type(info.kwargs[key])
        if key in info.choices:
            if raw not in info.choices[key]:
                raise UsageError(f"{key}={raw!r} for {env_id} (valid: {', '.join(info.choices[key])})")
            out[key] = raw
            continue
        low, high = info.ranges.get(key, (0, math.inf))
        valid = (f"a {'' if kind is int else 'finite '}number ({kind.__name__}) >= {low:g}"
                 + (f" and <= {high:g}" if high < math.inf else ""))
        try:
            if isinstance(raw, bool) or (kind is int and isinstance(raw, float) and not raw.is_integer()):
                raise ValueError
            value = kind(raw)
        except (TypeError, ValueError):
            raise UsageError(f"{key}={raw!r} for {env_id} must be {valid}") from None
        if not low <= value <= high or abs(value) == math.inf:  # NaN is in no range
            raise UsageError(f"{key}={raw!r} for {env_id} must be {valid}")
        out[key] = value
    return out


def planned_env_kwargs(env_id: str, given: dict, from_cli: bool = False) -> tuple:
    """(typed env_kwargs, frameskip) of a planned workload; the user's env is built once here, so one
    that does not build is refused before anything runs."""
    kwargs = typed_env_kwargs(env_id, given, from_cli)
    info = env_info(env_id)
    if info.probed:
        spaces(env_id, kwargs)
    return kwargs, frameskip_of(info, kwargs)


def user_env_kwargs(env_id: str, given: dict, from_cli: bool = False) -> dict:
    """The user's env takes what it takes (its build while planning says what it refuses). A suite's value
    is TOML's already; one from the command line is read as TOML reads it (4 -> int, 0.5 -> float, true ->
    bool), else a string, and stays the string where the env declares that argument a string (Pgx's
    `make(env_id: Literal["2048", ...])`: `--env-kwarg env_id=2048`). `frameskip` is rlbench's accounting
    too: an integer >= 1."""
    from rlbench.workload import literal
    out = dict(given)
    if from_cli:
        strings = string_arguments(env_id) if given else set()
        for key, raw in given.items():
            value = literal(raw)
            out[key] = raw if key in strings and not isinstance(value, str) else value
    skip = out.get("frameskip", 1)
    if isinstance(skip, bool) or not isinstance(skip, int) or skip < 1:
        raise UsageError(f"frameskip={given.get('frameskip')!r} for {env_id} must be an integer >= 1")
    return out


def string_arguments(env_id: str) -> set:
    """The arguments a user's env declares strings, by annotation (str, a Literal of strings, str | None)
    or by a string default: its factory's, or a registered id's creator's and registered kwargs'. What
    cannot be read declares nothing."""
    import typing
    base = env_id.split(WRAP)[0]
    try:
        kind, target = users.user_target(base) if ":" in base else ("id", base)
        defaults = {}
        if kind == "id":
            import gymnasium as gym
            from gymnasium.envs.registration import load_env_creator
            spec = gym.spec(target)
            defaults = dict(spec.kwargs)
            target = spec.entry_point if callable(spec.entry_point) else load_env_creator(spec.entry_point)
        signature = inspect.signature(target)
    except Exception:  # a callee rlbench cannot read (a C extension, an id that does not load)
        return set()
    try:
        hints = typing.get_type_hints(target.__init__ if inspect.isclass(target) else target)
    except Exception:  # an annotation that does not resolve (a partial, a name imported for type checking only)
        hints = {}

    def textual(hint) -> bool:
        args = typing.get_args(hint)
        if typing.get_origin(hint) is typing.Literal:
            return bool(args) and all(isinstance(a, str) for a in args)
        if args and typing.get_origin(hint) in (typing.Union, types.UnionType):
            kinds = [a for a in args if a is not type(None)]
            return bool(kinds) and all(textual(a) for a in kinds)
        return hint is str

    out = {k for k, v in defaults.items() if isinstance(v, str)}
    for name, param in signature.parameters.items():
        if textual(hints.get(name)) or isinstance(param.default, str):
            out.add(name)
    return out
