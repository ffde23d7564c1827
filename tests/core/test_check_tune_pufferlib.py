"""check-tune's PufferLib column (scripts/pufferlib_autotune.py): pufferlib.vector.autotune only prints what it
timed, so its pick is read from that text, and a misread would put a wrong configuration beside tune's. The
parser is held to output captured from the real autotune (pufferlib-core 3.0.23 in the pufferlib environment,
2 physical cores) and must refuse anything else; the pick must name the same pufferlib.vector.make call as an
rlbench cell, the same cell the sweep already has where tune_space names it. Slow: the real autotune, briefly."""
import sys

import pytest
from support import REPO

from rlbench import registry
from rlbench.planning.suite import make_cell
from rlbench.running.adapter_envs import environment_of
from rlbench.workload import Workload

sys.path.insert(0, str(REPO / "scripts"))
import check_tune  # noqa: E402
import pufferlib_autotune as pa  # noqa: E402

# autotune(creator, batch_size=4, max_envs=8, time_per_test=1) on Synthetic-v0(step_cost_us=0, obs_bytes=16)
CAPTURED = """\
Profiling single-core performance for ~ 1 seconds
Profile complete
    SPS: 296323.457
    STD: 29.612%
    Reset: 0.196%
    RAM: 2.216 MB/env
    Bandwidth: 0.005 GB/s
    Throughput: 0.009 GB/s (2 cores)


SPS: 1612.111
    num_envs: 8
    num_workers: 2
    batch_size: 4
    backend: Multiprocessing

SPS: 643.829
    num_envs: 4
    num_workers: 2
    batch_size: 4
    backend: Multiprocessing

SPS: 322761.422
    num_envs: 4
    backend: Serial

"""

# autotune(creator, batch_size=2, max_envs=7, time_per_test=0.5) on Synthetic-v0(step_cost_us=50): capped
CAPTURED_CAPPED = """\
Profiling single-core performance for ~ 0.5 seconds
Profile complete
    SPS: 18246.085
    STD: 7.200%
    Reset: 0.025%
    RAM: 0.680 MB/env
    Bandwidth: 0.001 GB/s
    Throughput: 0.002 GB/s (2 cores)

Reducing max envs to 6 based on core division

SPS: 827.147
    num_envs: 4
    num_workers: 2
    batch_size: 2
    backend: Multiprocessing

SPS: 287.388
    num_envs: 2
    num_workers: 2
    batch_size: 2
    backend: Multiprocessing

SPS: 18102.469
    num_envs: 2
    backend: Serial

"""


def test_every_configuration_autotune_timed_is_read_and_the_fastest_is_the_pick():
    got = pa.parse(CAPTURED)
    assert [c["sps"] for c in got["configs"]] == [1612.111, 643.829, 322761.422]
    assert got["configs"][0]["config"] == {"num_envs": 8, "num_workers": 2, "batch_size": 4,
                                           "backend": "Multiprocessing"}
    assert got["pick"] == {"sps": 322761.422, "config": {"num_envs": 4, "backend": "Serial"}}
    assert got["notes"] == []


def test_the_profiles_rate_is_not_a_configuration_and_caps_are_kept_as_notes():
    got = pa.parse(CAPTURED_CAPPED)
    assert 18246.085 not in [c["sps"] for c in got["configs"]]
    assert got["notes"] == ["Reducing max envs to 6 based on core division"]
    assert got["pick"]["config"] == {"num_envs": 2, "backend": "Serial"}


@pytest.mark.parametrize("text, words", [
    ("", "Profile complete"),
    (CAPTURED.split("\n\n\n")[0] + "\n", "no configuration"),                          # cut before its tests
    (CAPTURED.replace("SPS: 1612.111", "SPS = 1612.111"), "not autotune's format"),
    (CAPTURED.replace("SPS: 643.829", "SPS: fast"), "not a number"),
    (CAPTURED.replace("    num_workers: 2\n", "    workers: 2\n", 1), "unexpected key"),
    (CAPTURED.replace("    num_envs: 8", "    num_envs: eight"), "not an integer"),
    (CAPTURED.replace("backend: Serial", "backend: Ray"), "known backend"),
    (CAPTURED.replace("    num_envs: 4\n    backend: Serial", "    backend: Serial"), "num_envs"),
    (CAPTURED.replace("    num_envs: 4\n    backend: Serial", "    num_envs: 4\n    num_workers: 2\n"
                                                                  "    backend: Serial"), "Serial configuration"),
    (CAPTURED + "Traceback (most recent call last):\n", "not autotune's format"),
])
def test_output_it_cannot_read_stops_check_tune_rather_than_guessing(text, words):
    with pytest.raises(pa.AutotuneOutputError, match=words):
        pa.parse(text)


