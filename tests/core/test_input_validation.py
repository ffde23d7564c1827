"""Bad numbers and forms are refused as the input is read, in one line naming the value and what is valid:
adapter options (`--opt`), policies (`--policy`) and env arguments (`--env-kwarg`). Before, a negative
batch size, a NaN learning rate or a negative policy cost passed and ran (or failed deep inside a cell)."""
import math

import pytest
from support import sweep, write_suite

from rlbench import cli, registry
from rlbench.api import Option
from rlbench.envs import typed_env_kwargs
from rlbench.errors import UsageError
from rlbench.planning.suite import load_suite
from rlbench.workload import PolicySpec, parse_policy

COUNT = Option("batch_size", int, 0)
AT_LEAST_ONE = Option("workers", int, 2, low=1)
RATE = Option("lr", float, 1e-3, low=0, open_low=True)
FRACTION = Option("discount", float, 0.99, high=1)
ANY_FINITE = Option("target_return", float, 0.0, low=-math.inf)
UNREACHABLE = Option("target_return", float, math.inf, low=-math.inf, finite=False)
SPLITS = Option("splits", int, 2, choices=(1, 2))
SYNTHETIC = "rlbench/Synthetic-v0"


# -- Option ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("option, raw, message", [
    (COUNT, "-3", "option batch_size='-3' must be an integer >= 0"),
    (COUNT, -3, "option batch_size=-3 must be an integer >= 0"),
    (COUNT, "nan", "option batch_size='nan' must be an integer >= 0"),
    (COUNT, math.inf, "option batch_size=inf must be an integer >= 0"),
    (COUNT, 1.5, "option batch_size=1.5 must be an integer >= 0"),
    (COUNT, True, "option batch_size=True must be an integer >= 0"),
    (COUNT, "abc", "option batch_size='abc' must be an integer >= 0"),
    (AT_LEAST_ONE, "0", "option workers='0' must be an integer >= 1"),
    (RATE, "0", "option lr='0' must be a finite number > 0"),
    (RATE, "-1e-3", "option lr='-1e-3' must be a finite number > 0"),
    (RATE, "nan", "option lr='nan' must be a finite number > 0"),
    (RATE, "inf", "option lr='inf' must be a finite number > 0"),
    (FRACTION, "1.5", "option discount='1.5' must be a finite number >= 0 and <= 1"),
    (FRACTION, "-0.1", "option discount='-0.1' must be a finite number >= 0 and <= 1"),
    (ANY_FINITE, "inf", "option target_return='inf' must be a finite number"),
    (ANY_FINITE, "-inf", "option target_return='-inf' must be a finite number"),
    (UNREACHABLE, "nan", "option target_return='nan' must be a number, inf or -inf"),
    (SPLITS, "3", "option splits='3' (valid: 1, 2)"),
    (SPLITS, "-1", "option splits='-1' must be an integer >= 0"),
])
def test_a_bad_option_value_is_refused_naming_the_value_and_the_range(option, raw, message):
    with pytest.raises(ValueError) as err:
        option.parse(raw)
    assert str(err.value) == message


@pytest.mark.parametrize("option, raw, value", [
    (COUNT, "0", 0), (COUNT, 7, 7), (COUNT, 8.0, 8),
    (AT_LEAST_ONE, "1", 1),
    (RATE, "1e-9", 1e-9), (RATE, 3, 3.0),
    (FRACTION, "0", 0.0), (FRACTION, "1", 1.0),
    (ANY_FINITE, "-200.5", -200.5),
    (UNREACHABLE, "inf", math.inf), (UNREACHABLE, "-inf", -math.inf), (UNREACHABLE, "-5", -5.0),
    (SPLITS, "1", 1),
])
def test_a_value_in_range_parses(option, raw, value):
    assert option.parse(raw) == value


def test_a_non_numeric_option_keeps_its_words():
    assert Option("flag", bool, True).valid == "true or false"
    assert Option("context", str, "fork").valid == "a string"
    with pytest.raises(ValueError, match=r"option flag='maybe' must be true or false"):
        Option("flag", bool, True).parse("maybe")


# -- every adapter's declarations ------------------------------------------------------------------

