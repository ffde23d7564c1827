"""Runs for the history's tests: copies of the committed quick run (its first CELLS cells) as other runs of one
machine, each with its own id, start and commit, and each cell's steps/s scaled (run-to-run noise, an injected
slowdown)."""
import json

import numpy as np

from support import REPO

QUICK = REPO / "reports" / "reference" / "cpu-2core-epyc" / "quick"
CELLS = 4   # of the quick run's cells, the first four: small runs, fast tests


def make_run(tmp_path, name, factors=None, commit="a" * 40, hostname="vm", slow_cell=None, slow=1.0,
             started="2026-11-27T03:48:49+00:00", source=QUICK):
    """A copy of a run (the committed quick run's first CELLS cells) as another run: its own id and start, its
    commit, each cell's steps/s times factors[cell] (one run's noise), and `slow_cell` times `slow`; its
    plan.json kept."""
    out = tmp_path / name
    out.mkdir(parents=True)
    if (source / "plan.json").exists():
        (out / "plan.json").write_text((source / "plan.json").read_text())
    doc = json.loads((source / "env.json").read_text())
    doc.update(run_id=name, started_at=started, hostname=hostname, git={"commit": commit, "dirty": False})
    (out / "env.json").write_text(json.dumps(doc))
    cells, lines = [], []
    for line in (source / "results.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row["cell_id"] not in cells:
            if len(cells) == CELLS:
                continue
            cells.append(row["cell_id"])
        k = cells.index(row["cell_id"])
        scale = (factors[k] if factors is not None else 1.0) * (slow if row["cell_id"] == slow_cell else 1.0)
        row.update(run_id=name, steps_per_s=row["steps_per_s"] * scale if row.get("steps_per_s") else None)
        lines.append(json.dumps(row))
    (out / "results.jsonl").write_text("\n".join(lines) + "\n")
    return out, cells


def quick_cells() -> list:
    cells = []
    for line in (QUICK / "results.jsonl").read_text().splitlines():
        cell = json.loads(line)["cell_id"]
        if cell not in cells:
            cells.append(cell)
    return cells[:CELLS]


def aa_runs(tmp_path, count, sd=0.02, seed=0, **kw):
    """`count` A/A runs of one commit, each cell's level moved by log-normal run-to-run noise."""
    rng = np.random.default_rng(seed)
    return [make_run(tmp_path, f"aa{i:02d}", np.exp(rng.normal(0, sd, CELLS)),
                     started=f"2026-11-27T04:{i:02d}:00+00:00", **kw)[0] for i in range(count)]


