"""The device kit: rlbench's GPU and 16-core checks, prepared here for a lent GPU machine that is bare (no
gymnasium, gymnax, envpool or plotly, no network) and lent for minutes, so that its time goes to measuring.

    python scripts/device_kit.py build [--rehearse] [--parts gpu-policy,gpu-jax,...,tune16] [--out DIR]
    python scripts/device_kit.py unpack FILES_AT --kind nvidia-h100-x1      (what came back -> reports/reference)

`build` (`make device-kit`) downloads, for each part, the wheels that machine lacks (pinned by constraints.txt,
for its Python 3.12, manylinux) into a git-ignored folder, each carried as WHEEL.xz (its entries stored, then
xz: EnvPool's 53 MB wheel travels as 35 MB, leaving room for a checkout that grows with committed reports),
checks that the checkout plus that folder fit the 64 MiB one call carries, and prints the calls to make;
`scripts/device_run.sh PART` is what runs there. A part over one call (gpu-warp: warp-lang packs to 100 MB) is
split: its largest wheels cut into pieces carried by stage calls made just before the part's own, which hold them
on the machine (`device_run.sh PART --stage S`; the machine keeps them while it stays warm). `--rehearse` builds
the same for this machine's Python, for `scripts/device_run.sh PART --rehearse` (CI), which holds the stages too.

The subcommands device_run.sh uses (plain python3, nothing but the standard library, except rehearse-suite):
`wheels KIT DEST --held DIR` (the kit's WHEEL.xz files, whole or from their pieces, back to the wheels pip
installs), `hold STAGE DIR` (a stage call's pieces, checked, kept for the part's call), `imports KIT` (the part's
modules imported before its suite runs, so a wheel the kit lacks fails in seconds), `provenance KIT` (the commit the
kit was made at, whether the source changed since, and the run's wall limit), `rehearse-suite SUITE OUT` (the
part's cells at tiny sizes), `guard SITE DIR` (a rehearsal's sitecustomize: what the GPU machine lacks cannot
be imported from this interpreter's site-packages either).
"""
import argparse
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

from reference_index import write_index

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KIT, REHEARSAL_KIT = ".device-kit", ".device-kit-rehearse"
DEVICE_PYTHON = "3.12"
CARRY_MIB, FILE_MIB = 64, 16          # what one call takes along, and each file that comes back
CARRY_SPARE = 2**20                   # room left in each call for kit.json, stage.json and rounding
PACK_CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "rlbench",
                          "device-kit")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64")
GYMNASIUM = ("gymnasium", "farama-notifications")
# device_run.sh's wall limit on a part's run unless DEVICE_WALL_S says otherwise: above the 268-294 s gpu-torch's
# cells took on an H100 and the ~336 s gpu-jax's would have on an H200 (its slower host cut the last at 330 s);
# two parts and a start still fit one session's 15 device minutes
WALL_S = 360
CALL_S = WALL_S + 120   # the seconds a part's call may take: the wall limit, the install and packing
STAGE_CALL_S = 120      # a stage call: its pieces checked and held
# part -> what it carries: the distributions the GPU machine lacks, each pinned by constraints.txt
PARTS = {
    # real policies on Pong through EnvPool and gymnasium's Atari (ale-py, 3 MB, carries its ROMs)
    "gpu-policy": GYMNASIUM + ("envpool", "dm-env", "dm-tree", "optree", "types-protobuf", "ale-py"),
    "gpu-jax": GYMNASIUM + ("gymnax", "plotly"),
    "gpu-torch": GYMNASIUM + ("plotly",),
    # MJX on gymnasium's MuJoCo model (run in the machine's interpreter: RLBENCH_ENVS_HERE=brax) and mujoco.rollout;
    # MuJoCo 4.0.0 is three wheels (core 9.7 MB, studio 12.8 MB), leaving no room for EnvPool or plotly
    "gpu-physics": GYMNASIUM + ("mujoco", "mujoco-core", "mujoco-studio", "glfw", "pyopengl", "mujoco-mjx",
                                "trimesh"),
    # MuJoCo Warp on gymnasium's MuJoCo model: warp-lang packs to 100 MB, so this part is split over stage calls
    "gpu-warp": GYMNASIUM + ("mujoco", "mujoco-core", "mujoco-studio", "glfw", "pyopengl", "mujoco-warp",
                             "warp-lang"),
    # Brax's PPO on Playground's CheetahRun (MJX) on the GPU against CleanRL-style PPO on EnvPool's dm_control port
    "gpu-train": GYMNASIUM + ("envpool", "dm-env", "dm-tree", "optree", "types-protobuf", "mujoco", "mujoco-core",
                              "mujoco-studio", "glfw", "pyopengl", "mujoco-mjx", "trimesh", "brax", "playground",
                              "ml-collections", "jaxopt", "tensorboardx", "lxml"),
    # suites/device/tune16.sh: check-tune's panel strategies (serial, rlpyt, gymnasium, sb3-subproc)
    "tune16": GYMNASIUM + ("stable-baselines3",),
    # EnvPool (53 MB) leaves no room for plotly (10 MB): this part's page is made back home
    # (nor for ale-py: EnvPool's Atari rows run on its own emulator and the ROMs of the trimmed assets)
    "cores16": GYMNASIUM + ("stable-baselines3", "envpool", "dm-env", "dm-tree", "optree", "types-protobuf"),
}
# part -> {asset wheel: the folders kept of it}: EnvPool's asset packages (62 MB and more) trimmed to what the
# part's envs need and EnvPool's registration reads on import, in PART/envpool-assets (ENVPOOL_ASSETS_PATH)
ENVPOOL_REGISTERED = {"envpool-assets": ("atari/roms/", "mujoco/assets_gym/", "vizdoom/maps/"),
                      "envpool-assets-mujoco-large": ("mujoco/myosuite/assets/metadata/",)}
