"""The device kit (scripts/device_kit.py, scripts/device_run.sh): its parts' suites at rehearsal size keep every
CPU cell, the rehearsal hides what the GPU machine lacks, a bad part or a missing kit is refused, what comes back
is unpacked into reports/reference/<kind>/ with its table; and (slow, as CI runs them) the kit fits one call
and each part's rehearsal runs its CPU cells here, each ok (the GPU cells are left out of a rehearsal)."""
import json
import os
import subprocess
import sys
import tarfile
import tomllib

import pytest
from support import REPO, TINY, run_cli_subprocess
from support.procs import spawned

from rlbench.planning.suite import load_suite

sys.path.insert(0, str(REPO / "scripts"))
import device_kit  # noqa: E402

PARTS = sorted(os.path.splitext(p)[0] for p in os.listdir(REPO / "suites" / "device"))
SUITE_PARTS = sorted(p[:-5] for p in os.listdir(REPO / "suites" / "device") if p.endswith(".toml"))
RUN_SH = str(REPO / "scripts" / "device_run.sh")


def shape(suite, cpu_only=False):
    return {(c.adapter, c.workload.env_id, c.workload.policy.name, c.workload.policy.device) for c in suite.cells
            if not (cpu_only and on_gpu(c.workload.policy.device, c.options))}


def on_gpu(device, options) -> bool:
    options = options or {}
    return (str(device or "").startswith("cuda") or options.get("platform") == "gpu"
            or options.get("device") == "cuda" or options.get("backend") == "nccl")


def test_every_part_has_a_suite_and_a_kit_entry():
    assert PARTS == sorted(device_kit.PARTS)


def _wheel(folder, name: str, size: int, cache) -> dict:
    """A wheel of `size` random bytes (xz finds nothing to shrink), packed into FOLDER/wheels (packed wheels kept
    in CACHE); its entries."""
    import zipfile
    wheel = folder / "wheels" / f"{name}-1.0-py3-none-any.whl"
    wheel.parent.mkdir(parents=True, exist_ok=True)
    entries = {f"{name}/blob.bin": os.urandom(size), f"{name}-1.0.dist-info/RECORD": b"x\n"}
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        for entry, data in entries.items():
            z.writestr(entry, data)
    device_kit.pack(str(wheel), cache=str(cache))
    return entries


def test_a_packed_wheel_comes_back_with_every_entry(tmp_path):
    import zipfile
    entries = _wheel(tmp_path, "demo", 6000, tmp_path / "cache")
    wheel = tmp_path / "wheels" / "demo-1.0-py3-none-any.whl"
    assert (tmp_path / "wheels" / "demo-1.0-py3-none-any.whl.xz").exists() and not wheel.exists()
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "device_kit.py"), "wheels", str(tmp_path),
                        str(tmp_path / "out")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    with zipfile.ZipFile(tmp_path / "out" / wheel.name) as z:
        assert {n: z.read(n) for n in z.namelist()} == entries
    assert len(os.listdir(tmp_path / "cache")) == 1   # packed once, kept by the wheel's sha256, in the cache given
    empty = tmp_path / "empty"
    (empty / "wheels").mkdir(parents=True)
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "device_kit.py"), "wheels", str(empty),
                        str(tmp_path / "out2")], capture_output=True, text=True)
    assert r.returncode == 2 and "no wheels" in r.stderr


