"""Bad input on the command line: exit code 2, one `rlbench: error:` line, and nothing written; plus
planning a run (`--only`, protocol overrides) without running it; and each flag of run, validate and tune
as the one declaration its request field is, kept in plan.json and planned again from it."""
import json
from dataclasses import fields, replace

import pytest
from support import REPO, sweep, write_suite

from rlbench import cli
from rlbench.commands import commands
from rlbench.errors import UsageError
from rlbench.planning import flags
from rlbench.planning.request import RunRequest, TuneRequest, flag_of

FLAGS = ["--env", "CartPole-v1", "--repeats", "1", "--duration", "0.05"]


def _fails(tmp_path, capsys, monkeypatch, argv):
    """Runs argv from an empty working directory: exit code 2, one error line, no file anywhere."""
    monkeypatch.chdir(tmp_path)
    before = set(tmp_path.rglob("*"))
    out = tmp_path / "out"
    rc = cli.main([*argv, "--out", str(out)] if argv[0] == "run" else argv)
    err = capsys.readouterr().err
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rlbench: error: "), err
    assert not out.exists()
    assert set(tmp_path.rglob("*")) == before  # no reports/ either
    return lines[0]


SUITE_ERRORS = {
    "unknown top-level key": ("bogus = 1\n" + sweep(["serial"]), "'bogus'"),
    "unknown adapter": (sweep(["nope"]), "'nope'"),
    "unknown env": (sweep(["serial"], envs=["Nope-v0"]), "'Nope-v0'"),
    "bad choice": (sweep(["gymnasium-async"]) + 'options.gymnasium-async = { context = "bogus" }\n',
                   "valid: fork, forkserver, spawn"),
    "invalid TOML": ("[[sweep]\n", "not valid TOML"),
    "bad ray address": ('[protocol]\nray_address = 6379\n' + sweep(["serial"]), "ray_address=6379"),
    "name not a string": ("name = 5\n" + sweep(["serial"]), "name = 5 must be a non-empty string"),
    "cpu not here": (sweep(["serial"]) + "affinity = [99]\n", "CPU 99 is not available here (valid: 0"),
    "infinite timeout": ("[protocol]\ntimeout_s = inf\n" + sweep(["serial"]), "protocol.timeout_s=inf must be"),
}


@pytest.mark.parametrize("case", sorted(SUITE_ERRORS))
def test_bad_suite_file(tmp_path, capsys, monkeypatch, case):
    text, expected = SUITE_ERRORS[case]
    path = write_suite(tmp_path, text, protocol="")
    line = _fails(tmp_path, capsys, monkeypatch, ["run", str(path)])
    assert str(path) in line and expected in line


def test_missing_suite_file(tmp_path, capsys, monkeypatch):
    line = _fails(tmp_path, capsys, monkeypatch, ["run", str(tmp_path / "nope.toml")])
    assert "nope.toml" in line