TRIMMED = {"cores16": ENVPOOL_REGISTERED, "gpu-policy": ENVPOOL_REGISTERED,
           "gpu-train": {**ENVPOOL_REGISTERED, "envpool-assets": ENVPOOL_REGISTERED["envpool-assets"] + (
               "mujoco/assets_dmc/cheetah.xml", "mujoco/assets_dmc/common/")}}
# part -> the modules its cells import beyond the adapters' names, imported on the machine before the suite runs:
# a wheel the kit lacks fails the call in seconds, not each cell of it
IMPORTS = {"gpu-physics": ("mujoco.mjx", "trimesh"), "gpu-warp": ("mujoco_warp",),
           "gpu-train": ("envpool", "mujoco.mjx", "brax.training.agents.ppo.train", "mujoco_playground")}
# part -> its wall limit where WALL_S is too short (gpu-train: two learners, 2 repeats of 45 s, and Brax's PPO
# compiling in each of its processes: 243 s on 2 CPU cores under jax 0.10.2, 115 s under 0.9.2; its call takes
# the 600 s one command may have; gpu-physics: 17 cells, the eight mjx ones on the GPU compiling in their first
# repeat, the second loading JAX's cache; gpu-jax: 33 cells, 31.5 of which took the H200 330 s)
PART_WALL_S = {"gpu-train": 540, "gpu-physics": 420, "gpu-jax": 420}
CALL_LIMIT_S = 600   # the most one device command may run
# What the GPU machines' image holds (the device tool's KINDS.md, read 2026-11-17): a rehearsal may import these
# from this interpreter; anything else only from the kit's wheels.
DEVICE_HAS = set("""absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch
build certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core
cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock
flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx
huggingface-hub humanize hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin
jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities linear-operator lineax llvmlite
lxml markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict
multipledispatch mypy-extensions nanobind narwhals networkx ninja numba numba-cuda numpy numpyro onnx onnx-ir
onnxruntime onnxscript opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging
pandas pathspec patsy peft pillow pip pluggy portalocker prometheus-client propcache protobuf psutil pyarrow
pybind11 py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov
pytest-mock pytest-timeout pytest-xdist python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu
safetensors scikit-build-core scikit-image scikit-learn scipy seaborn sentencepiece sentence-transformers
setuptools shellingham simplejson six sortedcontainers statsmodels sympy tabulate tensorboard
tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm tokenizers toolz torch torchaudio
torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers treescope triton typer typing-extensions
typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp""".split())
SOURCE = ("rlbench", "adapters", "suites/device", "scripts/device_run.sh", "scripts/device_kit.py")
# a rehearsal: every cell of the part, at sizes this machine runs in a minute or two
REHEARSAL = {"repeats": 1, "warmup_s": 0.0, "warmup_units": 1, "duration_s": 0.05, "min_units": 2}
REHEARSAL_NUM_ENVS, REHEARSAL_OPTION = 16, 4   # the largest num_envs and integer option value kept


def norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def pins() -> dict:
    out = {}
    with open(os.path.join(ROOT, "constraints.txt")) as f:
        for line in f:
            line = line.split("#")[0].strip()
            if "==" in line:
                name, version = line.split("==", 1)
                out[norm(name)] = version.strip()
    return out