def test_a_kit_over_one_call_travels_in_stage_calls_and_comes_back_whole(tmp_path):
    import zipfile
    kit = tmp_path / "gpu-warp"
    wheels = {name: _wheel(kit, name, size, tmp_path / "cache") for name, size in (("big", 300_000), ("mid", 90_000), ("small", 20_000))}
    room = 100_000
    pieces = device_kit.split(str(kit), room)
    stages = max(p["stage"] for p in pieces)
    assert stages == 4 and {p["file"] for p in pieces} == {"wheels/big-1.0-py3-none-any.whl.xz",
                                                            "wheels/mid-1.0-py3-none-any.whl.xz"}
    assert sorted(os.listdir(kit / "wheels")) == ["small-1.0-py3-none-any.whl.xz"]   # the smallest stays whole
    for s in range(1, stages + 1):          # each call carries at most `room` of the kit
        assert sum(f.stat().st_size for f in (tmp_path / f"gpu-warp.stage{s}").iterdir() if f.suffix != ".json") <= room
    assert sum(f.stat().st_size for f in kit.rglob("*") if f.is_file()) <= room
    (kit / "kit.json").write_text(json.dumps({"part": "gpu-warp", "pieces": pieces, "stages": stages}))
    env = {**os.environ, "KIT": str(tmp_path), "OUT": str(tmp_path / "out"), "PYTHON": sys.executable}
    r = subprocess.run(["bash", RUN_SH, "gpu-warp", "--stage", "1"], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and "stage 1 of 4 held" in r.stdout, r.stderr
    wheels_cmd = [sys.executable, str(REPO / "scripts" / "device_kit.py"), "wheels", str(kit), str(tmp_path / "w"),
                  "--held", str(tmp_path / "gpu-warp.held")]
    r = subprocess.run(wheels_cmd, capture_output=True, text=True)   # a machine released between the calls
    assert r.returncode == 2 and "gpu-warp's stage 2 is not on this machine" in r.stderr
    for s in (2, 3, 4):
        r = subprocess.run(["bash", RUN_SH, "gpu-warp", "--stage", str(s)], capture_output=True, text=True, env=env)
        assert r.returncode == 0, r.stderr
    r = subprocess.run(wheels_cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for name, entries in wheels.items():
        with zipfile.ZipFile(tmp_path / "w" / f"{name}-1.0-py3-none-any.whl") as z:
            assert {n: z.read(n) for n in z.namelist()} == entries
    held = tmp_path / "gpu-warp.held" / pieces[0]["piece"]      # a piece that changed on the way is refused
    held.write_bytes(b"\0" + held.read_bytes()[1:])
    r = subprocess.run(wheels_cmd, capture_output=True, text=True)
    assert r.returncode == 2 and "differ from kit.json's sha256" in r.stderr
    r = subprocess.run(["bash", RUN_SH, "gpu-warp", "--stage", "5"], capture_output=True, text=True, env=env)
    assert r.returncode == 2 and "no stage 5 for gpu-warp" in r.stderr


def test_a_stage_piece_that_changed_is_not_held(tmp_path):
    kit = tmp_path / "gpu-warp"
    _wheel(kit, "big", 50_000, tmp_path / "cache")
    pieces = device_kit.split(str(kit), 20_000)
    stage = tmp_path / "gpu-warp.stage1"
    piece = stage / pieces[0]["piece"]
    piece.write_bytes(piece.read_bytes()[:-1])
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "device_kit.py"), "hold", str(stage),
                        str(tmp_path / "held")], capture_output=True, text=True)
    assert r.returncode == 2 and "its bytes differ from stage.json's sha256" in r.stderr
    assert not (tmp_path / "held" / pieces[0]["piece"]).exists()


@pytest.fixture(scope="module")
def planner():
    """plan(fn, *args) -> fn(*args) in a spawned interpreter: a part's JAX env (gpu-jax's gymnax:make) is built
    while planning, which starts JAX's backend and its threads in the planning process, and later tests fork
    this one."""
    with spawned() as call:
        yield call


def _planned(original_path, rehearsal_path):
    original, rehearsal = load_suite(original_path), load_suite(rehearsal_path)
    return (shape(rehearsal), shape(original, cpu_only=True),
            [on_gpu(c.workload.policy.device, c.options) for c in rehearsal.cells], rehearsal.settings.repeats,
            rehearsal.settings.duration_s, max(c.workload.num_envs for c in rehearsal.cells))


