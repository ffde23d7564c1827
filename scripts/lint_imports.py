"""Runs import-linter on the checkout's packages (rlbench and adapters), then looks for the one kind of cycle
its contracts leave out."""
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> int:
    env = {**os.environ, "PYTHONPATH": REPO}  # this checkout's packages, whatever the venv has installed
    lint = os.path.join(os.path.dirname(sys.executable), "lint-imports")
    rc = subprocess.run([lint, os.path.join(REPO, "pyproject.toml"), "--no-cache"], cwd=REPO,
                        env=env).returncode
    cycles = subprocess.run([sys.executable, __file__, "--cycles"], cwd=REPO, env=env).returncode
    return rc or cycles


def all_cycles() -> int:
    """acyclic_siblings compares siblings only, so a package and one of its own modules importing each other
    (report/__init__ <-> report/csv.py) passes it: here every import between any two modules counts,
    function-level ones included."""
    import grimp
    graph = grimp.build_graph("rlbench", "adapters", exclude_type_checking_imports=False)  # type-only imports too
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
