"""Suite files: every kind of mistake is one UsageError line that names the file, the bad key or value
and what is valid; the shipped suites load and expand to the expected cells."""
import pytest
from support import REPO, sweep, write_suite

from rlbench.errors import UsageError
from rlbench.planning.suite import load_suite

SWEEP = sweep(["serial"])
ASYNC = sweep(["gymnasium-async"])

# (suite text, what the message must contain besides the file name)
BAD_SUITES = {
    "unknown top-level key": ("bogus = 1\n" + SWEEP,
                              ["'bogus'", "top level", "valid: description, limits, name, protocol, schema, sweep"]),
    "unknown sweep key": (SWEEP + "bogus = 1\n",
                          ["sweep[0]", "'bogus'", "valid: adapters, affinity, env_kwargs, envs, num_envs, omp_threads, options, policy"]),
    "unknown adapter": (sweep(["nope"]), ["'nope'", "valid:", "serial", "gymnasium-async", "envpool-sync"]),
    "unknown env": (sweep(["serial"], envs=["Nope-v0"]),
                    ["envs", "'Nope-v0'", "valid: a registered gymnasium id, e.g. Acrobot-v1; module:EnvId-v0; package.module:make_env, e.g. a JAX package's own ids as gymnax:make --env-kwarg env_id=Breakout-MinAtar; Ant-v4, CartPole-v1, HalfCheetah-v4, Hopper-v4, Humanoid-v4, InvertedPendulum-v4, Swimmer-v4, Walker2d-v4, brax/ant, brax/halfcheetah, rlbench/Frames-v0, rlbench/Synthetic-v0; an Atari game", "replay/DQN-Qbert"]),
    "unknown option": (ASYNC + 'options.gymnasium-async = { bogus = 1 }\n',
                       ["options.gymnasium-async", "'bogus'", "valid: shared_memory, context"]),
    "option of the wrong type": (ASYNC + 'options.gymnasium-async = { shared_memory = "maybe" }\n',
                                 ["shared_memory='maybe'", "true or false"]),
    "int option of the wrong type": (sweep(["envpool-sync"]) + 'options.envpool-sync = { num_threads = "x" }\n',
                                     ["num_threads='x'", "int"]),
    "bad choice": (ASYNC + 'options.gymnasium-async = { context = "bogus" }\n',
                   ["context='bogus'", "valid: fork, forkserver, spawn"]),
    "options for an adapter not in the sweep": (SWEEP + 'options.gymnasium-async = { shared_memory = true }\n',
                                                ["options.gymnasium-async", "valid: serial"]),
    "unknown env_kwargs key": (sweep(["serial"], envs=["rlbench/Synthetic-v0"]) + "env_kwargs = { bogus = 1 }\n",
                               ["env_kwargs", "'bogus'", "valid: step_cost_us, obs_bytes, episode_len"]),
    "env_kwargs for an env without any": (SWEEP + "env_kwargs = { obs_bytes = 8 }\n",
                                          ["'obs_bytes'", "CartPole-v1", "valid: none"]),
    "env_kwargs not a table": (SWEEP + "env_kwargs = 3\n", ["env_kwargs = 3", "table"]),
    "unknown policy": (SWEEP + 'policy = ["bogus"]\n', ["policy", "'bogus'", "valid: cnn, cnn:impala, fixed_cost, lstm, mlp, random"]),
    "bad num_envs": (sweep(["serial"], num_envs=[0]), ["num_envs", "0", "positive integer"]),
    "missing key": ('[[sweep]]\nadapters = ["serial"]\nenvs = ["CartPole-v1"]\n', ["missing key 'num_envs'"]),
    "no sweep": ('name = "x"\n', ["[[sweep]]"]),
}
BAD_PROTOCOLS = {
    "string": ("[protocol]\nrepeats = \"x\"\n", ["protocol.repeats='x'", "must be an integer >= 1"]),
    "negative": ("[protocol]\nduration_s = -1.0\n", ["protocol.duration_s=-1.0", "must be a finite number >= 0"]),
    "infinite timeout": ("[protocol]\ntimeout_s = inf\n", ["protocol.timeout_s=inf", "finite number > 0"]),
    "nan duration": ("[protocol]\nduration_s = nan\n", ["protocol.duration_s=nan", "finite number >= 0"]),
    "cpu not here": ("[protocol]\naffinity = [99]\n", ["CPU 99 is not available here (valid: 0"]),
    "float for an int": ("[protocol]\nrepeats = 1.5\n", ["protocol.repeats=1.5", "int"]),
    "bool": ("[protocol]\ntimeout_s = true\n", ["protocol.timeout_s=True"]),
    "zero repeats": ("[protocol]\nrepeats = 0\n", ["protocol.repeats=0 must be an integer >= 1"]),
    "negative stop width": ("[protocol]\nstop_ci_width = -0.02\n", ["protocol.stop_ci_width=-0.02",
                                                                    "must be a finite number >= 0"]),
    "unknown key": ("[protocol]\nbogus = 1\n", ["'bogus'", "protocol", "valid: affinity, cluster, cores, duration_s"]),
}