FLAG_ERRORS = {
    "unknown adapter": (["--adapter", "nope", *FLAGS], "unknown adapter 'nope'"),
    "unknown env": (["--adapter", "serial", "--env", "Nope-v0"], "unknown env 'Nope-v0'"),
    "unknown option": (["--adapter", "serial", "--opt", "x=1", *FLAGS], "unknown option 'x' for serial"),
    "bad choice": (["--adapter", "gymnasium-async", "--opt", "context=bogus", *FLAGS],
                   "valid: fork, forkserver, spawn"),
    "bad bool": (["--adapter", "gymnasium-async", "--opt", "shared_memory=maybe", *FLAGS], "must be true or false"),
    "option without value": (["--adapter", "serial", "--opt", "x", *FLAGS], "must be KEY=VALUE"),
    "unknown env kwarg": (["--adapter", "serial", "--env", "rlbench/Synthetic-v0", "--env-kwarg", "bogus=1"],
                          "valid: step_cost_us, obs_bytes, episode_len"),
    "env kwarg of the wrong type": (["--adapter", "serial", "--env", "rlbench/Synthetic-v0",
                                     "--env-kwarg", "obs_bytes=1.5"], "obs_bytes='1.5'"),
    "bad num-envs": (["--adapter", "serial", "--num-envs", "1,x", *FLAGS], "--num-envs"),
    "zero num-envs": (["--adapter", "serial", "--num-envs", "0", *FLAGS], "must be >= 1"),
    "unknown policy": (["--adapter", "serial", "--policy", "bogus", *FLAGS], "unknown policy 'bogus'"),
    "negative duration": (["--adapter", "serial", "--env", "CartPole-v1", "--duration", "-1"],
                          "--duration=-1.0 must be a finite number >= 0"),
    "nan duration": (["--adapter", "serial", "--env", "CartPole-v1", "--duration", "nan"], "--duration=nan"),
    "nan warm-up": (["--adapter", "serial", "--env", "CartPole-v1", "--warmup", "nan"], "--warmup=nan"),
    "negative stop width": (["--adapter", "serial", "--env", "CartPole-v1", "--stop-ci-width", "-0.1"],
                            "--stop-ci-width=-0.1 must be a finite number >= 0"),
    "nan min duration": (["--adapter", "serial", "--env", "CartPole-v1", "--min-duration", "nan"], "--min-duration=nan"),
    "infinite timeout": (["--adapter", "serial", "--env", "CartPole-v1", "--timeout", "inf"],
                         "--timeout=inf must be a finite number > 0"),
    "nan timeout": (["--adapter", "serial", "--env", "CartPole-v1", "--timeout", "nan"], "--timeout=nan"),
    "zero repeats": (["--adapter", "serial", "--env", "CartPole-v1", "--repeats", "0"], "repeats"),
    "no sweep at all": ([], "needs a suite file or --adapter"),
    "unknown flag": (["--adapter", "serial", "--bogus", *FLAGS], "--bogus"),
    "bad ray address": (["--adapter", "serial", "--ray-address", "head node", *FLAGS],
                        "--ray-address='head node' (valid: '' for a local Ray, 'auto', HOST:PORT or ray://HOST:PORT)"),
}


@pytest.mark.parametrize("case", sorted(FLAG_ERRORS))
def test_bad_flags(tmp_path, capsys, monkeypatch, case):
    argv, expected = FLAG_ERRORS[case]
    line = _fails(tmp_path, capsys, monkeypatch, ["run", *argv])
    assert expected in line


def test_suite_and_adapter_flags_exclude_each_other(tmp_path, capsys, monkeypatch):
    path = write_suite(tmp_path, sweep(["serial"]))
    line = _fails(tmp_path, capsys, monkeypatch, ["run", str(path), "--adapter", "serial", *FLAGS])
    assert "not both" in line


def test_only_matching_nothing(tmp_path, capsys, monkeypatch):
    line = _fails(tmp_path, capsys, monkeypatch, ["run", str(REPO / "suites" / "quick.toml"), "--only", "nope*"])
    assert "--only nope* matches no cell" in line


def test_report_of_a_non_run_directory(tmp_path, capsys, monkeypatch):
    (tmp_path / "empty").mkdir()
    assert "no results.jsonl" in _fails(tmp_path / "empty", capsys, monkeypatch, ["report", "."])
    assert "not a directory" in _fails(tmp_path, capsys, monkeypatch, ["report", "missing"])


def test_out_directory_holding_a_run_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.jsonl").write_text("")
    assert cli.main(["run", "--adapter", "serial", *FLAGS, "--out", str(out)]) == 2
    assert "already holds a run" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["results.jsonl"]


def _plan(argv):
    from rlbench.planning.request import RunRequest
    return flags.plan_from_args(RunRequest.from_flags(cli.parse_args(["run", *argv])))


def test_only_filters_cells_by_glob():
    quick = str(REPO / "suites" / "quick.toml")
    serial = _plan([quick, "--only", "serial/*"])
    assert len(serial.cells) == 3 + 3 * 3
    assert all(c.adapter == "serial" for c in serial.cells)
    two = _plan([quick, "--only", "serial/CartPole-v1/*", "--only", "envpool-sync/CartPole-v1/n=16/*"])
    assert [c.cell_id for c in two.cells] == ["serial/CartPole-v1/n=1/random", "serial/CartPole-v1/n=4/random",
                                              "serial/CartPole-v1/n=16/random",
                                              "envpool-sync/CartPole-v1/n=16/random"]
    assert len(_plan([quick, "--only", "*Synthetic*step_cost_us=1000*"]).cells) == 3 * 3


