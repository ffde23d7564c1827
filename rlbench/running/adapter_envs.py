"""The own environments of adapters whose framework cannot share the main one (`environment = NAME`, pinned in
`envs/NAME.txt` beside the adapter's module): each requirement set is built once into its own virtual
environment under $RLBENCH_VENVS, and that adapter's cells run on its interpreter (a command line in, JSON lines
out). How builds are cached and locked: docs/adapters.md, "An adapter with its own environment".
"""
import fcntl
import hashlib
import inspect
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from functools import cached_property

import rlbench

ROOT = rlbench.ROOT
READY = "rlbench-env.json"     # written last: the build finished and what it holds
PINS_VAR = "RLBENCH_ENV_PINS"   # "name=file;...": a named environment built from another pin file (bisect --package)
# "name,...": these environments' adapters run in this interpreter, whose own packages hold them (a machine with no
# network to build them, such as the lent GPU machine with its CUDA jax)
HERE_VAR = "RLBENCH_ENVS_HERE"
SHOWN = ("Collecting", "Downloading", "Installing", "Successfully", "ERROR", "error:")  # pip lines shown live


class EnvBuildError(Exception):
    """An adapter environment could not be built; the message is the reason its cells' rows carry."""


@dataclass
class AdapterEnv:
    name: str
    requirements: str                       # the pinned requirements file
    adapters: list = field(default_factory=list)

    @cached_property
    def key(self) -> str:
        try:
            with open(self.requirements, "rb") as f:
                pins = f.read()
        except FileNotFoundError:
            return "no-requirements"
        return hashlib.sha256(pins + sys.version.split()[0].encode()).hexdigest()[:12]

    @property
    def dir(self) -> str:
        return os.path.join(venvs_dir(), f"{self.name}-{self.key}")

    @property
    def python(self) -> str:
        return os.path.join(self.dir, "bin", "python")

    def state(self) -> str:
        """One line for `rlbench list` and `rlbench envs`."""
        record = self.record()
        if record:
            return f"built in {record['build_s']:.0f} s, {record['size_mb']} MB, {len(record['packages'])} packages"
        return "not built (rlbench envs --build, make install-extras)" if os.path.exists(self.requirements) \
            else "no requirements file"

    def record(self):
        """What the build left (rlbench-env.json), or None when it is not built."""
        try:
            with open(os.path.join(self.dir, READY)) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def ensure(self, stream=None) -> dict:
        """Build unless built; point its rlbench at this checkout. Returns the record."""
        stream = stream or sys.stderr
        os.makedirs(venvs_dir(), exist_ok=True)
        with open(self.dir + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            record = self.record()
            if record is None:
                record = self._build(stream)
            if record.get("rlbench_install") != install_id():  # another checkout, or its packages changed
                self._install_rlbench(stream)
                record["rlbench_install"] = install_id()
                _write_json(os.path.join(self.dir, READY), record)
            return record

    def _build(self, stream) -> dict:
        t0 = time.perf_counter()
        shutil.rmtree(self.dir, ignore_errors=True)  # what an interrupted or failed build left
        print(f"rlbench: building environment '{self.name}' for {', '.join(self.adapters) or 'its adapters'} "
              f"in {self.dir} (once; log: {self.log})", file=stream, flush=True)
        with open(self.log, "w"):
            pass
        self._run([sys.executable, "-m", "venv", self.dir], stream)
        pinned, bare = self._requirements()
        self._pip(["install", "-r", pinned], stream)
        if bare:  # after the rest, so that their declared pins pull nothing (another torch, say)
            self._pip(["install", "--no-deps", *bare], stream)
        self._install_rlbench(stream)
        freeze = subprocess.run([self.python, "-m", "pip", "freeze", "--exclude-editable"], capture_output=True,
                                text=True, check=True).stdout
        record = {"name": self.name, "requirements": os.path.relpath(self.requirements, ROOT),
                  "requirements_sha256": self.key, "python": self.python,
                  "python_version": sys.version.split()[0], "build_s": round(time.perf_counter() - t0, 1),
                  "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rlbench_install": install_id(),
                  "size_mb": round(_du(self.dir) / 2**20), "packages": _packages(freeze)}
        _write_json(os.path.join(self.dir, READY), record)
        print(f"rlbench: environment '{self.name}' built in {record['build_s']:.0f} s "
              f"({record['size_mb']} MB, {len(record['packages'])} packages)", file=stream, flush=True)
        return record

    def _requirements(self) -> tuple:
        """(a requirements file of the pinned lines, the lines marked `# no-deps`): a package whose declared
        dependencies would replace the environment's pins (pufferlib-core pins torch 2.9.0) is installed
        without them, after everything else; its file says why."""
        plain, bare = [], []
        with open(self.requirements) as f:
            for line in f:
                requirement, _, comment = line.partition("#")
                if requirement.strip() and comment.strip().startswith("no-deps"):
                    bare.append(requirement.strip())
                else:
                    plain.append(line)
        path = os.path.join(self.dir, "requirements-pinned.txt")
        with open(path, "w") as f:
            f.writelines(plain)
        return path, bare

    def _install_rlbench(self, stream):
        """This checkout, editable and without dependencies: the env's own pins stay as they are. Its build
        backend comes in pip's isolated build env, pinned by the project's constraints."""
        constraints = os.path.join(ROOT, "constraints.txt")
        extra = {"PIP_CONSTRAINT": constraints} if os.path.exists(constraints) else {}
        self._pip(["install", "--no-deps", "-e", ROOT], stream, quiet=True, env=extra)

    @property
    def log(self) -> str:
        return self.dir + ".build.log"

    def _pip(self, args, stream, quiet=False, env=None):
        self._run([self.python, "-m", "pip", "--disable-pip-version-check", *args], stream, quiet, env)

    def _run(self, cmd, stream, quiet=False, env=None):
        """Run a build step, its output to the log and pip's progress lines to `stream`."""
        with open(self.log, "a") as log:
            log.write(f"$ {' '.join(cmd)}\n")
            log.flush()
            try:
                proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        env={**os.environ, **(env or {})})
            except OSError as exc:
                raise EnvBuildError(f"environment '{self.name}' failed to build: {exc}") from None
            last = ""
            for line in proc.stdout:
                log.write(line)
                if line.strip() and (not last.startswith("ERROR") or line.startswith("ERROR")):
                    last = line.strip()
                if not quiet and line.lstrip().startswith(SHOWN):
                    print(f"rlbench: env {self.name}: {line.strip()[:150]}", file=stream, flush=True)
            if proc.wait() != 0:
                raise EnvBuildError(f"environment '{self.name}' failed to build ({last[:200]}); log: {self.log}")