def _options():
    return [pytest.param(cls, o, id=f"{name}.{o.name}")
            for name, cls in sorted(registry.discover().items()) for o in cls.options]


@pytest.mark.parametrize("cls, option", _options())
def test_every_default_is_valid_under_its_own_bounds(cls, option):
    assert option.parse(option.default) == option.default
    assert option.parse(str(option.default)) == option.default
    assert cls.resolve_options({})[option.name] == option.default


@pytest.mark.parametrize("cls, option", [p for p in _options() if p.values[1].type in (int, float)])
def test_every_numeric_option_refuses_nan_and_minus_one_unless_negatives_are_valid(cls, option):
    bad = ["nan", "-1"] if option.low >= 0 else ["nan"]
    for raw in bad:
        with pytest.raises(ValueError) as err:
            cls.resolve_options({option.name: raw})
        assert str(err.value) == f"option {option.name}={raw!r} must be {option.valid}"


@pytest.mark.parametrize("adapter, given, message", [
    ("envpool-async", {"batch_size": "-3"}, "option batch_size='-3' must be an integer >= 0"),
    ("impala", {"unroll": 0}, "option unroll=0 must be an integer >= 1"),
    ("impala", {"lr": 0}, "option lr=0 must be a finite number > 0"),
    ("rlpyt-serial", {"batch_T": 0}, "option batch_T=0 must be an integer >= 1"),
    ("rlpyt-sync", {"ranks": 0}, "option ranks=0 must be an integer >= 1"),
    ("rlpyt-sync", {"timeout_s": 0}, "option timeout_s=0 must be a finite number > 0"),
    ("rlpyt-async", {"replay_ratio": "0"}, "option replay_ratio='0' must be a finite number > 0"),
    ("seed", {"batch_T": 0}, "option batch_T=0 must be an integer >= 1"),
    ("a3c", {"updates_per_unit": 0}, "option updates_per_unit=0 must be an integer >= 1"),
    ("gymnax", {"scan_T": 0}, "option scan_T=0 must be an integer >= 1"),
    ("gymnax", {"mem_fraction": 1.5}, "option mem_fraction=1.5 must be a finite number >= 0 and <= 1"),
    ("purejaxrl-ppo", {"target_return": "inf"}, "option target_return='inf' must be a finite number"),
    ("cleanrl-ppo", {"update_epochs": 0}, "option update_epochs=0 must be an integer >= 1"),
    ("cleanrl-ppo", {"target_return": "nan"}, "option target_return='nan' must be a finite number"),
    ("brax", {"scan_T": 0}, "option scan_T=0 must be an integer >= 1"),
    ("brax-ppo", {"discounting": 1.5}, "option discounting=1.5 must be a finite number >= 0 and <= 1"),
    ("brax-ppo", {"learning_rate": "0"}, "option learning_rate='0' must be a finite number > 0"),
    ("ray-actors", {"ready_timeout_s": "-1"}, "option ready_timeout_s='-1' must be a finite number > 0"),
    ("tianshou-subproc", {"timeout": "-1"}, "option timeout='-1' must be a finite number >= 0"),
])
def test_adapters_declare_the_ranges_their_options_mean(adapter, given, message):
    with pytest.raises(ValueError) as err:
        registry.get(adapter).resolve_options(given)
    assert str(err.value) == message


@pytest.mark.parametrize("adapter, given", [
    ("envpool-async", {"batch_size": 0}),         # 0 = num_envs // 2
    ("sample-factory", {"workers": 0, "envs_per_worker": 0}),
    ("gymnax", {"devices": 0, "mem_fraction": 1}),
    ("brax-ppo", {"target_return": "inf", "eval_envs": 0}),
    ("cleanrl-ppo", {"target_return": "-20.5"}),
    ("purejaxrl-ppo", {"target_return": -100}),
    ("ray-actors", {"actor_cpus": "0.5"}),
])
def test_zero_as_auto_and_negative_targets_stay_valid(adapter, given):
    registry.get(adapter).resolve_options(given)


# -- policies --------------------------------------------------------------------------------------