def carried_files() -> list:
    """What a call takes along besides the kit: tracked files and untracked ones git does not ignore."""
    out = subprocess.run(["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         capture_output=True, check=True).stdout
    return [p for p in out.decode().split("\0") if p and os.path.isfile(os.path.join(ROOT, p))]


def source_sha256() -> str:
    """The code a part runs: rlbench, the adapters, the device suites and these scripts (bytes and paths)."""
    h = hashlib.sha256()
    for top in SOURCE:
        path = os.path.join(ROOT, top)
        files = [path] if os.path.isfile(path) else sorted(
            os.path.join(d, f) for d, dirs, fs in os.walk(path) for f in fs
            if "__pycache__" not in d and not f.endswith(".pyc"))
        for f in files:
            h.update(os.path.relpath(f, ROOT).encode() + b"\0")
            with open(f, "rb") as fh:
                h.update(fh.read())
    return h.hexdigest()


def git(*args):
    r = subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


def download(names, version: str, dest: str) -> list:
    """The pinned wheels of `names` for CPython `version` on x86-64 Linux, no dependencies (each is named)."""
    have = pins()
    missing = [n for n in names if norm(n) not in have]
    if missing:
        raise SystemExit(f"device-kit: {missing[0]} has no pin in constraints.txt")
    os.makedirs(dest, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version",
           version, "--implementation", "cp", "-d", dest]
    for p in PLATFORMS:
        cmd += ["--platform", p]
    subprocess.run(cmd + [f"{n}=={have[norm(n)]}" for n in names], check=True)
    return sorted(f for f in os.listdir(dest) if f.endswith(".whl"))


def sha256_of(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def pack(wheel: str, cache: str = PACK_CACHE) -> str:
    """WHEEL -> WHEEL.xz: the same wheel with its entries stored (a deflated zip leaves xz nothing to find),
    compressed whole; the original removed. pip installs the stored wheel `wheels` gives back as it is. Packing
    warp-lang's 149 MB takes minutes, so a packed wheel is kept in CACHE by the wheel's sha256 (a rehearsal's kit
    and the device's share a py3-none wheel), and xz runs on every core where the xz program is here."""
    import lzma
    import zipfile
    cached = os.path.join(cache, f"{sha256_of(wheel)}.xz")
    if not os.path.exists(cached):
        os.makedirs(cache, exist_ok=True)
        stored, packing = wheel + ".stored", f"{cached}.{os.getpid()}"
        with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(stored, "w", zipfile.ZIP_STORED) as dst:
            for info in src.infolist():
                dst.writestr(info, src.read(info), compress_type=zipfile.ZIP_STORED)
        if shutil.which("xz"):
            with open(packing, "wb") as out:
                subprocess.run(["xz", "-6", "-T0", "-c", stored], stdout=out, check=True)
        else:
            with open(stored, "rb") as src, lzma.open(packing, "wb", preset=6) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        os.remove(stored)
        os.replace(packing, cached)
    shutil.copyfile(cached, wheel + ".xz")
    os.remove(wheel)
    return wheel + ".xz"


def split(folder: str, room: int) -> list:
    """What of a part's kit one call cannot carry (`room` bytes beside the checkout), moved out of FOLDER: the
    smallest files stay whole, the largest wheels are cut into pieces, those of the stream's last `room` bytes
    left over in FOLDER/pieces and the rest in stage folders FOLDER.stage1, ... of at most `room` each (about
    equal), each carried by a call of its own before the part's (`device_run.sh PART --stage S` holds its pieces
    on that machine, which keeps them while it stays warm). Returns the pieces' records for kit.json, in order."""
    import glob
    for old in glob.glob(f"{glob.escape(folder)}.stage*") + [os.path.join(folder, "pieces")]:
        shutil.rmtree(old, ignore_errors=True)
    files = sorted(os.path.relpath(os.path.join(d, f), folder) for d, _, fs in os.walk(folder) for f in fs
                   if f != "kit.json")
    size = {f: os.path.getsize(os.path.join(folder, f)) for f in files}
    left, over = room, []
    for f in sorted(files, key=lambda f: (not f.startswith("wheels/"), size[f])):   # the assets stay whole
        if size[f] <= left or not f.startswith("wheels/"):
            left -= size[f]
        else:
            over.append(f)
    if not over:
        return []
    if left < 0:
        raise SystemExit(f"device-kit: {os.path.basename(folder)}: its whole files are over what one call carries")
    total = sum(size[f] for f in over)
    last = min(left, total)                        # the part's own call takes the stream's end
    stages = -(-(total - last) // room)
    each = -(-(total - last) // stages) if stages else 0
    bounds = [min(each * s, total - last) for s in range(stages + 1)] + [total]   # call s: [bounds[s], bounds[s+1])
    pieces, at = [], 0
    for f in over:
        with open(os.path.join(folder, f), "rb") as src:
            end, index = at + size[f], 0
            while at < end:
                call = next(s for s in range(len(bounds) - 1) if bounds[s] <= at < bounds[s + 1])
                n = min(end, bounds[call + 1]) - at
                data = src.read(n)
                stage = call + 1 if call < stages else 0
                name = f"{os.path.basename(f)}.{index:03d}"
                dest = f"{folder}.stage{stage}" if stage else os.path.join(folder, "pieces")
                os.makedirs(dest, exist_ok=True)
                with open(os.path.join(dest, name), "wb") as out:
                    out.write(data)
                pieces.append({"file": f, "piece": name, "stage": stage, "bytes": n,
                               "sha256": hashlib.sha256(data).hexdigest()})
                at, index = at + n, index + 1
        os.remove(os.path.join(folder, f))
    for s in range(1, stages + 1):
        with open(os.path.join(f"{folder}.stage{s}", "stage.json"), "w") as out:
            json.dump({"part": os.path.basename(folder), "stage": s, "stages": stages,
                       "pieces": [p for p in pieces if p["stage"] == s]}, out, indent=1)
    return pieces


def intact(path: str, sha256: str, listed_in: str) -> bool:
    """Whether a piece's bytes are those the kit recorded; says which one is not."""
    if sha256_of(path) == sha256:
        return True
    print(f"device_run: {path}: its bytes differ from {listed_in}'s sha256 (make device-kit again)", file=sys.stderr)
    return False


def hold(args) -> int:
    """A stage call's pieces, checked against their sha256, copied into HELD (where the part's call finds them)."""
    try:
        with open(os.path.join(args.stage, "stage.json")) as f:
            stage = json.load(f)
    except FileNotFoundError:
        print(f"device_run: no stage in {args.stage} (make device-kit makes the stage folders)", file=sys.stderr)
        return 2
    os.makedirs(args.held, exist_ok=True)
    for p in stage["pieces"]:
        src = os.path.join(args.stage, p["piece"])
        if not intact(src, p["sha256"], "stage.json"):
            return 2
        shutil.copyfile(src, os.path.join(args.held, p["piece"]))
    mib = sum(p["bytes"] for p in stage["pieces"]) / 2**20
    print(f"device_run: {stage['part']}: stage {stage['stage']} of {stage['stages']} held ({mib:.1f} MiB in "
          f"{args.held}); make the next call now: the machine keeps them only while it stays warm")
    return 0


class Pieces(io.RawIOBase):
    """A split file's pieces, in order, read as the file."""

    def __init__(self, paths: list):
        self.todo, self.f = list(paths), None

    def readable(self):
        return True

    def readinto(self, b):
        while self.todo or self.f:
            if self.f is None:
                self.f = open(self.todo.pop(0), "rb")
            n = self.f.readinto(b)
            if n:
                return n
            self.f.close()
            self.f = None
        return 0


def unpack_wheels(args) -> int:
    """The kit's WHEEL.xz files, decompressed into DEST as the wheels they were (standard library only); a wheel
    split over stage calls is read from its pieces: the part's own in KIT/pieces, the stage calls' in HELD."""
    import lzma
    os.makedirs(args.dest, exist_ok=True)
    folder = os.path.join(args.kit, "wheels")
    packed = {f: [os.path.join(folder, f)] for f in sorted(os.listdir(folder)) if f.endswith(".whl.xz")}
    kit_json = os.path.join(args.kit, "kit.json")
    kit = json.load(open(kit_json)) if os.path.exists(kit_json) else {}
    for p in kit.get("pieces", []):
        where = os.path.join(args.held or "", p["piece"]) if p["stage"] else os.path.join(args.kit, "pieces",
                                                                                            p["piece"])
        if not os.path.exists(where):
            print(f"device_run: {kit['part']}'s stage {p['stage']} is not on this machine (no {where}): make its "
                  "stage calls and then this one back to back, while the machine stays warm", file=sys.stderr)
            return 2
        if not intact(where, p["sha256"], "kit.json"):
            return 2
        packed.setdefault(os.path.basename(p["file"]), []).append(where)
    if not packed:
        print(f"device_run: no wheels in {folder} (make device-kit packs them as WHEEL.xz)", file=sys.stderr)
        return 2
    for name, paths in packed.items():
        raw = io.BufferedReader(Pieces(paths), 1 << 20) if len(paths) > 1 else paths[0]
        with lzma.open(raw, "rb") as src, open(os.path.join(args.dest, name[:-3]), "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    return 0


def trim(part: str, version: str, folder: str) -> int:
    """PART/envpool-assets.tar.gz: the kept folders of TRIMMED[part]'s asset wheels (their package folder
    stripped), compressed; its bytes."""
    import tempfile
    import zipfile
    dest = os.path.join(folder, "envpool-assets.tar.gz")
    if os.path.exists(dest):
        os.remove(dest)
    if part not in TRIMMED:
        return 0
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(dest, "w:gz") as tar:
        for name, keep in TRIMMED[part].items():
            wheel = os.path.join(tmp, download([name], version, tmp)[-1])
            with zipfile.ZipFile(wheel) as z:
                for info in z.infolist():
                    inner = info.filename.split("/", 1)[-1]
                    if info.is_dir() or not inner.startswith(keep):
                        continue
                    entry = tarfile.TarInfo(f"envpool-assets/{inner}")
                    entry.size = info.file_size
                    with z.open(info) as src:
                        tar.addfile(entry, src)
            os.remove(wheel)
    return os.path.getsize(dest)


def build(args) -> int:
    parts = args.parts.split(",") if args.parts else list(PARTS)
    bad = [p for p in parts if p not in PARTS]
    if bad:
        print(f"device-kit: unknown part '{bad[0]}' (valid: {', '.join(PARTS)})", file=sys.stderr)
        return 2
    version = f"{sys.version_info.major}.{sys.version_info.minor}" if args.rehearse else DEVICE_PYTHON
    out = os.path.join(ROOT, args.out or (REHEARSAL_KIT if args.rehearse else KIT))
    tree = sum(os.path.getsize(os.path.join(ROOT, p)) for p in carried_files())
    commit, dirty = git("rev-parse", "HEAD"), bool(git("status", "--porcelain", "--untracked-files=no"))
    source = source_sha256()
    calls, too_big = [], []
    room = int(args.carry_mib * 2**20) - tree - CARRY_SPARE
    for part in parts:
        names = PARTS[part]
        folder = os.path.join(out, part)
        wheels_dir = os.path.join(folder, "wheels")
        if os.path.isdir(wheels_dir):  # one version of each: a wheel left from an older pin would clash
            for f in os.listdir(wheels_dir):
                os.remove(os.path.join(wheels_dir, f))
        wheels = [os.path.basename(pack(os.path.join(wheels_dir, w))) for w in download(names, version, wheels_dir)]
        wheel_bytes = {w: os.path.getsize(os.path.join(wheels_dir, w)) for w in wheels}
        kit_bytes = sum(wheel_bytes.values()) + trim(part, version, folder)
        pieces = split(folder, room)
        stages = max((p["stage"] for p in pieces), default=0)
        carried = [(f"{folder}.stage{s}", sum(p["bytes"] for p in pieces if p["stage"] == s))
                   for s in range(1, stages + 1)]
        carried.append((folder, kit_bytes - sum(b for _, b in carried)))
        suite = next(f"suites/device/{part}{ext}" for ext in (".toml", ".sh")
                     if os.path.isfile(os.path.join(ROOT, "suites", "device", part + ext)))
        manifest = {"part": part, "suite": suite, "python": version,
                    "commit": commit, "dirty": dirty, "source_sha256": source,
                    "wheels": [{"file": w, "bytes": b} for w, b in wheel_bytes.items()],
                    "trimmed": {k: list(v) for k, v in TRIMMED.get(part, {}).items()},
                    "pieces": pieces, "stages": stages, "imports": list(IMPORTS.get(part, ())),
                    "wall_s": PART_WALL_S.get(part, WALL_S),
                    "calls": [{"carry": os.path.relpath(f, ROOT), "mib": round((tree + b) / 2**20, 2)}
                              for f, b in carried],
                    "tree_mib": round(tree / 2**20, 2), "carried_mib": round((tree + carried[-1][1]) / 2**20, 2),
                    "carry_limit_mib": args.carry_mib, "call_timeout_s": call_s(part),
                    "made_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        with open(os.path.join(folder, "kit.json"), "w") as f:
            json.dump(manifest, f, indent=1)
        over = max(tree + b for _, b in carried) / 2**20 > args.carry_mib
        print(f"device-kit: {part}: {len(wheels)} wheels{' and trimmed assets' if part in TRIMMED else ''}, "
              f"{kit_bytes / 2**20:.1f} MiB; with the checkout "
              + (f"{(tree + kit_bytes) / 2**20:.1f} of {args.carry_mib:g} MiB" if not stages else
                 f"{stages + 1} calls of {', '.join(f'{(tree + b) / 2**20:.1f}' for _, b in carried)} "
                 f"of {args.carry_mib:g} MiB each"), file=sys.stderr)
        if over:
            too_big.append(part)
        calls.append((part, [os.path.relpath(f, ROOT) for f, _ in carried]))
    if too_big:
        print(f"device-kit: {', '.join(too_big)}: over the {args.carry_mib:g} MiB one call carries", file=sys.stderr)
        return 2
    if args.rehearse:
        print("Rehearse each part here (a part's stage calls are held first, as there):")
        for part, _ in calls:
            print(f"  bash scripts/device_run.sh {part} --rehearse")
        return 0
    print(f"Kit ready in {os.path.relpath(out, ROOT)} (commit {(commit or '?')[:10]}{', dirty' if dirty else ''}). "
          f"On a lent GPU machine, one call per part, in this order (each runs at most DEVICE_WALL_S = {WALL_S} s "
          "plus its install and packing; a session's 15 device minutes hold two, and the next session with a "
          "machine runs the rest: reports/reference/<kind>/README.md lists what ran). A part over what one call "
          "carries has stage calls first: make them and its own call back to back (the machine keeps what they "
          "leave only while it stays warm):")
    for part, folders in calls:
        for s, folder in enumerate(folders[:-1], 1):
            print(f'  run(command="bash scripts/device_run.sh {part} --stage {s}", carry=["{folder}"], '
                  f'timeout_s={STAGE_CALL_S})')
        print(f'  run(command="bash scripts/device_run.sh {part}", carry=["{folders[-1]}"], timeout_s={call_s(part)})')
    print("then give_back, and here, with each reply's files_at and device kind:\n"
          "  python scripts/device_kit.py unpack FILES_AT --kind KIND")
    return 0


def call_s(part: str) -> int:
    """The seconds a part's call may take: its wall limit, the install and packing (at most CALL_LIMIT_S)."""
    return min(PART_WALL_S.get(part, WALL_S) + CALL_S - WALL_S, CALL_LIMIT_S)


def imports(args) -> int:
    """The part's modules imported (kit.json's imports), as the cells will: one line naming what is missing."""
    import importlib
    with open(os.path.join(args.kit, "kit.json")) as f:
        kit = json.load(f)
    for name in kit.get("imports", []):
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - whatever stops the import stops the part's cells
            print(f"device_run: {kit['part']}: importing {name} failed: {type(exc).__name__}: {exc} (the kit lacks "
                  "a wheel: add it to PARTS in scripts/device_kit.py)", file=sys.stderr)
            return 2
    return 0


def provenance(args) -> int:
    """Shell assignments for device_run.sh: the commit the kit was made at, dirty when the source differs, and
    the wall limit (DEVICE_WALL_S where set)."""
    with open(os.path.join(args.kit, "kit.json")) as f:
        kit = json.load(f)
    dirty = kit.get("dirty") or kit.get("source_sha256") != source_sha256()
    print(f"export RLBENCH_GIT_COMMIT={kit.get('commit') or 'unknown'} RLBENCH_GIT_DIRTY={int(bool(dirty))}\n"
          f"wall_s=${{DEVICE_WALL_S:-{kit.get('wall_s', WALL_S)}}}")
    return 0


def shrink(values, cap: int):
    """A list axis at rehearsal size: its first two values, integers capped."""
    if not isinstance(values, list):
        return values
    kept = []
    for v in values:
        v = min(v, cap) if isinstance(v, int) and not isinstance(v, bool) else v
        if v not in kept:
            kept.append(v)
    return kept[:2]


# what puts a cell on the GPU: its policy's device, or one of these options' values
GPU_OPTIONS = {"platform": "gpu", "device": "cuda", "backend": "nccl"}


def gpu_policy(policy: str) -> bool:
    """`cnn:device=cuda`, `mlp:hidden=64,device=cuda:1`: a policy string whose device is a GPU."""
    fields = policy.partition(":")[2].split(",")
    return any(f.strip().startswith("device=cuda") for f in fields)


def cpu_cells_only(sweep: dict) -> bool:
    """SWEEP without its GPU cells (policies on cuda, adapters' GPU option values; an adapter left with no value of
    such an option leaves the sweep): what a CPU machine can run of it. Whether anything is left."""
    if isinstance(sweep.get("policy"), list):
        sweep["policy"] = [p for p in sweep["policy"] if not gpu_policy(p)]
        if not sweep["policy"]:
            return False
    elif isinstance(sweep.get("policy"), str) and gpu_policy(sweep["policy"]):
        return False
    for adapter, opts in list(sweep.get("options", {}).items()):
        for key, gpu in GPU_OPTIONS.items():
            if key not in opts:
                continue
            values = [v for v in (opts[key] if isinstance(opts[key], list) else [opts[key]]) if v != gpu]
            if values:
                opts[key] = values
            else:   # only GPU values: this adapter's cells are all on the GPU
                sweep["adapters"] = [a for a in sweep["adapters"] if a != adapter]
                del sweep["options"][adapter]
                break
    return bool(sweep["adapters"])


def rehearse_suite(args) -> int:
    """The part's suite at tiny sizes with every sweep's CPU cells kept (the same adapters, envs, policies and
    options); its GPU cells are left out (here they could only say `no CUDA device`, after an interpreter's start
    each: 31 of the parts' 75). Loading the part's own suite still validates its GPU cells' options (the
    non-slow tests load each)."""
    import tomllib

    import tomli_w
    with open(args.suite, "rb") as f:
        doc = tomllib.load(f)
    doc["name"] = f"{doc.get('name', 'device')}-rehearsal"
    doc["protocol"] = {**doc.get("protocol", {}), **REHEARSAL}
    if "limits" in doc:
        doc["limits"] = {**doc["limits"], "memcpy_mb": 16, "disk_mb": 16, "repeats": 1}
    doc["sweep"] = [sweep for sweep in doc["sweep"] if cpu_cells_only(sweep)]
    for sweep in doc["sweep"]:
        sweep["num_envs"] = shrink(sweep["num_envs"], REHEARSAL_NUM_ENVS)
        for adapter, opts in sweep.get("options", {}).items():
            sweep["options"][adapter] = {k: shrink(v, REHEARSAL_OPTION) for k, v in opts.items()}
        sweep.get("protocol", {}).pop("duration_s", None)
        for key in ("warmup_units", "min_units"):
            if key in sweep.get("protocol", {}):
                sweep["protocol"][key] = REHEARSAL[key]
    with open(args.out, "wb") as f:
        tomli_w.dump(doc, f)
    return 0


GUARD = '''"""The device kit's rehearsal: this interpreter's site-packages seen as the GPU machine has them."""
import sys

sys.path[:] = [{filtered!r} if p in {real!r} else p for p in sys.path]
# an editable install of rlbench here would answer for the checkout: there, only the site folder's copy exists
sys.meta_path[:] = [f for f in sys.meta_path if not type(f).__module__.startswith("__editable__")]
sys.path_hooks[:] = [h for h in sys.path_hooks if not getattr(h, "__module__", "").startswith("__editable__")]
sys.path_importer_cache.clear()
'''


def device_closure() -> set:
    """DEVICE_HAS and what those distributions require, as installed here (extras left out): a package the
    image holds works there, so its own dependencies are met there in some version."""
    import re
    from importlib.metadata import PackageNotFoundError, requires
    seen, todo = set(), list(DEVICE_HAS)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            reqs = requires(name) or []
        except PackageNotFoundError:
            continue
        for req in reqs:
            if "extra ==" not in req:
                todo.append(norm(re.split(r"[\s;<>=!~\[(]", req, maxsplit=1)[0]))
    return seen


def guard(args) -> int:
    """A rehearsal's sitecustomize.py (in DIR), which puts, in place of this interpreter's site-packages, a folder
    of links to what in it the GPU machine's image holds too: a distribution it lacks is found in the kit's site
    folder or nowhere, as there (an optional import probed with find_spec sees it missing, as there)."""
    import site
    from importlib.metadata import distributions
    there = device_closure()
    real = [p for p in site.getsitepackages() if os.path.isdir(p)]
    hidden = set()   # top-level entries (packages, modules, .dist-info) of distributions the image lacks
    for dist in distributions():
        if norm(dist.metadata["Name"] or "") in there:
            continue
        for f in dist.files or ():
            top = f.parts[0] if f.parts else ""
            if top and top not in ("..", "__pycache__") and not top.endswith(".pth"):
                hidden.add(top)
    for dist in distributions():  # an entry shared with a distribution the image holds stays
        if norm(dist.metadata["Name"] or "") in there:
            hidden -= {f.parts[0] for f in dist.files or () if f.parts}
    filtered = os.path.join(os.path.abspath(args.dir), "site-packages")
    os.makedirs(filtered, exist_ok=True)
    for root in real:
        for name in os.listdir(root):
            stem = name[:-3] if name.endswith(".py") else name.split(".cpython")[0] if ".cpython" in name else name
            if name in hidden or stem in hidden or os.path.lexists(os.path.join(filtered, name)):
                continue
            os.symlink(os.path.join(root, name), os.path.join(filtered, name))
    with open(os.path.join(args.dir, "sitecustomize.py"), "w") as f:
        f.write(GUARD.format(filtered=filtered, real=real))
    return 0


def run_folders(folder: str) -> list:
    """The run folders (results.jsonl beside env.json) in a part's folder: itself, or those under it."""
    return sorted(d for d, _, files in os.walk(folder) if "results.jsonl" in files and "env.json" in files)


def unpack(args) -> int:
    """Each part's run folder that came back -> reports/reference/<kind>/<part>/, its page made here, and the
    kind's README table (what ran, at which commit, on which GPU)."""
    found = sorted(f for f in os.listdir(args.files_at) if f.endswith(".tar.gz"))
    if not found:
        print(f"device-kit: no PART.tar.gz in {args.files_at}", file=sys.stderr)
        return 2
    folder = getattr(args, "folder", None)
    if folder and (len(found) != 1 or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", folder)):
        print(f"device-kit: --folder {folder!r} needs one archive in {args.files_at} (found {len(found)}) and a "
              "plain folder name (letters, digits, '.', '_', '-')", file=sys.stderr)
        return 2
    dest_root = os.path.join(ROOT, "reports", "reference", args.kind)
    for name in found:
        part = name[:-len(".tar.gz")]
        if part not in PARTS:
            print(f"device-kit: {name}: unknown part '{part}' (valid: {', '.join(PARTS)})", file=sys.stderr)
            return 2
        dest = os.path.join(dest_root, folder or part)
        with tempfile.TemporaryDirectory() as tmp:
            with tarfile.open(os.path.join(args.files_at, name)) as tar:
                tar.extractall(tmp, filter="data")  # the archive holds one folder named after the part
            os.makedirs(dest_root, exist_ok=True)
            if os.path.isdir(dest):   # replaced only once the archive has unpacked
                shutil.rmtree(dest)
            shutil.move(os.path.join(tmp, part), dest)
        for run in run_folders(dest):   # a script part (tune16) holds several run folders
            subprocess.run([sys.executable, "-m", "rlbench.cli", "report", run], check=False)
    write_index(dest_root, f"Device kit results: {args.kind}",
                "Made by `scripts/device_run.sh PART` on a lent machine, unpacked with "
                "`python scripts/device_kit.py unpack`.")
    import physics_crossover  # pandas: here, never on the device
    crossover = physics_crossover.write(dest_root) if {f[:-7] for f in found} & set(physics_crossover.PARTS) else None
    print(f"device-kit: {', '.join(f[:-7] for f in found)} in {os.path.relpath(dest_root, ROOT)}"
          + (f"; the crossover in {os.path.relpath(crossover, ROOT)}" if crossover else ""))
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="download each part's wheels and print the calls")
    b.add_argument("--rehearse", action="store_true", help="for this machine's Python (a CPU rehearsal)")
    b.add_argument("--parts", help=f"comma-separated (default: all of {', '.join(PARTS)})")
    b.add_argument("--out", help=f"kit folder (default {KIT}, or {REHEARSAL_KIT} with --rehearse)")
    b.add_argument("--carry-mib", type=float, default=CARRY_MIB,
                   help=f"what one call carries, checkout included (default {CARRY_MIB}): a part over it is split "
                        "over stage calls")
    b.set_defaults(fn=build)
    w = sub.add_parser("wheels", help="the kit's WHEEL.xz files -> DEST/WHEEL (device_run.sh)")
    w.add_argument("kit")
    w.add_argument("dest")
    w.add_argument("--held", help="where the stage calls held their pieces (device_run.sh: KIT.held)")
    w.set_defaults(fn=unpack_wheels)
    m = sub.add_parser("imports", help="the part's modules imported from the kit (device_run.sh)")
    m.add_argument("kit")
    m.set_defaults(fn=imports)
    h = sub.add_parser("hold", help="a stage call's pieces -> HELD, checked (device_run.sh PART --stage S)")
    h.add_argument("stage")
    h.add_argument("held")
    h.set_defaults(fn=hold)
    v = sub.add_parser("provenance")
    v.add_argument("kit")
    v.set_defaults(fn=provenance)
    r = sub.add_parser("rehearse-suite")
    r.add_argument("suite")
    r.add_argument("out")
    r.set_defaults(fn=rehearse_suite)
    g = sub.add_parser("guard")
    g.add_argument("site")
    g.add_argument("dir")
    g.set_defaults(fn=guard)
    u = sub.add_parser("unpack", help="what came back -> reports/reference/<kind>/<part>/")
    u.add_argument("files_at")
    u.add_argument("--kind", required=True, help="the device kind the reply named (nvidia-h100-x1, nvidia-h200)")
    u.add_argument("--folder", help="one part's rerun (device_run.sh PART --only GLOB): its folder name, so the "
                   "part's full run stays beside it")
    u.set_defaults(fn=unpack)
    args = p.parse_args()
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