def test_flags_override_the_suite_protocol():
    suite = _plan([str(REPO / "suites" / "quick.toml"), "--repeats", "1", "--duration", "0.01", "--timeout", "7"])
    assert (suite.settings.repeats, suite.settings.duration_s, suite.settings.timeout_s) == (1, 0.01, 7.0)
    assert suite.settings.warmup_s == 0.1  # the rest stays as the suite says
    stop = _plan([str(REPO / "suites" / "quick.toml"), "--stop-ci-width", "0.05", "--min-duration", "0.2"])
    assert (stop.settings.stop_ci_width, stop.settings.min_duration_s) == (0.05, 0.2)
    assert stop.cells[0].spec(stop.settings, 0)["protocol"]["stop_ci_width"] == 0.05   # what the cell measures by


def test_ray_address_reaches_the_cells_as_ray_address(tmp_path, monkeypatch):
    """Ray reads RAY_ADDRESS in ray.init(): the core passes the cluster on without importing Ray."""
    from rlbench.planning.plan import Job
    from rlbench.running.runner import Runner
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    path = write_suite(tmp_path, sweep(["serial"]), protocol='[protocol]\nray_address = "10.0.0.1:6379"\n')
    from_suite, from_flag, local = _plan([str(path)]), _plan([str(path), "--ray-address", "auto"]), \
        _plan([str(REPO / "suites" / "quick.toml")])
    assert (from_suite.settings.ray_address, from_flag.settings.ray_address) == ("10.0.0.1:6379", "auto")
    child_env = Runner(from_flag.settings, str(tmp_path / "out")).child_env(Job(from_flag.cells[0], 0), "/tmp")
    assert child_env["RAY_ADDRESS"] == "auto"
    assert "RAY_ADDRESS" not in Runner(local.settings, str(tmp_path / "o2")).child_env(Job(local.cells[0], 0), "/tmp")


def test_flags_describe_a_sweep():
    suite = _plan(["--adapter", "gymnasium-async", "--env", "CartPole-v1", "--num-envs", "1,8",
                   "--policy", "fixed_cost:cost_us=50", "--opt", "context=spawn"])
    assert [c.cell_id for c in suite.cells] == ["gymnasium-async/CartPole-v1/n=1/fixed_cost50us/context=spawn",
                                                "gymnasium-async/CartPole-v1/n=8/fixed_cost50us/context=spawn"]
    assert suite.cells[0].options == {"shared_memory": True, "context": "spawn"}
    assert suite.cells[0].workload.policy.cost_us == 50.0