def install_id() -> str:
    """This checkout and its packaging (pyproject.toml): what an env's editable rlbench must match."""
    try:
        with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
            return f"{ROOT}#{hashlib.sha256(f.read()).hexdigest()[:12]}"
    except OSError:
        return ROOT


def venvs_dir() -> str:
    return os.path.abspath(os.environ.get("RLBENCH_VENVS") or os.path.join(ROOT, ".venvs"))


def environment_of(adapter_cls):
    """The adapter's own environment, or None when it runs in the main one. $RLBENCH_ENV_PINS
    (`name=file;...`, what `rlbench bisect --package` sets) builds a named environment from another pin file;
    $RLBENCH_ENVS_HERE (`name,...`) runs a named environment's adapters in this interpreter instead."""
    name = getattr(adapter_cls, "environment", "")
    if not name or name in envs_here():
        return None
    path = pin_overrides().get(name) or os.path.join(os.path.dirname(inspect.getfile(adapter_cls)), "envs",
                                                       f"{name}.txt")
    return AdapterEnv(name, path, [adapter_cls.name])


def envs_here() -> set:
    """The environments $RLBENCH_ENVS_HERE runs in this interpreter."""
    return {name.strip() for name in os.environ.get(HERE_VAR, "").split(",") if name.strip()}


def pin_overrides() -> dict:
    pairs = (item.partition("=") for item in os.environ.get(PINS_VAR, "").split(";") if item.strip())
    return {name.strip(): path.strip() for name, _, path in pairs}


def needed(adapter_classes) -> dict:
    """name -> AdapterEnv for the adapters that have one (adapters sharing one env grouped)."""
    envs = {}
    for cls in adapter_classes:
        env = environment_of(cls)
        if env is None:
            continue
        if env.name in envs:
            envs[env.name].adapters.append(cls.name)
        else:
            envs[env.name] = env
    return envs


@dataclass
class Prepared:
    """An adapter environment as a run found it: ready (python set), or why its cells cannot run."""
    env: AdapterEnv
    python: str = None
    status: str = "ok"       # ok | unsupported (missing, not built) | error (the build failed)
    reason: str = None
    record: dict = None


def prepare(adapter_classes, build: bool = True, stream=None) -> dict:
    """Every environment the run needs, built where allowed; never raises for one that cannot be."""
    out = {}
    for name, env in needed(adapter_classes).items():
        if not os.path.exists(env.requirements):
            out[name] = Prepared(env, status="unsupported",
                                 reason=f"no requirements file for environment '{name}' ({env.requirements})")
            continue
        if not build and env.record() is None:
            out[name] = Prepared(env, status="unsupported", reason=f"environment '{name}' is not built "
                                 "(make install-extras, or run without --no-build)")
            continue
        try:
            out[name] = Prepared(env, python=env.python, record=env.ensure(stream))
        except EnvBuildError as exc:
            out[name] = Prepared(env, status="error", reason=str(exc))
    return out


def records(prepared: dict) -> dict:
    """What env.json keeps of each prepared environment (RunRecord.adapter_envs): its interpreter and
    packages, or why it cannot run."""
    return {name: p.record or {"status": p.status, "reason": p.reason} for name, p in prepared.items()}


def _packages(freeze: str) -> dict:
    pins = {}
    for line in freeze.splitlines():
        name, sep, ver = line.partition("==")
        if sep:
            pins[name.strip()] = ver.strip()
    return pins


def _du(path: str) -> int:
    total = 0
    for base, _, files in os.walk(path):
        for f in files:
            p = os.path.join(base, f)
            if not os.path.islink(p):
                total += os.path.getsize(p)
    return total


def _write_json(path: str, data: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2)
    os.replace(tmp, path)


def build_all(envs, jobs: int) -> list:
    """Build the environments not built yet, `jobs` at a time (each build is its own pip processes; the lock
    in ensure() keeps two builders of one environment from racing); returns the names that failed, each said
    on stderr."""
    from concurrent.futures import ThreadPoolExecutor

    def build(env):
        try:
            env.ensure()
            return None
        except EnvBuildError as exc:
            print(f"rlbench: {exc}", file=sys.stderr, flush=True)
            return env.name
    with ThreadPoolExecutor(max(jobs, 1)) as pool:
        return [name for name in pool.map(build, envs) if name]