@pytest.mark.parametrize("part", SUITE_PARTS)
def test_a_rehearsal_keeps_every_kind_of_cell_at_tiny_sizes(tmp_path, planner, part):
    original = str(REPO / "suites" / "device" / f"{part}.toml")
    out = tmp_path / f"{part}.toml"
    subprocess.run([sys.executable, str(REPO / "scripts" / "device_kit.py"), "rehearse-suite", original, str(out)],
                   check=True)
    rehearsed, cpu_cells, gpu, repeats, duration_s, most_envs = planner(_planned, original, str(out))
    assert rehearsed == cpu_cells   # every kind of CPU cell, no GPU cell
    assert not any(gpu)
    assert repeats == 1
    assert duration_s <= 0.05
    assert most_envs <= device_kit.REHEARSAL_NUM_ENVS
    given = [v for sweep in tomllib.loads(out.read_text())["sweep"] for opts in sweep.get("options", {}).values()
             for values in opts.values() for v in values]   # the options the suite sets (not the defaults)
    assert all(v <= device_kit.REHEARSAL_OPTION for v in given if isinstance(v, int) and not isinstance(v, bool))


def test_a_rehearsal_leaves_out_gpu_values_and_sweeps_left_with_nothing():
    mixed = {"adapters": ["gymnax", "serial"], "policy": ["mlp:hidden=64,device=cuda", "mlp:hidden=64"],
             "options": {"gymnax": {"platform": ["gpu", "cpu"], "scan_T": [4]}}}
    assert device_kit.cpu_cells_only(mixed)
    assert mixed["policy"] == ["mlp:hidden=64"] and mixed["options"]["gymnax"] == {"platform": ["cpu"], "scan_T": [4]}
    only_gpu = {"adapters": ["mjx", "serial"], "options": {"mjx": {"platform": "gpu"}}}
    assert device_kit.cpu_cells_only(only_gpu) and only_gpu == {"adapters": ["serial"], "options": {}}
    assert not device_kit.cpu_cells_only({"adapters": ["numpy-ring"], "options": {"numpy-ring": {"device": ["cuda"]}}})
    assert not device_kit.cpu_cells_only({"adapters": ["serial"], "policy": "cnn:device=cuda"})
    assert not device_kit.gpu_policy("cuda_net:hidden=8") and device_kit.gpu_policy("cnn:device=cuda:1")


def test_shrink_keeps_two_values_caps_integers_and_leaves_the_rest():
    assert device_kit.shrink([256, 4096, 65536], 16) == [16]
    assert device_kit.shrink([1, 4, 16], 4) == [1, 4]
    assert device_kit.shrink(["random", "mlp:hidden=64x64"], 4) == ["random", "mlp:hidden=64x64"]
    assert device_kit.shrink([True, False], 4) == [True, False]
    assert device_kit.shrink(0.5, 4) == 0.5


def test_the_rehearsal_guard_hides_what_the_gpu_machine_lacks(tmp_path):
    site = tmp_path / "site"
    (site / "gymnasium").mkdir(parents=True)  # a stand-in for a carried wheel
    (site / "gymnasium" / "__init__.py").write_text("CARRIED = True\n")
    subprocess.run([sys.executable, str(REPO / "scripts" / "device_kit.py"), "guard", str(site), str(tmp_path / "g")],
                   check=True)
    probe = ("import importlib.util, gymnasium; assert gymnasium.CARRIED\n"
             "import numpy, psutil, torch\n"            # the image has these: this interpreter's are used
             "print('probed:', importlib.util.find_spec('ray'), importlib.util.find_spec('tree'))\n"
             "try:\n    import envpool\nexcept ModuleNotFoundError as e:\n    print('hidden:', e)\n")
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{tmp_path / 'g'}"}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "probed: None None" in out.stdout       # optional imports see them missing, as on the GPU machine
    assert "hidden: No module named 'envpool'" in out.stdout