@pytest.mark.parametrize("config, cell", [
    ({"num_envs": 4, "backend": "Serial"}, ("pufferlib-serial", 4, {})),
    ({"num_envs": 8, "num_workers": 2, "batch_size": 4, "backend": "Multiprocessing"},
     ("pufferlib-mp", 8, {"num_workers": 2, "batch_size": 4})),
    ({"num_envs": 6, "num_workers": 2, "batch_size": 4, "zero_copy": False, "backend": "Multiprocessing"},
     ("pufferlib-mp", 6, {"num_workers": 2, "batch_size": 4, "zero_copy": False})),
])
def test_a_pick_is_the_cell_that_makes_the_same_call(config, cell):
    assert pa.cell_args(config) == cell


def test_a_pick_tune_space_names_is_the_same_cell_as_the_sweeps():
    """The sweep matches picks by resolved options: autotune's (8 envs, 2 workers, batch 4, zero_copy
    unsaid, so True) is pufferlib-mp's tune_space entry {num_workers: 2, batch_size: 4}."""
    workload = Workload("rlbench/Synthetic-v0", 8)
    adapter, n, options = pa.cell_args({"num_envs": 8, "num_workers": 2, "batch_size": 4,
                                        "backend": "Multiprocessing"})
    pick = make_cell("t", adapter, workload, options)
    assert pick.options == make_cell("t", "pufferlib-mp", workload, {"num_workers": 2, "batch_size": 4}).options
    assert pick.options["zero_copy"] is True and pick.options["overwork"] is False
    assert pa.label({"num_envs": 8, "num_workers": 2, "batch_size": 4, "backend": "Multiprocessing"}) \
        == "pufferlib-mp num_workers=2 batch_size=4 x8"
    assert pa.label({"num_envs": 4, "backend": "Serial"}) == "pufferlib-serial x4"


def test_the_budget_is_split_over_the_tests_autotune_runs():
    # the captured runs: the profile and 3 configurations each
    assert pa.planned_tests(4, 8, 2) == 1 + len(pa.parse(CAPTURED)["configs"])
    assert pa.planned_tests(2, 7, 2) == 1 + len(pa.parse(CAPTURED_CAPPED)["configs"])
    # 16 cores, batch 32 of 64: one batch per core; 16 workers x 4 envs, async and in blocks; sync on
    # 16, 8, 4, 2 workers; Serial
    assert pa.planned_tests(32, 64, 16) == 1 + 1 + 2 + 4 + 1


def test_the_policys_cost_is_autotunes_model_time():
    assert pa.model_forward_s("fixed_cost:cost_us=200") == pytest.approx(200e-6)
    assert pa.model_forward_s("random") == 0.0


def test_without_the_pufferlib_environment_check_tune_says_so_in_one_line_and_goes_on(monkeypatch, capsys):
    from types import SimpleNamespace

    from rlbench.running import adapter_envs
    assert check_tune.pufferlib_python(SimpleNamespace(no_pufferlib=True)) is None
    env = environment_of(registry.get("pufferlib-serial"))
    monkeypatch.setattr(adapter_envs, "prepare", lambda classes, build: {"pufferlib": adapter_envs.Prepared(
        env, status="error", reason="environment 'pufferlib' failed to build (no network)")})
    assert check_tune.pufferlib_python(SimpleNamespace(no_pufferlib=False)) is None
    err = capsys.readouterr().err
    assert err == "check-tune: PufferLib autotune left out: environment 'pufferlib' failed to build (no network)\n"


@pytest.mark.slow
def test_the_real_autotune_runs_in_its_environment_and_its_pick_is_read(tmp_path):
    env = environment_of(registry.get("pufferlib-serial"))
    if env.record() is None:
        pytest.skip("the pufferlib environment is not built (rlbench envs --build pufferlib)")
    got = pa.run(env.python, "rlbench/Synthetic-v0", {"step_cost_us": 0, "obs_bytes": 16}, 2, 4, 0.2,
                 timeout=300)
    assert got["configs"] and got["pick"] in got["configs"]
    assert len(got["configs"]) + 1 <= pa.planned_tests(2, 4, __import__("psutil").cpu_count(logical=False))
    for c in got["configs"]:
        adapter, n, options = pa.cell_args(c["config"])
        cell = make_cell("t", adapter, Workload("rlbench/Synthetic-v0", n), options)
        assert registry.get(adapter)().supports(cell.workload, cell.options) is None   # rlbench can run it
