"""docs/architecture.md's layout table is where a newcomer looks a module up: every module under rlbench/ is named
in it, a top-level one in a row of its own, one in a package in the row of its top-level folder."""
import os

from support import REPO


def _rows() -> list:
    text = open(os.path.join(REPO, "docs", "architecture.md"), encoding="utf-8").read()
    table = text[text.index("## Layout"):]
    return [line for line in table.splitlines() if line.startswith("| `")]


def _modules() -> list:
    found = []
    for root, dirs, files in os.walk(os.path.join(REPO, "rlbench")):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        found += [os.path.relpath(os.path.join(root, f), REPO) for f in files
                  if f.endswith(".py") and f != "__init__.py"]
    return sorted(found)


def _named(module: str, rows: list) -> bool:
    parts = module.split("/")          # rlbench/x.py or rlbench/top/.../m.py
    if len(parts) == 2:
        return any(f"`{module}`" in row or f"`{parts[1]}`" in row.split("|")[1] or
                   f" {parts[1]}`" in row.split("|")[1] for row in rows)
    top = f"`rlbench/{parts[1]}/`"
    return any(top in row.split("|")[1] and parts[-1] in row for row in rows)


def test_every_module_is_in_the_layout_table():
    rows = _rows()
    missing = [m for m in _modules() if not _named(m, rows)]
    assert not missing, f"docs/architecture.md's layout table does not name {', '.join(missing)}"
