"""Machine limits (rlbench.machine.limits): measured in a fresh process with positive figures and no file left
behind, cold reads checked with mincore, the suite's [limits] table validated, replay figures reported
as a fraction of their limit, and `rlbench run` measuring them before a sweep with replay cells."""
import json
import os
import re
from dataclasses import replace

import pytest
from support import TINY, sweep, write_suite

from rlbench import cli, pipeline, registry
from rlbench.errors import UsageError
from rlbench.machine import limits
from rlbench.planning import flags
from rlbench.planning.suite import load_suite
from rlbench.results.model import ResultSet, frames

TINY_SIZES = {"memcpy_mb": 16, "disk_mb": 32, "repeats": 2}
FIGURES = ("memcpy_1core_gbps", "memcpy_allcore_gbps", "disk_seq_read_gbps", "disk_random_read_4k_gbps",
           "disk_random_read_1m_gbps")
PAGE_CACHE = re.compile(r"(cold|warm) \(posix_fadvise DONTNEED; \d+\.\d% resident after drop\)")


def test_figures_are_positive_and_the_scratch_file_goes(tmp_path):
    got = limits.measure_in_subprocess(tmp_path, **TINY_SIZES)
    assert "error" not in got, got
    for key in FIGURES:
        assert got[key]["median"] > 0 and len(got[key]["runs"]) >= 1 and min(got[key]["runs"]) > 0, key
    assert len(got["memcpy_1core_gbps"]["runs"]) == 2 and got["disk_random_read_4k_iops"] > 0
    assert got["processes"] == len(os.sched_getaffinity(0))
    assert (got["memcpy_mb"], got["disk_mb"], got["disk_path"]) == (16, 32, str(tmp_path))
    assert got["fs_type"] and got["seconds"] > 0
    assert 0.0 <= got["page_cache_resident_frac"] <= 1.0
    assert PAGE_CACHE.fullmatch(got["page_cache"]), got["page_cache"]
    assert got["page_cache"].startswith("cold") == (got["page_cache_resident_frac"] <= limits.WARM_FRAC)
    assert list(tmp_path.iterdir()) == []


def test_the_drop_empties_the_page_cache_and_mincore_sees_it(tmp_path):
    path = tmp_path / "f"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        size = limits._write(fd, 4)
        assert limits.resident_frac(fd, size) == 1.0  # just written: all cached
        dropped = limits._drop(fd, size)
    finally:
        os.close(fd)
    assert dropped == (1.0 if limits.fs_type(tmp_path) == "tmpfs" else 0.0)


@pytest.mark.skipif(limits.fs_type("/dev/shm") != "tmpfs", reason="no tmpfs at /dev/shm")
def test_on_tmpfs_the_reads_are_reported_warm():
    got = limits.disk_figures("/dev/shm", disk_mb=4, repeats=1, random_read_s=0.05)
    assert got["page_cache_resident_frac"] == 1.0 and got["page_cache"].startswith("warm (")
    assert not [n for n in os.listdir("/dev/shm") if n.startswith(f".rlbench-limits-{os.getpid()}")]


@pytest.mark.parametrize("table, expected", [
    ("bogus = 1", ["'bogus'", "limits", "valid: disk_mb, measure, memcpy_mb, repeats"]),
    ("memcpy_mb = 0", ["limits.memcpy_mb=0", "positive integer"]),
    ("disk_mb = 1.5", ["limits.disk_mb=1.5", "positive integer"]),
    ("repeats = true", ["limits.repeats=True", "positive integer"]),
    ("measure = 1", ["limits.measure=1", "true or false"]),
])
def test_bad_limits_table(tmp_path, table, expected):
    path = write_suite(tmp_path, f"[limits]\n{table}\n" + sweep(["serial"]))
    with pytest.raises(UsageError) as info:
        load_suite(str(path))
    message = str(info.value)
    assert message.startswith(str(path)) and "\n" not in message
    for part in expected:
        assert part in message, f"{part!r} not in {message!r}"


def test_limits_table_resolves_with_defaults(tmp_path):
    assert load_suite(str(write_suite(tmp_path, sweep(["serial"])))).limits == limits.DEFAULTS
    suite = load_suite(str(write_suite(tmp_path, "[limits]\ndisk_mb = 64\nmeasure = false\n" + sweep(["serial"]))))
    assert suite.limits == {**limits.DEFAULTS, "disk_mb": 64, "measure": False}


