"""The search's measurements, for real: each call runs one more repeat of the given cells through the
run's own sweep (rlbench.running.sweep.run_sweep: a fresh process per repeat, interleaved, every row
appended to the run folder's results.jsonl as it finishes), and keeps each job's wall time so the search
can tell what still fits in its budget."""
import time
from dataclasses import replace

import numpy as np

from rlbench.running.sweep import run_sweep

SPAWN_S = 0.3   # a job's cost beyond its process's own wall time (spawn, reaping, the row's write)


class SweepMeasurer:
    def __init__(self, run_id: str, settings, out_dir: str, envs: dict, t0: float = None, cluster=None):
        self.run_id, self.settings, self.out_dir, self.envs = run_id, settings, out_dir, envs
        self.cluster = cluster
        self.slots = len(cluster.nodes) if cluster else 1   # jobs measured at once (a node each on a cluster)
        self.t0 = time.monotonic() if t0 is None else t0
        self.done, self.walls = set(), {}   # (cell_id, repeat, profiled) run; cell_id or adapter -> wall times

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def job_s(self, cell) -> float:
        """A job's expected wall time: the cell's own so far; else the slowest of its adapter's (Ray and JAX
        start slowly, and a process per env costs more the more envs); else any job's; else a guess."""
        own = self.walls.get(cell.cell_id)
        if own:
            return float(np.median(own))
        adapter = self.walls.get(cell.adapter)
        if adapter:
            return max(adapter)
        every = [w for key, ws in self.walls.items() if "/" in key for w in ws]
        s = self.settings
        return float(np.median(every)) if every else 1.5 + s.warmup_s + s.duration_s

    def learn(self, walls: dict) -> None:
        """Wall times of jobs run elsewhere (adapter -> seconds: the calibration's) count for their adapters
        until their own are seen: a Ray adapter's first job is not guessed at a second."""
        for adapter, wall in walls.items():
            if wall:
                self.walls.setdefault(adapter, []).append(float(wall) + SPAWN_S)

    def run(self, cells, level: int, admit) -> list:
        """The level-th repeat of each cell (those admit(cell) lets start), as results rows."""
        results = run_sweep(self.run_id, "tune", cells, replace(self.settings, repeats=level), self.out_dir,
                            envs=self.envs, done=self.done, admit=lambda job: admit(job.cell), cluster=self.cluster)
        rows = []
        for run in results.runs:
            row = dict(run)
            self.done.add((row["cell_id"], row["repeat"], bool(row.get("profiled"))))
            if row.get("wall_s"):
                for key in (row["cell_id"], row["adapter"]):
                    self.walls.setdefault(key, []).append(float(row["wall_s"]) + SPAWN_S)
            rows.append(row)
        return rows
