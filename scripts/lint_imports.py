"""Runs import-linter on the package as it is installed, then looks for the one kind of cycle its contracts
leave out. `adapters/` lives at the top of the checkout but is installed as `rlbench.adapters` (pyproject's
package-dir); import-linter reads packages from the filesystem, so it is shown a copy laid out that way, and
the contracts in pyproject.toml name the installed modules."""
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCES = shutil.ignore_patterns("__pycache__", "*.pyc", "envs")


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="rlbench-lint-") as tmp:
        shutil.copytree(os.path.join(REPO, "rlbench"), os.path.join(tmp, "rlbench"), ignore=SOURCES)
        shutil.copytree(os.path.join(REPO, "adapters"), os.path.join(tmp, "rlbench", "adapters"), ignore=SOURCES)
        env = {**os.environ, "PYTHONPATH": tmp}
        lint = os.path.join(os.path.dirname(sys.executable), "lint-imports")
        rc = subprocess.run([lint, os.path.join(REPO, "pyproject.toml"), "--no-cache"], cwd=tmp, env=env).returncode
        cycles = subprocess.run([sys.executable, __file__, "--cycles"], cwd=tmp, env=env).returncode
        return rc or cycles


def all_cycles() -> int:
    """acyclic_siblings compares siblings only, so a package and one of its own modules importing each other
    (report/__init__ <-> report/csv.py) passes it: here every import between any two modules counts,
    function-level ones included."""
    import grimp
    graph = grimp.build_graph("rlbench", exclude_type_checking_imports=False)  # type-only imports too
    found = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back:
                found.append(" -> ".join([importer, *back]))
    for chain in found:
        print(f"import cycle: {chain}")
    print(f"Import cycles: {len(found)}.")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(all_cycles() if sys.argv[1:] == ["--cycles"] else main())