def test_list_shows_every_adapter_and_its_options(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    for name in ("serial", "gymnasium-sync", "gymnasium-async", "envpool-sync", "envpool-async"):
        assert f"{name} " in out
    assert "--opt shared_memory=<bool> (default True)" in out
    assert "--opt context=<str> (default fork) [fork|forkserver|spawn]" in out


def _help(capsys, command) -> str:
    """`rlbench COMMAND --help`, its lines joined (argparse wraps a help text where the width says)."""
    with pytest.raises(SystemExit) as done:
        cli.parse_args([*([command] if isinstance(command, str) else command), "--help"])
    assert done.value.code == 0
    return " ".join(capsys.readouterr().out.split())


# what a command cannot go without, as flags and as fields
REQUIRED = {"tune": (["--env", "E"], {"env": "E"}), "resume": (["d"], {"dir": "d"}), "rerun": (["d"], {"dir": "d"}),
            "report": (["d"], {"dir": "d"}), "compare": (["b", "n"], {"base": "b", "new": "n"}),
            "history add": (["d"], {"dirs": ("d",)}), "history check": (["d"], {"dir": "d"}),
            "bisect": (["s", "c"], {"suite": "s", "cell": "c"})}


def _every_command():
    for command in commands().values():
        for verb in command.verbs or (None,):
            yield (f"{command.name} {verb.name}" if verb else command.name), verb or command


@pytest.mark.parametrize("name, command", list(_every_command()), ids=lambda v: v if isinstance(v, str) else "")
def test_each_flag_is_declared_once_as_its_request_field(capsys, name, command):
    """Every command takes exactly the flags its request's fields declare, with the help the field gives;
    validate leaves out what describes a sweep (it runs its own suite); parsed with no flags but the required
    ones, the request is its defaults."""
    request_type = command.request
    flagged = [f for f in fields(request_type) if command.takes(f)]
    argv, required = REQUIRED.get(name, ([], {}))
    given = vars(cli.parse_args([*name.split(), *argv]))
    assert set(given) == {f.name for f in flagged} | {"command"} | ({"verb"} if " " in name else set())
    text = _help(capsys, name.split())
    for f in flagged:
        flag = flag_of(f)
        shown = (flag["argparse"].get("metavar", f.name) if flag["positional"]
                 else flag["name"] or "--" + f.name.replace("_", "-"))
        # argparse wraps where the width says, at a space or after a hyphen: compared without white space
        assert f"{shown} " in text and "".join(flag["help"].replace("%%", "%").split()) in "".join(text.split()), f.name
    assert request_type.from_flags(cli.parse_args([*name.split(), *argv])) == request_type(**required)  # defaults


def test_validate_refuses_what_describes_a_sweep(tmp_path, capsys, monkeypatch):
    assert "unrecognized arguments: --adapter serial" in _fails(tmp_path, capsys, monkeypatch,
                                                                ["validate", "--adapter", "serial"])


def test_a_run_request_keeps_in_plan_json_what_plans_it_again():
    request = RunRequest.from_flags(cli.parse_args(["run", "--adapter", "serial", "--env", "CartPole-v1",
                                                    "--only", "serial/*", "--repeats", "2", "--out", "o",
                                                    "--no-build"]))
    kept = request.planned()
    assert list(kept) == ["suite", "adapter", "env", "num_envs", "policy", "opt", "env_kwarg", "env_wrapper",
                          "repeats", "seeds", "duration", "warmup", "stop_ci_width", "min_duration", "timeout", "only",
                          "profile", "ray_address", "cluster", "node_class"]
    plan = json.loads(json.dumps({"args": kept, "suite_text": "[[sweep]]"}))  # as plan.json holds it
    again = RunRequest.from_plan(plan, out="again")
    assert again == replace(request, out="again", no_build=False, suite_text="[[sweep]]")


def test_a_tune_request_is_resumable_from_its_plan():
    request = TuneRequest.from_flags(cli.parse_args([
        "tune", "--env", "toyenvs:make_corridor", "--env-kwarg", "obs=dict", "--env-wrapper", "m:wrap",
        "--policy", "toyenvs.policies:linear", "--budget", "5m", "--max-envs", "64", "--adapters", "serial,rlpyt-cpu",
        "--out", "first", "--cluster", "auto", "--node-class", "n1", "--train", "ppo", "--target-return", "100",
        "--seeds", "3", "--sizes", "4,8", "--opt", "num_steps=512"]))
    kept = request.planned()
    assert kept == {"env": "toyenvs:make_corridor", "env_kwarg": ["obs=dict"], "env_wrapper": ["m:wrap"],
                    "policy": "toyenvs.policies:linear", "budget": "5m", "max_envs": 64,
                    "adapters": ["serial,rlpyt-cpu"], "cluster": "auto", "node_class": "n1", "train": "ppo",
                    "target_return": 100.0, "seeds": 3, "sizes": "4,8", "opt": ["num_steps=512"]}  # not out
    plan = json.loads(json.dumps({"command": "tune", "args": kept}))
    assert TuneRequest.from_plan(plan, out="second") == replace(request, out="second")
    with pytest.raises(UsageError, match="plan.json keeps no env"):
        TuneRequest.from_plan({"args": {"budget": "5m"}})


def test_policy_help_lists_every_network(capsys):
    """`--policy` help of run and tune names every registered policy (the networks users train among them)."""
    import re

    from rlbench import registry
    for command in ("run", "tune"):
        text = _help(capsys, command)
        for name in registry.policy_names():
            assert re.search(rf"(^|[\s|(]){re.escape(name)}([\s:|)]|$)", text), (command, name)
