"""The table of a machine's reference runs (reports/reference/<machine>/README.md), read from each run folder's
env.json and results.jsonl, so that which commit made which run, on what, is never typed by hand.

Plain python3 and the standard library only: device_kit.py's unpack uses it too, and device_run.sh's machine has
nothing else.
"""
import datetime
import json
import os


def _duration(env: dict) -> str:
    """env.json's started_at to ended_at (a resumed run counts its pause), as '37 min 1 s'."""
    try:
        s = (datetime.datetime.fromisoformat(env["ended_at"])
             - datetime.datetime.fromisoformat(env["started_at"])).total_seconds()
    except (KeyError, TypeError, ValueError):
        return "?"
    return f"{int(s // 60)} min {int(s % 60)} s" if s >= 60 else f"{s:.0f} s"


def _statuses(path: str) -> str:
    counts = {}
    with open(path) as f:
        for line in f:
            try:
                status = json.loads(line).get("status")
            except ValueError:
                continue   # a torn last line of an interrupted run
            counts[status] = counts.get(status, 0) + 1
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))


def rows(dest_root: str) -> list:
    """One table row per run folder under dest_root (those with env.json and results.jsonl, at any depth: a
    check-tune part holds a tune and a sweep per env), sorted by path."""
    out = []
    found = sorted(os.path.relpath(d, dest_root) for d, _, files in os.walk(dest_root)
                   if "env.json" in files and "results.jsonl" in files)
    for name in found:
        folder = os.path.join(dest_root, name)
        with open(os.path.join(folder, "env.json")) as f:
            env = json.load(f)
        git = env.get("git") or {}
        gpus = "; ".join(f"{g.get('name')} (driver {g.get('driver')}, CUDA {g.get('cuda')})"
                         for g in env.get("gpus") or [])
        packages = env.get("packages") or {}
        cells, repeats = env.get("cells", "?"), (env.get("settings") or {}).get("repeats", "?")
        out.append(f"| {name} | {(git.get('commit') or '?')[:10]}{' (dirty)' if git.get('dirty') else ''} | "
                   f"{env.get('started_at', '?')} | {_duration(env)} | {cells} x {repeats} | "
                   f"{gpus or env.get('cpu_model') or '?'} | {env.get('cpu_logical_cores')} | "
                   f"torch {packages.get('torch')}, jax {packages.get('jax')} | "
                   f"{_statuses(os.path.join(folder, 'results.jsonl'))} |")
    return out


def write_index(dest_root: str, title: str, made_by: str) -> str:
    """reports/reference/<machine>/README.md: the title, how the runs were made, and one row per run folder;
    RUNS.md instead beside a README.md that this did not write (a hand-written one is never overwritten)."""
    table = rows(dest_root)   # read before the file is opened for writing
    path = os.path.join(dest_root, "README.md")
    if os.path.isfile(path):
        with open(path) as f:
            if f.readline().rstrip("\n") != f"# {title}":
                path = os.path.join(dest_root, "RUNS.md")
    with open(path, "w") as f:
        f.write(f"# {title}\n\n{made_by} Each folder is a run (`rlbench report FOLDER` makes its page); the "
                "commit column says what code made it.\n\n"
                "| run | commit | started | wall | cells x repeats | machine | cores | frameworks | rows |\n"
                "|---|---|---|---|---|---|---|---|---|\n" + "\n".join(table) + "\n")
    return path
