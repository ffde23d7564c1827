"""rlbench goes into an adapter's own environment without its dependencies (the environment's pins stay as
they are), so each adapters/envs/NAME.txt must pin every package rlbench itself imports: a missing one is
an ImportError only when that environment first runs a cell or a test."""
import re
import tomllib

import pytest
from support import REPO

CORE = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]


def _pins(path):
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([A-Za-z0-9_.+\-]+)", line)
            assert m, f"{path.name}: not an exact pin: {line}"
            pins[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = m.group(2)
    return pins


@pytest.mark.parametrize("path", sorted((REPO / "adapters" / "envs").glob("*.txt")), ids=lambda p: p.stem)
def test_environment_pins_rlbenchs_own_dependencies(path):
    pins = _pins(path)
    names = {re.split(r"[<>=!~\[; ]", dep, maxsplit=1)[0].lower() for dep in CORE}
    assert names - set(pins) == set(), f"{path.name} lacks rlbench's dependencies {sorted(names - set(pins))}"
    assert "rlbench" not in pins
