"""tune decides where the policy runs: where CUDA exists the device is an axis of every strategy that acts
with one central copy (never of workers' own CPU copies), the calibration's bound knows where the policy
runs, and the answer says where it runs with the profiled figures; without CUDA it says so."""
import json
import subprocess
import sys

import pytest
from support import REPO

from rlbench.results.decision import Decision
from rlbench.tuning import calibrate
from rlbench.tuning.candidates import Space
from rlbench.tuning.figures import Figures
from rlbench.tuning.placement import call_us, placement
from rlbench.tuning.profile import EnvProfile
from rlbench.workload import Workload, parse_policy, placed

CURVES = {"cpu": {"1": 700.0, "64": 10_000.0, "256": 40_000.0}, "cuda": {"1": 150.0, "64": 180.0, "256": 210.0}}


def _profile(curves=CURVES, no_gpu=""):
    return EnvProfile.from_json({"step": {"median_us": 20.0}, "obs_bytes": 28224, "rss_per_env_mb": 0.1,
                                 "policy_us_per_batch": curves["cpu"], "policy_curves": curves, "no_gpu": no_gpu,
                                 "device": "cpu"})


def _space(devices, policy="cnn"):
    return Space(Workload("rlbench/Frames-v0", 1, parse_policy(policy)), ["serial", "rlpyt-cpu", "rlpyt-gpu"],
                 256, 4, _profile({d: CURVES[d] for d in devices}))


def test_the_device_is_an_axis_of_central_policies_only():
    space = _space(("cpu", "cuda"))
    devices = {a: sorted({c.workload.policy.device for _, c in space.settings(a, 64)}) for a in space.adapters}
    assert devices == {"serial": ["cpu", "cuda"], "rlpyt-gpu": ["cpu", "cuda"], "rlpyt-cpu": ["cpu"]}
    axes = {axis: c.workload.policy.device for axis, _, c in space.neighbours("serial", 64, 0, {}, "cpu")}
    assert axes["policy device"] == "cuda" and axes["num_envs x2"] == "cpu"
    assert {c.workload.policy.device for _, c in _space(("cpu",)).settings("serial", 64)} == {"cpu"}


def test_only_a_policy_with_a_device_is_placed():
    assert placed(parse_policy("lstm"), "cuda").device == "cuda"
    assert placed(parse_policy("random"), "cuda") is None
    assert placed(parse_policy("fixed_cost:cost_us=5"), "cuda") is None


def test_the_bound_knows_where_the_policy_runs():
    """Central: the policy in one process, overlapping the envs at best; in workers: sharing their cores."""
    profile, cal = _profile(), {"serial": {"64": {"steps_per_s": 1e9, "workers": 1}},
                                "rlpyt-cpu": {"64": {"steps_per_s": 1e9, "workers": 4}},
                                "rlpyt-gpu": {"64": {"steps_per_s": 1e9, "workers": 4}}}
    cal = Figures.from_json(cal)
    on_cpu = calibrate.predict(cal, "serial", 64, profile, 4, "cpu", central=True)
    on_cuda = calibrate.predict(cal, "serial", 64, profile, 4, "cuda", central=True)
    assert on_cpu == pytest.approx(1e6 / (20.0 + 40_000 / 256))   # one process: the env, then the policy
    assert on_cuda == pytest.approx(1e6 / (20.0 + 210 / 256))
    master = calibrate.predict(cal, "rlpyt-gpu", 64, profile, 4, "cuda", central=True)
    assert master == pytest.approx(1e6 / max(20.0 / 4, 210 / 256))  # overlapping 4 workers' stepping at best
    workers = calibrate.predict(cal, "rlpyt-cpu", 64, profile, 4, "cpu", central=False)
    assert workers == pytest.approx(1e6 / ((20.0 + 40_000 / 256) / 4))


def test_the_answer_says_where_the_policy_runs_with_the_figures():
    space = _space(("cpu", "cuda"))
    [cuda] = [c for _, c in space.settings("serial", 256) if c.workload.policy.device == "cuda"]
    said = placement(cuda, _profile(), rows=[{"policy_s": 0.1, "seconds": 1.0}])
    assert said == ("policy on cuda, one copy batched over 256 envs: 210 us per batch (0.8 us per env step, "
                    "profiled), against 40.00 ms on cpu; 10% of the winner's time in the policy")
    [workers] = [c for _, c in space.settings("rlpyt-cpu", 256) if c.given_options.get("workers") == 4]
    assert placement(workers, _profile()).startswith(
        "policy on the CPU, a copy in each of 4 workers acting for 64 envs: 10.00 ms per batch (profiled), "
        "against 210 us per batch of all 256 envs batched on cuda")
    cpu_only = _profile({"cpu": CURVES["cpu"]}, "no CUDA device here")
    [serial] = _space(("cpu",)).settings("serial", 64)
    assert placement(serial[1], cpu_only).endswith("; no GPU option: no CUDA device here")
    random = _profile({"cpu": {"1": 1.0}}, "policy random has no device to place")
    [serial] = _space(("cpu",), "random").settings("serial", 64)
    assert placement(serial[1], random) == ""
    assert call_us(CURVES["cpu"], 128) == pytest.approx(10_000 + (40_000 - 10_000) * 64 / 192)
    assert call_us(CURVES["cpu"], 512) == pytest.approx(80_000)


def test_the_placement_survives_tune_json():
    d = Decision(label="x", placement="policy on cuda, one copy batched over 256 envs")
    assert Decision.from_json(json.loads(json.dumps(d.to_json()))).placement == d.placement


@pytest.mark.slow
def test_a_cnn_tune_on_frames_names_where_its_policy_runs(tmp_path):
    """A first tune with the Nature CNN on stacked 84x84 frames, on a machine without CUDA: the profile measured
    the CNN's latency curve, the space held only the CPU, and the answer says where the policy runs and why."""
    out = tmp_path / "tune"
    proc = subprocess.run([sys.executable, "-m", "rlbench.cli", "tune", "--env", "rlbench/Frames-v0", "--env-kwarg",
                           "step_cost_us=20", "--policy", "cnn", "--adapters", "serial,rlpyt-cpu,gymnasium-async",
                           "--max-envs", "16", "--budget", "40s", "--out", str(out)],
                          capture_output=True, text=True, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = json.loads((out / "tune.json").read_text())
    profile = record["profile"]
    assert list(profile["policy_curves"]) == ["cpu"] and profile["no_gpu"] == "no CUDA device here"
    assert len(profile["policy_curves"]["cpu"]) >= 3
    said = record["decision"]["placement"]
    assert said.startswith(("policy on cpu, one copy batched over ", "policy on the CPU, a copy in each of "))
    assert "profiled" in said
    assert said.endswith("no GPU option: no CUDA device here") and said in proc.stdout
    assert all(c["cell_id"].endswith("/cnn-cpu-t1") or "/cnn-cpu-t1/" in c["cell_id"] for c in record["candidates"])