@pytest.mark.parametrize("raw, message", [
    ("fixed_cost:cost_us=-5", "policy field cost_us='-5' must be a finite number >= 0"),
    ("fixed_cost:cost_us=nan", "policy field cost_us='nan' must be a finite number >= 0"),
    ("fixed_cost:cost_us=inf", "policy field cost_us='inf' must be a finite number >= 0"),
    ("fixed_cost:cost_us=5us", "policy field cost_us='5us' must be a finite number >= 0"),
    ("mlp:hidden=abc", "policy field hidden='abc' must be layer sizes >= 1 like 64x64"),
    ("mlp:hidden=0x64", "policy field hidden='0x64' must be layer sizes >= 1 like 64x64"),
    ("mlp:hidden=64x-1", "policy field hidden='64x-1' must be layer sizes >= 1 like 64x64"),
    ("mlp:hidden=", "policy field hidden='' must be layer sizes >= 1 like 64x64"),
    ("mlp:threads=0", "policy field threads='0' must be an integer >= 1"),
    ("mlp:threads=-2", "policy field threads='-2' must be an integer >= 1"),
    ("mlp:threads=1.5", "policy field threads='1.5' must be an integer >= 1"),
    ("mlp:device=tpu", "policy field device='tpu' must be cpu, cuda or cuda:N"),
    ("mlp:device=", "policy field device='' must be cpu, cuda or cuda:N"),
    ("mlp:device=cuda:", "policy field device='cuda:' must be cpu, cuda or cuda:N"),
    ("mlp:device=cuda:x", "policy field device='cuda:x' must be cpu, cuda or cuda:N"),
    ({"name": "mlp", "hidden": [64, 0]}, "policy field hidden=[64, 0] must be layer sizes >= 1 like 64x64"),
    ({"name": "mlp", "hidden": []}, "policy field hidden=[] must be layer sizes >= 1 like 64x64"),
    ({"name": "mlp", "hidden": [64, True]}, "policy field hidden=[64, True] must be layer sizes >= 1 like 64x64"),
    ({"name": "mlp", "threads": 1.5}, "policy field threads=1.5 must be an integer >= 1"),
    ({"name": "mlp", "device": 0}, "policy field device=0 must be cpu, cuda or cuda:N"),
    ({"name": "fixed_cost", "cost_us": True}, "policy field cost_us=True must be a finite number >= 0"),
    ({"name": "fixed_cost", "cost_us": -1}, "policy field cost_us=-1 must be a finite number >= 0"),
])
def test_a_bad_policy_field_is_refused_naming_the_value_and_its_form(raw, message):
    with pytest.raises(UsageError) as err:
        parse_policy(raw)
    assert str(err.value) == message


@pytest.mark.parametrize("raw, spec", [
    ("random", PolicySpec()),
    ("fixed_cost:cost_us=0", PolicySpec("fixed_cost", cost_us=0.0)),
    ("fixed_cost:cost_us=2.5", PolicySpec("fixed_cost", cost_us=2.5)),
    ("mlp:hidden=64x64,threads=1,device=cpu", PolicySpec("mlp", (64, 64), 1, "cpu")),
    ("mlp:hidden=8,device=cuda", PolicySpec("mlp", (8,), device="cuda")),
    ("mlp:hidden=256x256x256,threads=4,device=cuda:1", PolicySpec("mlp", (256, 256, 256), 4, "cuda:1")),
    ({"name": "mlp", "hidden": [32, 32], "threads": 2, "device": "cuda:0"}, PolicySpec("mlp", (32, 32), 2, "cuda:0")),
    ({"name": "mlp", "hidden": "16x16", "threads": 2.0}, PolicySpec("mlp", (16, 16), 2)),
    ({"name": "fixed_cost", "cost_us": 100}, PolicySpec("fixed_cost", cost_us=100.0)),
])
def test_good_policy_forms_still_parse(raw, spec):
    assert parse_policy(raw) == spec


# -- env arguments ---------------------------------------------------------------------------------

