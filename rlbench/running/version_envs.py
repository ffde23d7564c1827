"""A library at another released version, for `rlbench bisect --package`: the released versions of a package
between two of them, and an environment in which a cell runs with that version and everything else as pinned.

A cell of the main environment runs in an overlay: a bare virtual environment holding only the package at that
version (and any dependency it cannot share with the main pins), whose site-packages reach the main
environment's after its own (a `.pth` that calls site.addsitedir, so the main env's editable rlbench comes too).
Building one takes seconds, not the gigabytes of a copy of the main pins. A cell of an adapter with its own
environment runs in that environment built from its pin file with the package's line swapped
(adapter_envs.PINS_VAR, read by adapter_envs.environment_of). Both are cached under $RLBENCH_VENVS by what
they hold.
"""
import hashlib
import os
import re
import subprocess
import sys
import sysconfig
import time

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from rlbench.errors import UsageError
from rlbench.running.adapter_envs import READY, ROOT, AdapterEnv, _packages, _write_json, install_id, venvs_dir


def released(package: str, first: str, last: str) -> list:
    """The final releases of `package` from `first` to `last`, oldest first, as the package index the user's pip
    is configured with lists them (`pip index versions`: yanked releases and pre-releases left out)."""
    done = subprocess.run([sys.executable, "-m", "pip", "index", "versions", package, "--disable-pip-version-check"],
                          capture_output=True, text=True)
    found = re.search(r"^Available versions: (.+)$", done.stdout, re.M)
    if done.returncode or not found:
        raise UsageError(f"bisect: --package {package}: no released version found by pip "
                         f"({((done.stderr or done.stdout).strip().splitlines() or ['no output'])[-1]}); "
                         "valid: a package on the index pip is configured with")
    versions = sorted({_version(v.strip()) for v in found.group(1).split(",")})
    shown = ", ".join(str(v) for v in versions)
    ends = []
    for end in (first, last):
        if _version(end, package) not in versions:
            raise UsageError(f"bisect: --versions: {package} {end} is not a released version (valid: {shown})")
        ends.append(_version(end))
    if ends[0] >= ends[1]:
        raise UsageError(f"bisect: --versions {first}..{last}: the first must be older than the last "
                         f"(valid: {shown})")
    return [str(v) for v in versions if ends[0] <= v <= ends[1]]


def _version(text: str, package: str = None) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        raise UsageError(f"bisect: --versions: {text!r} is not a version"
                         f"{f' of {package}' if package else ''} (valid: e.g. 1.0.0..1.3.0)") from None


def pins_with(requirements: str, package: str, version: str, out_dir: str) -> str:
    """A copy of a pin file with `package` pinned at `version` (its line replaced, or added); its path."""
    name = canonicalize_name(package)
    lines, swapped = [], False
    with open(requirements) as f:
        for line in f:
            pin = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*==", line)
            if pin and canonicalize_name(pin.group(1)) == name:
                lines.append(f"{pin.group(1)}{pin.group(2) or ''}=={version}\n")
                swapped = True
            else:
                lines.append(line)
    if not swapped:
        lines.append(f"{package}=={version}\n")
    return _write_pins(out_dir, f"{os.path.basename(requirements).rsplit('.', 1)[0]}-{name}-{version}", lines)


def main_constraints_without(package: str, out_dir: str) -> str:
    """The main environment's constraints less `package`'s line: what an overlay's pip resolves against, so that
    every other package it installs is at the main pin."""
    name = canonicalize_name(package)
    source = os.path.join(ROOT, "constraints.txt")
    kept = []
    if os.path.exists(source):
        with open(source) as f:
            kept = [line for line in f if _name(line) != name]
    return _write_pins(out_dir, f"constraints-without-{name}", kept)


def _name(line: str) -> str:
    """The canonical name a requirement line pins, or '' for a comment or blank line."""
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line)
    return canonicalize_name(m.group(1)) if m else ""


def _write_pins(out_dir: str, stem: str, lines: list) -> str:
    """The lines as a pin file named by what it holds (a changed file is a new environment); its path."""
    text = "".join(lines)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{stem}-{hashlib.sha256(text.encode()).hexdigest()[:8]}.txt")
    with open(path, "w") as f:
        f.write(text)
    return path


class OverlayEnv(AdapterEnv):
    """The main environment with `package` at `version` in front of it (see the module's docstring)."""

    def __init__(self, package: str, version: str):
        self.package, self.version = package, version
        self.base = sysconfig.get_paths()["purelib"]
        pins = os.path.join(venvs_dir(), "pins")
        super().__init__(f"{canonicalize_name(package)}-{version}-over-main",
                         main_constraints_without(package, pins))

    @property
    def key(self) -> str:
        with open(self.requirements, "rb") as f:
            text = f.read()
        return hashlib.sha256(text + f"{self.base}|{sys.version.split()[0]}".encode()).hexdigest()[:12]

    def _install_rlbench(self, stream):
        """Nothing: the overlay's rlbench is the main environment's, reached through its site-packages."""

    def _build(self, stream) -> dict:
        import shutil
        t0 = time.perf_counter()
        shutil.rmtree(self.dir, ignore_errors=True)
        print(f"rlbench: building {self.package}=={self.version} over the main environment in {self.dir} "
              f"(once; log: {self.log})", file=stream, flush=True)
        with open(self.log, "w"):
            pass
        self._run([sys.executable, "-m", "venv", "--without-pip", self.dir], stream)
        purelib = subprocess.run([self.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                 capture_output=True, text=True, check=True).stdout.strip()
        with open(os.path.join(purelib, "zz-rlbench-main.pth"), "w") as f:  # after the overlay's own packages
            f.write(f"import site; site.addsitedir({self.base!r})\n")
        self._pip(["install", f"{self.package}=={self.version}", "-c", self.requirements], stream)
        freeze = subprocess.run([self.python, "-m", "pip", "freeze", "--path", purelib], capture_output=True,
                                text=True, check=True).stdout
        record = {"name": self.name, "requirements": self.requirements, "over": self.base,
                  "python": self.python, "python_version": sys.version.split()[0],
                  "build_s": round(time.perf_counter() - t0, 1),
                  "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rlbench_install": install_id(),
                  "packages": _packages(freeze)}
        _write_json(os.path.join(self.dir, READY), record)
        held = ", ".join(f"{k}=={v}" for k, v in record["packages"].items())
        print(f"rlbench: {self.package}=={self.version} ready in {record['build_s']:.0f} s "
              f"({f'over the main env: {held}' if held else 'the main env has it: the overlay holds nothing'})",
              file=stream, flush=True)
        return record
