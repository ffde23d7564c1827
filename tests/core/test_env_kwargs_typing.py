"""A user's env argument keeps the type its author meant: from the command line read as TOML reads it, but a
string where the env declares a string (Pgx's `make(env_id: Literal["2048", ...])`); from a suite as TOML
typed it; and the command tune prints reads back as the same values."""
import textwrap

import pytest

from rlbench.cli import parse_args
from rlbench.planning.flags import plan_from_args
from rlbench.planning.request import RunRequest
from rlbench.planning.suite import load_suite
from rlbench.workload import cli_text, literal

ENVS = textwrap.dedent('''
    from typing import Literal, Optional

    import gymnasium as gym
    from gymnasium.envs.classic_control import CartPoleEnv

    seen = []

    def _env(**kwargs):
        seen.append(kwargs)
        return gym.wrappers.TimeLimit(CartPoleEnv(), 50)

    def by_literal(env_id: Literal["2048", "go_9x9"], size=4):
        return _env(env_id=env_id, size=size)

    def by_annotation(name: str, tag: Optional[str] = None, count: int = 1):
        return _env(name=name, tag=tag, count=count)

    def by_default(label="a", **rest):
        return _env(label=label, **rest)

    def picky(kind="a"):
        if kind not in ("a", "b"):
            raise ValueError(f"kind {kind!r} is not one of:\\n  a\\n  b\\n")
        return _env(kind=kind)

    class Grid(CartPoleEnv):
        def __init__(self, mode: "str" = "x", level=0, code=None):
            super().__init__()
            seen.append({"mode": mode, "level": level})

    gym.register("TypedGrid-v0", entry_point=Grid, max_episode_steps=50, kwargs={"code": "007"})
''')


@pytest.fixture
def envs(tmp_path, monkeypatch):
    (tmp_path / "typed_envs.py").write_text(ENVS)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def _planned(*argv) -> dict:
    [cell] = plan_from_args(RunRequest.from_flags(parse_args(["run", "--adapter", "serial", *argv]))).cells
    return cell.workload.env_kwargs


@pytest.mark.parametrize("env, given, expected", [
    ("typed_envs:by_literal", ["env_id=2048", "size=8"], {"env_id": "2048", "size": 8}),
    ("typed_envs:by_literal", ['env_id="2048"'], {"env_id": "2048"}),   # quoted as TOML: the same string
    ("typed_envs:by_annotation", ["name=1e3", "tag=7", "count=3"], {"name": "1e3", "tag": "7", "count": 3}),
    ("typed_envs:by_default", ["label=true", "other=true"], {"label": "true", "other": True}),
    ("typed_envs:TypedGrid-v0", ["mode=1", "level=2", "code=9"], {"mode": "1", "level": 2, "code": "9"}),
    ("TypedGrid-v0", ["mode=1", "level=2"], {"mode": "1", "level": 2}),  # registered by the module's import
])
def test_a_command_line_value_is_a_string_where_the_env_declares_one(envs, env, given, expected):
    if ":" not in env:
        import importlib
        importlib.import_module("typed_envs")
    flags = [f for kv in given for f in ("--env-kwarg", kv)]
    kwargs = _planned("--env", env, "--num-envs", "1", *flags)
    assert kwargs == expected and all(type(kwargs[k]) is type(v) for k, v in expected.items())


def test_a_suites_string_stays_a_string(envs):
    suite = envs / "s.toml"
    suite.write_text("[[sweep]]\nadapters = ['serial']\nenvs = ['typed_envs:by_default']\nnum_envs = [1]\n"
                     "env_kwargs = { label = '2048', other = 5 }\n")
    [cell] = load_suite(str(suite)).cells
    assert cell.workload.env_kwargs == {"label": "2048", "other": 5}
    assert isinstance(cell.workload.env_kwargs["label"], str)


@pytest.mark.parametrize("value", [4, 0.5, -3, 1e-5, float("inf"), "dict", "2048", "true", "a b", "x=1", "",
                                   True, False, [1, "2", 2.5], {"impl": "jax", "n": [1, 2]}, {"a.b": {"c": "1"}}])
def test_the_printed_form_of_a_value_reads_back_as_it(value):
    back = literal(cli_text(value))
    assert back == value and type(back) is type(value)


def test_tunes_command_gives_the_run_the_same_env_arguments(envs):
    import shlex

    from rlbench.planning.suite import make_cell
    from rlbench.tuning.decide import rlbench_command
    from rlbench.workload import PolicySpec, Workload
    kwargs = {"label": "2048", "flag": False, "cfg": {"impl": "jax"}, "n": 3}
    cell = make_cell("--opt", "serial", Workload("typed_envs:by_default", 2, PolicySpec(), 0, 1, kwargs), {})
    argv = shlex.split(rlbench_command(cell))[1:]
    [planned] = plan_from_args(RunRequest.from_flags(parse_args(argv))).cells
    assert planned.workload.env_kwargs == kwargs


def test_an_envs_error_over_several_lines_is_one_line_exit_2_nothing_written(envs, tmp_path, capsys):
    from rlbench.cli import main
    out = tmp_path / "out"
    assert main(["run", "--adapter", "serial", "--env", "typed_envs:picky", "--env-kwarg", "kind=c",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "kind 'c' is not one of: a b" in err, err
    assert not out.exists()