@pytest.mark.parametrize("env_id, given, message", [
    (SYNTHETIC, {"step_cost_us": "-5"},
     "step_cost_us='-5' for rlbench/Synthetic-v0 must be a finite number (float) >= 0"),
    (SYNTHETIC, {"step_cost_us": "nan"}, "step_cost_us='nan' for rlbench/Synthetic-v0 must be a finite number"),
    (SYNTHETIC, {"step_cost_us": math.inf}, "step_cost_us=inf for rlbench/Synthetic-v0 must be a finite number"),
    (SYNTHETIC, {"obs_bytes": 0}, "obs_bytes=0 for rlbench/Synthetic-v0 must be a number (int) >= 1"),
    (SYNTHETIC, {"episode_len": "-1"}, "episode_len='-1' for rlbench/Synthetic-v0 must be a number (int) >= 1"),
    (SYNTHETIC, {"obs_bytes": "big"}, "obs_bytes='big' for rlbench/Synthetic-v0 must be a number (int) >= 1"),
    ("replay/DQN-Qbert", {"max_mb": "inf"}, "max_mb='inf' for replay/DQN-Qbert must be a finite number (float) >= 0"),
    ("replay/DQN-Qbert", {"max_mb": "-1"}, "max_mb='-1' for replay/DQN-Qbert must be a finite number (float) >= 0"),
    ("replay/SAC-Hopper", {"batch_size": -1}, "batch_size=-1 for replay/SAC-Hopper must be a number (int) >= 0"),
    ("replay/SAC-Hopper", {"item_bytes": "-8"}, "item_bytes='-8' for replay/SAC-Hopper must be a number (int) >= 0"),
])
def test_a_bad_env_argument_is_refused_naming_the_value_and_the_range(env_id, given, message):
    with pytest.raises(UsageError) as err:
        typed_env_kwargs(env_id, given)
    assert str(err.value).startswith(message)


def test_env_arguments_in_range_are_typed():
    assert typed_env_kwargs(SYNTHETIC, {"step_cost_us": "0", "obs_bytes": "1", "episode_len": 1}) == \
        {"step_cost_us": 0.0, "obs_bytes": 1, "episode_len": 1}
    assert typed_env_kwargs("replay/DQN-Qbert", {"max_mb": 64, "item_bytes": 0, "batch_size": "0"}) == \
        {"max_mb": 64.0, "item_bytes": 0, "batch_size": 0}


# -- through the command line and suite files: exit 2, one line ------------------------------------

@pytest.mark.parametrize("argv, expected", [
    (["--adapter", "envpool-async", "--env", "CartPole-v1", "--opt", "batch_size=-3"],
     "option batch_size='-3' must be an integer >= 0"),
    (["--adapter", "serial", "--env", "CartPole-v1", "--policy", "fixed_cost:cost_us=-5"],
     "policy field cost_us='-5' must be a finite number >= 0"),
    (["--adapter", "serial", "--env", "CartPole-v1", "--policy", "mlp:hidden=abc"], "like 64x64"),
    (["--adapter", "serial", "--env", SYNTHETIC, "--env-kwarg", "step_cost_us=-5"],
     "--env-kwarg: step_cost_us='-5' for rlbench/Synthetic-v0 must be a finite number (float) >= 0"),
])
def test_the_command_line_refuses_in_one_line(tmp_path, capsys, monkeypatch, argv, expected):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", *argv, "--repeats", "1", "--duration", "0.05", "--out", str(tmp_path / "out")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rlbench: error: ") and expected in lines[0], lines
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("body, expected", [
    (sweep(["envpool-async"]) + 'options.envpool-async = { batch_size = -3 }\n',
     "option batch_size=-3 must be an integer >= 0"),
    (sweep(["serial"]) + 'policy = { name = "fixed_cost", cost_us = -5.0 }\n',
     "policy field cost_us=-5.0 must be a finite number >= 0"),
    (sweep(["serial"], envs=[SYNTHETIC]) + "env_kwargs = { episode_len = 0 }\n",
     "episode_len=0 for rlbench/Synthetic-v0 must be a number (int) >= 1"),
])
def test_a_suite_file_refuses_at_load(tmp_path, body, expected):
    path = write_suite(tmp_path, body)
    with pytest.raises(UsageError) as err:
        load_suite(str(path))
    assert str(path) in str(err.value) and expected in str(err.value)