def test_an_unknown_part_or_argument_or_a_missing_kit_is_refused(tmp_path):
    r = subprocess.run(["bash", RUN_SH, "gpu-jaxx"], capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [f"device_run: unknown part 'gpu-jaxx' (valid: {', '.join(PARTS)})"]
    r = subprocess.run(["bash", RUN_SH, "gpu-jax", "--fast"], capture_output=True, text=True)
    assert r.returncode == 2 and "unknown argument '--fast' (valid: --rehearse, --only GLOB, --stage S)" in r.stderr
    r = subprocess.run(["bash", RUN_SH, "gpu-jax", "--only"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.strip() == "device_run: --only needs a cell glob"
    r = subprocess.run(["bash", RUN_SH, "gpu-warp", "--stage", "0"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.strip() == "device_run: --stage needs a stage number (1, 2, ...)"
    env = {**os.environ, "KIT": str(tmp_path / "nokit"), "OUT": str(tmp_path / "out")}
    r = subprocess.run(["bash", RUN_SH, "cores16", "--rehearse"], capture_output=True, text=True, env=env)
    assert r.returncode == 2 and "no kit for cores16" in r.stderr
    assert not (tmp_path / "out").exists()
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "device_kit.py"), "build", "--parts", "gpu"],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.strip() == f"device-kit: unknown part 'gpu' (valid: {', '.join(device_kit.PARTS)})"


def test_provenance_marks_a_changed_source_dirty(tmp_path):
    kit = tmp_path / "kit"
    kit.mkdir()
    (kit / "kit.json").write_text(json.dumps({"commit": "abc123", "dirty": False,
                                              "source_sha256": device_kit.source_sha256()}))
    same = subprocess.run([sys.executable, str(REPO / "scripts" / "device_kit.py"), "provenance", str(kit)],
                          capture_output=True, text=True, check=True).stdout
    assert same.splitlines()[0] == "export RLBENCH_GIT_COMMIT=abc123 RLBENCH_GIT_DIRTY=0"
    (kit / "kit.json").write_text(json.dumps({"commit": "abc123", "dirty": False, "source_sha256": "0" * 64}))
    changed = subprocess.run([sys.executable, str(REPO / "scripts" / "device_kit.py"), "provenance", str(kit)],
                             capture_output=True, text=True, check=True).stdout
    assert changed.splitlines()[0].endswith("RLBENCH_GIT_DIRTY=1")


def test_provenance_sets_the_wall_limit_which_device_wall_s_overrides(tmp_path):
    (tmp_path / "kit.json").write_text(json.dumps({"commit": "abc123", "dirty": False}))
    script = f'eval "$({sys.executable} {REPO / "scripts" / "device_kit.py"} provenance {tmp_path})"; echo "$wall_s"'
    env = {k: v for k, v in os.environ.items() if k != "DEVICE_WALL_S"}
    default = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, check=True).stdout
    assert default.strip() == str(device_kit.WALL_S)
    told = subprocess.run(["bash", "-c", script], env={**env, "DEVICE_WALL_S": "8"}, capture_output=True, text=True,
                          check=True).stdout
    assert told.strip() == "8"


def test_the_fingerprint_takes_the_kits_commit_where_there_is_no_git(tmp_path):
    code = ("import rlbench; rlbench.ROOT = %r\n"
            "from rlbench.machine.fingerprint import fingerprint; import json; print(json.dumps(fingerprint()['git']))"
            % str(tmp_path))
    env = {**os.environ, "RLBENCH_GIT_COMMIT": "abc123", "RLBENCH_GIT_DIRTY": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert json.loads(out) == {"commit": "abc123", "dirty": True, "from": "device kit"}


def test_what_comes_back_is_unpacked_with_its_page_and_table(tmp_path, monkeypatch):
    run = run_cli_subprocess(["run", "--adapter", "serial", "--env", "CartPole-v1", "--num-envs", "1", *TINY],
                             out=tmp_path / "cores16")
    assert run.rc == 0, run.stderr
    files_at = tmp_path / "back"
    files_at.mkdir()
    with tarfile.open(files_at / "cores16.tar.gz", "w:gz") as tar:
        tar.add(tmp_path / "cores16", arcname="cores16")
    monkeypatch.setattr(device_kit, "ROOT", str(tmp_path / "repo"))
    args = type("A", (), {"files_at": str(files_at), "kind": "nvidia-h100-x1"})
    assert device_kit.unpack(args) == 0
    dest = tmp_path / "repo" / "reports" / "reference" / "nvidia-h100-x1"
    assert (dest / "cores16" / "results.jsonl").read_text() == (tmp_path / "cores16" / "results.jsonl").read_text()
    assert (dest / "cores16" / "index.html").exists()
    table = (dest / "README.md").read_text()
    assert "| cores16 |" in table and "1 ok" in table
    # a rerun of some of the part's cells lands beside the full run, under the folder named
    args.folder = "cores16-rerun"
    assert device_kit.unpack(args) == 0
    assert (dest / "cores16" / "results.jsonl").exists() and (dest / "cores16-rerun" / "results.jsonl").exists()
    assert "| cores16-rerun |" in (dest / "README.md").read_text()
    args.folder = "../out"
    assert device_kit.unpack(args) == 2 and not (dest.parent / "out").exists()


# -- as CI runs them: they download the wheels (the package registries are reachable there) --------------------

@pytest.mark.slow
def test_each_call_of_the_kit_fits_what_one_call_carries(tmp_path):
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "device_kit.py"), "build", "--out", str(tmp_path)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for part in PARTS:
        kit = json.loads((tmp_path / part / "kit.json").read_text())
        assert kit["python"] == device_kit.DEVICE_PYTHON
        assert all(call["mib"] <= device_kit.CARRY_MIB for call in kit["calls"])
        assert len(kit["calls"]) == kit["stages"] + 1
        assert all(w["file"].endswith(".whl.xz") for w in kit["wheels"])
    assert 'bash scripts/device_run.sh gpu-jax", carry=[' in r.stdout
    assert 'bash scripts/device_run.sh gpu-warp --stage 1", carry=[' in r.stdout   # warp-lang: over one call


@pytest.mark.slow
@pytest.mark.parametrize("part", PARTS)
def test_each_part_rehearses_here_with_its_cpu_cells_ok(tmp_path, part):
    kit = REPO / device_kit.REHEARSAL_KIT
    if not (kit / part / "kit.json").exists():
        subprocess.run([sys.executable, str(REPO / "scripts" / "device_kit.py"), "build", "--rehearse", "--parts",
                        part], check=True, capture_output=True)
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable}
    r = subprocess.run(["bash", RUN_SH, part, "--rehearse"], capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    archive = tmp_path / f"{part}.tar.gz"
    assert archive.stat().st_size < device_kit.FILE_MIB * 2**20
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path / "back", filter="data")
    back = tmp_path / "back" / part
    if part not in SUITE_PARTS:   # a script part (tune16): check-tune's table and its tune and sweep runs
        table = (back / "check-tune.csv").read_text().splitlines()
        assert table[0].startswith("env,tune_pick,") and len(table) == 4   # trivial, gil, cnn
        runs = device_kit.run_folders(str(back))   # each env's tune and its sweep (env.json beside its rows)
        assert sorted(os.path.relpath(r, back) for r in runs) == [f"{env}/{stage}" for env in ("cnn", "gil", "trivial")
                                                                  for stage in ("sweep", "tune")]
        assert all(json.loads(open(f"{r}/env.json").read())["git"].get("from") == "device kit" for r in runs)
        assert all((back / env / "sweep" / "results.jsonl").stat().st_size for env in ("cnn", "gil", "trivial"))
        return
    rows = [json.loads(line) for line in (back / "results.jsonl").read_text().splitlines()]
    assert rows
    for row in rows:
        assert row["status"] == "ok" and not on_gpu(row.get("device"), row.get("options")), row
    env_json = json.loads((tmp_path / "back" / part / "env.json").read_text())
    assert env_json["git"].get("from") == "device kit"
    plan = json.loads((tmp_path / "back" / part / "plan.json").read_text())
    assert tomllib.loads(plan["suite_text"])["protocol"]["repeats"] == 1


def _summary(folder, cells):
    """A part's summary.csv with the columns physics_crossover reads: (adapter, env, n, policy, device, options,
    median) per cell, its CI +-10%, a GPU cell's peak GPU memory median / 1000 MB."""
    import csv
    folder.mkdir(parents=True)
    with open(folder / "summary.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["adapter", "env", "num_envs", "policy", "device", "options", "status", "steps_per_s_median",
                    "steps_per_s_ci_low", "steps_per_s_ci_high", "gpu_mem_peak_mb_max"])
        for adapter, env, n, policy, device, options, median in cells:
            w.writerow([adapter, env, n, policy, device, json.dumps(options) if options else "",
                        "ok" if median else "error", median, median and median * 0.9, median and median * 1.1,
                        median / 1000 if device != "cpu" else ""])