def _row(cell, index, rate, **extra):
    row = {"schema": 1, "run_id": "r", "suite": "hand", "cell_id": cell, "cell_index": index, "adapter": cell,
           "kind": "replay", "env": "replay/DQN-Qbert", "env_kwargs": {}, "num_envs": 1, "frameskip": 1,
           "repeat": 0, "profiled": False, "status": "ok", "error": None, "env_steps": int(rate), "units": 1,
           "seconds": 1.0, "steps_per_s": rate, "latency_p50_ms": 0.1, "latency_p99_ms": 0.2, "cpu_util": 1.0,
           "peak_rss_mb": 50.0}
    return frames({**row, **extra})


def test_limit_frac_is_the_rate_over_its_limit():
    env = {"limits": {"memcpy_1core_gbps": {"median": 10.0, "runs": [10.0]},
                      "disk_random_read_4k_gbps": {"median": 0.05, "runs": [0.05]}}}
    rows = ([_row("ram", 0, r, item_bytes=1000, bound="memcpy_1core") for r in (1e6, 2e6, 3e6)]
            + [_row("disk", 1, 5000.0, item_bytes=4096, bound="disk_random_read_4k_gbps", page_cache="cold")]
            + [_row("gpu", 2, r, item_bytes=100, bound="h2d_copy", bound_gbps=g) for r, g in ((1e8, 20.0), (1e8, 30.0))]
            + [_row("vec", 3, 1e4, kind="vector_env")])
    ram, disk, gpu, vec = ResultSet.from_rows(rows, env).summary_rows()
    assert (ram["bound"], ram["item_bytes"], ram["limit_gbps"]) == ("memcpy_1core", 1000, 10.0)
    assert ram["limit_frac"] == pytest.approx(2e6 * 1000 / 10e9)
    assert disk["limit_frac"] == pytest.approx(5000 * 4096 / 0.05e9) and disk["page_cache"] == "cold"
    assert gpu["limit_gbps"] == 25.0 and gpu["limit_frac"] == pytest.approx(1e8 * 100 / 25e9)  # its own
    assert vec["limit_gbps"] is None and vec["limit_frac"] is None and vec["bound"] is None
    # not measured (or failed): a bound no figure names gives no fraction
    unmeasured = ResultSet.from_rows(rows, {"limits": {"error": "x"}}).summary_rows()[0]
    assert unmeasured["limit_gbps"] is None and unmeasured["limit_frac"] is None


def test_cli_limits(tmp_path, capsys):
    out = tmp_path / "here"
    assert cli.main(["limits", "--out-dir", str(out), "--memcpy-mb", "16", "--disk-mb", "32", "--repeats", "1"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["disk_path"] == str(out) and got["memcpy_1core_gbps"]["median"] > 0
    assert list(out.iterdir()) == []


def test_cli_limits_bad_size(capsys):
    assert cli.main(["limits", "--disk-mb", "0"]) == 2
    assert capsys.readouterr().err.strip() == ("rlbench: error: rlbench limits: argument --disk-mb: "
                                               "'0' must be a positive integer")


def test_run_measures_limits_before_a_replay_sweep(tmp_path, monkeypatch, capsys):
    from rlbench.planning.request import RunRequest
    args = RunRequest.from_flags(cli.parse_args(["run", "--adapter", "serial", "--env", "CartPole-v1", *TINY, "--out",
                                                 str(tmp_path / "r")]))
    suite = flags.plan_from_args(args)
    monkeypatch.setattr(pipeline, "plan_from_args", lambda _: replace(suite, limits={**TINY_SIZES, "measure": True, "repeats": 1}))
    monkeypatch.setattr(registry.get("serial"), "kind", "replay")  # stands in for a replay backend
    rc, out_dir = pipeline.run(args)
    assert rc == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("rlbench: limits: ")]
    assert len(lines) == 1 and "GB/s" in lines[0], lines
    env = json.load(open(os.path.join(out_dir, "env.json")))
    assert env["limits"]["memcpy_1core_gbps"]["median"] > 0 and env["limits"]["disk_path"] == out_dir
    assert not [n for n in os.listdir(out_dir) if n.startswith(".rlbench-limits")]
