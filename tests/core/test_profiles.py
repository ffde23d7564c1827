"""`--profile`: py-spy's speedscope file of every process of a cell becomes seconds per stage, written to
profiles.csv and drawn in the HTML report with a link to the file."""
import csv
import json
import shutil

import pytest

from rlbench.results.profiles import breakdown, classify

PY = "/usr/lib/python3.11/"
SITE = "/venv/lib/python3.11/site-packages/"
CELL = [("run_cell", "/src/rlbench/running/child.py")]
MEASURED = CELL + [("measure", "/src/rlbench/running/timing.py")]


@pytest.mark.parametrize("stack,stage", [
    (MEASURED + [("step", "/src/adapters/serial.py"), ("CartPoleEnv.step", SITE + "gymnasium/envs/classic_control/cartpole.py")], "env"),
    (MEASURED + [("act", "/src/adapters/torch_policies.py"), ("Linear.forward", SITE + "torch/nn/modules/linear.py")], "inference"),
    (MEASURED + [("act", "/src/adapters/torch_policies.py"), ("inference_mode.__enter__", SITE + "torch/autograd/grad_mode.py")], "inference"),
    (MEASURED + [("Session.learn", "/src/adapters/impala.py"), ("Linear.forward", SITE + "torch/nn/modules/linear.py")], "learner"),
    (MEASURED + [("step", "/src/adapters/x.py"), ("Adam.step", SITE + "torch/optim/adam.py")], "learner"),
    (MEASURED + [("step", "/src/adapters/x.py"), ("Connection._recv", PY + "multiprocessing/connection.py")], "ipc"),
    (MEASURED + [("step", "/src/adapters/x.py"), ("update_wrapper", PY + "functools.py")], "other"),
    (MEASURED + [("busy_wait", "/src/rlbench/running/timing.py")], "harness"),
    (CELL + [("open", "/src/adapters/x.py"), ("_find_and_load", "<frozen importlib._bootstrap>")], "setup"),
    (CELL + [("open", "/src/adapters/x.py"), ("Linear.forward", SITE + "torch/nn/modules/linear.py")], "setup"),
    ([("_worker", "/src/adapters/x.py"), ("CartPoleEnv.step", SITE + "gymnasium/envs/classic_control/cartpole.py")], "env"),
    ([], "other"),
])
def test_classify(stack, stage):
    assert classify(stack) == stage


def speedscope(path, profiles):
    """profiles: [[(stack, weight_s), ...] per process]."""
    frames, index = [], {}
    out = []
    for samples in profiles:
        ids, weights = [], []
        for stack, w in samples:
            for fr in stack:
                index.setdefault(fr, len(frames)) == len(frames) and frames.append({"name": fr[0], "file": fr[1]})
            ids.append([index[fr] for fr in stack])
            weights.append(w)
        out.append({"type": "sampled", "name": "p", "unit": "seconds", "samples": ids, "weights": weights})
    path.write_text(json.dumps({"shared": {"frames": frames}, "profiles": out}))
    return path


def test_breakdown_sums_every_process(tmp_path):
    env = MEASURED + [("CartPoleEnv.step", SITE + "gymnasium/envs/classic_control/cartpole.py")]
    recv = [("_worker", "/src/x.py"), ("Connection._recv", PY + "multiprocessing/connection.py")]
    path = speedscope(tmp_path / "p.json", [[(env, 0.5), (env, 0.25)], [(recv, 1.0)]])
    got = breakdown(str(path))
    assert got["env"] == pytest.approx(0.75) and got["ipc"] == pytest.approx(1.0)
    assert sum(got.values()) == pytest.approx(1.75)


@pytest.mark.slow
def test_profile_run_writes_breakdown_csv_and_html(cli_run):
    if shutil.which("py-spy") is None and not shutil.os.path.exists(shutil.os.path.join(
            shutil.os.path.dirname(shutil.sys.executable), "py-spy")):
        pytest.fail("py-spy is part of make install")
    run = cli_run(["run", "--adapter", "serial", "--env", "CartPole-v1", "--num-envs", "2", "--policy",
                   "mlp:hidden=16", "--repeats", "1", "--duration", "1", "--warmup", "0.1", "--profile"])
    assert run.rc == 0, run.stderr
    with open(run.out / "profiles.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 1 and rows[0]["profile"].endswith(".speedscope.json")
    assert float(rows[0]["env_s"]) > 0 and float(rows[0]["inference_s"]) > 0
    fracs = [float(rows[0][k]) for k in rows[0] if k.endswith("_frac")]
    # the CSV writes 6 significant digits: each share of 1 is off by up to 5e-7 (seen: 0.9999989 in all)
    assert sum(fracs) == pytest.approx(1.0, abs=len(fracs) * 5e-7)
    page = (run.out / "index.html").read_text()
    assert "Where the time goes" in page and rows[0]["profile"] in page


def test_profiles_are_read_once_per_report_and_exported_as_bytes(tmp_path, monkeypatch):
    from rlbench.report import profiles_section as section
    from rlbench.report.view import RunView
    from rlbench.results.model import ResultSet
    speedscope(tmp_path / "p.speedscope.json", [[(CELL + [("step", "/x/gymnasium/core.py")], 0.75)]])
    row = {"cell_id": "serial/x", "cell_index": 0, "adapter": "serial", "status": "ok", "steps_per_s": 10.0,
           "profiled": True, "profile": "p.speedscope.json"}
    reads = []
    real = section.breakdown
    monkeypatch.setattr(section, "breakdown", lambda path: (reads.append(path), real(path))[1])
    view = RunView(ResultSet.from_rows([row], {}), str(tmp_path))
    files = section.export_profiles(view)
    html = section.profiles_section(view)
    assert len(reads) == 1 and isinstance(files["profiles.csv"], bytes)
    assert files["profiles.csv"].decode().startswith("cell_id,profile,") and "p.speedscope.json" in html
    assert "<td data-v='0.75'>0.75</td>" in html