def test_the_crossover_names_the_fastest_of_each_side_and_where_the_gpu_pulls_ahead(tmp_path):
    import physics_crossover
    kind = tmp_path / "nvidia-h200"
    gpu = {"platform": "gpu"}
    _summary(kind / "gpu-physics", [
        ("mujoco-rollout", "Ant-v4", 256, "random", "cpu", {}, 100e3),
        ("mujoco-rollout", "Ant-v4", 4096, "random", "cpu", {}, 150e3),
        ("mujoco-rollout", "Ant-v4", 65536, "random", "cpu", {}, 160e3),
        ("mjx", "Ant-v4", 256, "random", "gpu", gpu, 20e3),
        ("mjx", "Ant-v4", 4096, "random", "gpu", gpu, 200e3),
        ("mjx", "Ant-v4", 65536, "random", "gpu", gpu, 2e6),
        ("mjx", "Ant-v4", 256, "random", "cpu", {"platform": "cpu"}, 5e3),
        ("mujoco-rollout", "Humanoid-v4", 256, "random", "cpu", {"solver": "newton"}, 50e3),
        ("mjx", "Humanoid-v4", 256, "random", "gpu", gpu, 10e3),
        ("mjx", "Humanoid-v4", 4096, "random", "gpu", gpu, 0),   # an error row counts for nothing
    ])
    _summary(kind / "gpu-warp", [
        ("mujoco-warp", "Ant-v4", 256, "random", "cuda", {"device": "cuda"}, 50e3),
        ("mujoco-warp", "Ant-v4", 4096, "random", "cuda", {"device": "cuda"}, 300e3),
        ("mujoco-warp", "Ant-v4", 256, "mlp64x64-cuda-t1", "cuda", {"device": "cuda"}, 40e3),
    ])
    _summary(kind / "cores16", [
        ("envpool-sync", "Ant-v4", 256, "random", "cpu", {"num_threads": 16}, 120e3),
        ("envpool-sync", "CartPole-v1", 256, "random", "cpu", {}, 1e6),   # no GPU side: not in the table
        ("mujoco-rollout", "Ant-v4", 256, "mlp64x64-cpu-t1", "cpu", {}, 80e3),
    ])
    text = physics_crossover.markdown(str(kind))
    ant = text.split("## Ant-v4, random")[1].split("##")[0]
    assert "The GPU side is ahead from 4096 envs on (the CPU side at 256)" in ant
    assert "| 256 | envpool-sync (num_threads=16) (cores16) | 120.0k [108.0k, 132.0k] | mujoco-warp (gpu-warp) |" in ant
    assert "| 4096 | mujoco-rollout (gpu-physics) | 150.0k" in ant and "mujoco-warp (gpu-warp) | 300.0k" in ant
    assert "| 65536 | mujoco-rollout (gpu-physics) | 160.0k [144.0k, 176.0k] | mjx (gpu-physics) | 2.00M" in ant
    assert "| 12.50x | 2,000 |" in ant and "| 2.00x | 300 |" in ant
    assert "The CPU side is ahead at every num_envs measured (up to 256)" in text.split("## Humanoid-v4, random")[1]
    assert "mujoco-rollout (solver=newton)" in text
    mlp = text.split("## Ant-v4, mlp64x64")[1]     # the MLP on either side is one policy
    assert "The CPU side is ahead at every num_envs measured" in mlp and "0.50x" in mlp
    assert "CartPole" not in text
    assert physics_crossover.write(str(kind)) == str(kind / "gpu-physics" / "README.md")
    assert (kind / "gpu-physics" / "README.md").read_text() == text
    assert physics_crossover.write(str(tmp_path / "nothing")) is None
