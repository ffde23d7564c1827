"""Importing rlbench, listing adapters and loading suites stays cheap: no framework is imported."""
import json
import subprocess
import sys

import pytest
from support import REPO

FRAMEWORKS = ("torch", "jax", "jaxlib", "ray", "envpool", "tensorflow", "gymnax", "stable_baselines3", "tianshou")


def _imported_frameworks(code: str) -> list:
    probe = (f"{code}\nimport json, sys\n"
             f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({list(FRAMEWORKS)!r}))))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("code", [
    "import rlbench",
    "import rlbench.cli, rlbench.api, rlbench.registry",
    "import rlbench.registry; rlbench.registry.discover()",
    "from rlbench import cli; cli.main(['list'])",
    f"from rlbench.planning.suite import load_suite; load_suite({str(REPO / 'suites' / 'cpu.toml')!r})",
])
def test_no_framework_is_imported(code):
    assert _imported_frameworks(code) == []


def test_the_probe_sees_an_import():
    assert "envpool" in _imported_frameworks("import envpool")


def test_a_folder_named_adapters_in_the_current_folder_is_refused_not_used(tmp_path):
    """The adapters are the top-level package `adapters`: a folder of that name where rlbench runs (a user's own
    project) must not silently stand in for it."""
    (tmp_path / "adapters").mkdir()
    proc = subprocess.run([sys.executable, "-m", "rlbench.cli", "list"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "a folder of that name hides it" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