def _error(path) -> str:
    with pytest.raises(UsageError) as info:
        load_suite(str(path))
    message = str(info.value)
    assert "\n" not in message, f"not one line: {message!r}"
    assert message.startswith(str(path)), f"does not name the file: {message!r}"
    return message


@pytest.mark.parametrize("case", sorted(BAD_SUITES))
def test_bad_suite(tmp_path, case):
    text, expected = BAD_SUITES[case]
    message = _error(write_suite(tmp_path, text, protocol=""))
    for part in expected:
        assert part in message, f"{part!r} not in {message!r}"


@pytest.mark.parametrize("case", sorted(BAD_PROTOCOLS))
def test_bad_protocol(tmp_path, case):
    text, expected = BAD_PROTOCOLS[case]
    message = _error(write_suite(tmp_path, SWEEP, protocol=text))
    for part in expected:
        assert part in message, f"{part!r} not in {message!r}"


def test_invalid_toml(tmp_path):
    path = tmp_path / "broken.toml"
    path.write_text("[[sweep]]\nadapters = [\n")
    assert "not valid TOML" in _error(path)


def test_not_utf8(tmp_path):
    path = tmp_path / "binary.toml"
    path.write_bytes(b"name = \"\xff\"\n")
    assert "not valid TOML" in _error(path)


def test_missing_file(tmp_path):
    path = tmp_path / "missing.toml"
    with pytest.raises(UsageError, match="cannot read suite file .*missing.toml: No such file"):
        load_suite(str(path))


def test_cross_product_and_typed_options(tmp_path):
    path = write_suite(tmp_path, sweep(["serial", "gymnasium-async"], num_envs=[1, 4])
                       + "options.gymnasium-async = { shared_memory = [true, false] }\n"
                       + sweep(["serial"], envs=["rlbench/Synthetic-v0"], num_envs=[2])
                       + "env_kwargs = { step_cost_us = [10, 100], obs_bytes = 64 }\n")
    suite = load_suite(str(path))
    ids = [c.cell_id for c in suite.cells]
    assert len(ids) == len(set(ids)) == 2 + 4 + 2
    assert "gymnasium-async/CartPole-v1/n=4/random/shared_memory=false" in ids
    assert "serial/rlbench/Synthetic-v0(obs_bytes=64,step_cost_us=10)/n=2/random" in ids
    assert [c.index for c in suite.cells] == list(range(len(ids)))
    shm = next(c for c in suite.cells if c.cell_id.endswith("shared_memory=true"))
    assert shm.options == {"shared_memory": True, "context": "fork"}  # defaults filled in
    assert shm.given_options == {"shared_memory": True}
    assert suite.settings.repeats == 1 and suite.settings.duration_s == 0.05


def test_duplicate_cells_run_once(tmp_path):
    suite = load_suite(str(write_suite(tmp_path, SWEEP + SWEEP)))
    assert [c.cell_id for c in suite.cells] == ["serial/CartPole-v1/n=1/random"]


def test_quick_suite_expands():
    suite = load_suite(str(REPO / "suites" / "quick.toml"))
    assert suite.name == "quick"
    # CartPole: 4 adapters x 3 sizes and envpool-async at 4 and 16 envs (it needs num_envs > batch_size =
    # num_envs // 2); Synthetic-v0: 3 adapters (EnvPool has no native one) x 3 sizes x 3 step costs
    assert len(suite.cells) == 4 * 3 + 2 + 3 * 3 * 3 == 41
    assert {c.adapter for c in suite.cells} == {"serial", "gymnasium-sync", "gymnasium-async", "envpool-sync",
                                                "envpool-async"}
    assert suite.settings.repeats == 3 and suite.settings.timeout_s == 60


