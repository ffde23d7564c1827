"""A first tune stopped while it calibrates the machine (SIGTERM), then `rlbench resume` on its folder: the resume
calibrates what the cache still lacks, apart from the budget as before, and searches with the whole budget left;
the calibration's time of both sessions is reported, never charged."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

TUNE = ["tune", "--env", "rlbench/Synthetic-v0", "--adapters", "serial,gymnasium-sync,gymnasium-async",
        "--max-envs", "4", "--budget", "15s"]


@pytest.mark.slow
def test_a_tune_stopped_while_calibrating_resumes_and_keeps_the_calibration_apart(tmp_path):
    env = {**os.environ, "RLBENCH_CACHE": str(tmp_path / "cache")}
    out, err_path = tmp_path / "tune", tmp_path / "first.stderr"
    with open(err_path, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "rlbench.cli", *TUNE, "--out", str(out)], env=env,
                                stdout=subprocess.DEVNULL, stderr=err, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 120
        while "calibrating 3 strategies" not in err_path.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, err_path.read_text()[-2000:]
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 130, err_path.read_text()[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    first = json.loads((out / "tune.json").read_text())
    assert first["calibration"] is None and first["decision"]["calibration"].startswith("interrupted after")
    assert first["used_s"] < 10     # the profile, not the calibration
    done = subprocess.run([sys.executable, "-m", "rlbench.cli", "resume", str(out)], env=env, capture_output=True,
                          text=True, timeout=240, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((out / "tune.json").read_text())
    cal = record["calibration"]
    assert set(cal["adapters"]) == {"serial", "gymnasium-sync", "gymnasium-async"}
    assert record["calibration_s"] >= cal["seconds"] > 0 and record["calibration_s"] > first["calibration_s"]
    assert record["used_s"] <= record["budget_s"] + 5 and record["decision"]["winner"]
    assert "not counted in the 15 s budget" in record["decision"]["calibration"]
    assert "calibration: " in done.stdout