def test_cpu_suite_expands():
    suite = load_suite(str(REPO / "suites" / "cpu.toml"))
    assert suite.name == "cpu"
    assert len(suite.cells) == (3 * 5 * 3      # serial, gymnasium-sync, envpool-sync x sizes x policies
                                + 4 * 2 * 2    # gymnasium-async x sizes x shared_memory x context
                                + 2 * 3 * 2    # envpool-sync x sizes x num_threads x thread_affinity
                                + 4 * 3 * 3    # envpool-async x sizes x batch_size x num_threads
                                + 3 * 4 * 4 * 2    # Synthetic-v0: adapters x sizes x step costs x obs sizes
                                + 3 * 1 * 2 * 2 * 2  # CPU axes: adapters x sizes x torch threads x omp x pinning
                                + 3 * 4 + 2 * 4 * 2  # sb3 x2, tianshou-dummy x sizes; subproc, shmem x sizes x wait_num
                                + 3                  # tianshou-ray x sizes (to 16)
                                + 3 + 3 * 3 * 2      # pufferlib-serial x sizes; pufferlib-mp x workers x zero_copy
                                + 4 * 2 * 4 + 2 * 4 * 2)  # MuJoCo: 4 adapters x envs x sizes; rollout x threads
    assert any(c.workload.policy.name == "mlp" for c in suite.cells)


@pytest.mark.parametrize("text, expected", [
    ("adapters = []\nenvs = ['CartPole-v1']\nnum_envs = [1]\n", "adapters = [] sweeps nothing"),
    ("adapters = ['serial']\nenvs = ['rlbench/Synthetic-v0']\nnum_envs = [1]\nenv_kwargs = { obs_bytes = [] }\n",
     "env_kwargs.obs_bytes = [] sweeps nothing"),
    ("adapters = ['serial']\nenvs = ['rlbench/Synthetic-v0']\nnum_envs = [1]\nenv_kwargs = { obs_bytes = 'big' }\n",
     "obs_bytes='big' for rlbench/Synthetic-v0 must be a number (int)"),
])
def test_empty_axes_and_untyped_env_kwargs_are_rejected_at_load(tmp_path, text, expected):
    path = tmp_path / "s.toml"
    path.write_text("[[sweep]]\n" + text)
    with pytest.raises(UsageError) as err:
        load_suite(str(path))
    assert str(path) in str(err.value) and expected in str(err.value)


def test_a_sweep_may_set_its_own_durations_and_the_command_line_still_wins(tmp_path):
    from rlbench.cli import parse_args
    from rlbench.planning.flags import plan_from_args as plan
    body = (sweep(["serial"]) + "protocol = { duration_s = 7.5, timeout_s = 300, stop_ci_width = 0.02, "
            "min_duration_s = 2 }\n" + sweep(["serial"], num_envs=[2]))
    path = write_suite(tmp_path, body)
    suite = load_suite(str(path))
    long, short = suite.cells
    assert long.settings(suite.settings).duration_s == 7.5 and long.settings(suite.settings).timeout_s == 300
    assert short.settings(suite.settings).duration_s == suite.settings.duration_s
    assert long.spec(suite.settings, 0)["protocol"]["duration_s"] == 7.5
    assert (long.settings(suite.settings).stop_ci_width, long.settings(suite.settings).min_duration_s) == (0.02, 2)
    assert short.settings(suite.settings).stop_ci_width == 0.0   # fixed windows unless asked
    from rlbench.planning.request import RunRequest
    cli_plan = plan(RunRequest.from_flags(parse_args(["run", str(path), "--duration", "0.1"])))
    assert cli_plan.cells[0].settings(cli_plan.settings).duration_s == 0.1
    assert cli_plan.cells[0].settings(cli_plan.settings).timeout_s == 300
    with pytest.raises(UsageError, match="unknown key 'repeats' in protocol"):
        load_suite(str(write_suite(tmp_path, sweep(["serial"]) + "protocol = { repeats = 2 }\n", name="bad.toml")))
