"""The search's measurements, for real: each call runs one more repeat of the given cells through the
run's own sweep (rlbench.running.sweep.run_sweep: a fresh process per repeat, interleaved, every row
appended to the run folder's results.jsonl as it finishes), and keeps each job's wall time so the search
can tell what still fits in its budget."""
import time
from dataclasses import replace

import numpy as np

from rlbench.running.sweep import SweepRequest, run_sweep

SPAWN_S = 0.3   # a job's cost beyond its process's own wall time (spawn, reaping, the row's write)


def used_before(earlier, path: str) -> float:
    """The budget an earlier session of a tune used (`earlier`: its kept state, TuneState or TrainState, None when it
    never wrote one): its own count when it decided; when it was killed before that, the count as its search
    started plus the wall time of the rows it measured after (those before: in that count)."""
    from rlbench.results.model import ResultSet
    if earlier is None:
        return 0.0
    used = earlier.used_s
    if earlier.decision is None:
        before = set(earlier.rows_before)
        used += sum(float(r.wall_s or 0.0) + SPAWN_S for r in ResultSet.load(path).runs
                    if (r.cell_id, r.repeat) not in before)
    return used


class SweepMeasurer:
    def __init__(self, run_id: str, settings, out_dir: str, envs: dict, t0: float = None, cluster=None,
                 kept: dict = None, clock=None, open_s: float = 0.0, step_s: float = 0.0, cpus: int = 1):
        """clock: the budget used so far (rlbench.tuning.clock.Clock.elapsed: time apart left out); default the
        wall time since t0 (default now). open_s: opening the env as the profile did (a JAX env's: importing,
        building and compiling its loop), which every job pays again. step_s: one env step's profiled cost (env
        and policy, rlbench.tuning.units.cost_s_per_step), stepped on at most `cpus` cores: what a job's units
        take at least."""
        self.run_id, self.settings, self.out_dir, self.envs = run_id, settings, out_dir, envs
        # a resumed tune's rows, (cell_id, repeat) -> Run: a job asked again is answered from them at no cost, so
        # the search retraces its path to where it was stopped and goes on from there
        self.kept = dict(kept or {})
        self.cluster = cluster
        self.slots = len(cluster.nodes) if cluster else 1   # jobs measured at once (a node each on a cluster)
        self.t0 = time.monotonic() if t0 is None else t0
        self.clock = clock
        self.done = set()          # (cell_id, repeat, profiled) run
        # wall times, in seconds, kept apart by what they belong to: a cell's own jobs, and every job of an
        # adapter (the calibration's among them), so telling one from the other never reads an id's spelling
        self.cell_walls, self.adapter_walls = {}, {}
        self.open_s, self.step_s, self.cpus = open_s, step_s, cpus

    def elapsed(self) -> float:
        return self.clock() if self.clock is not None else time.monotonic() - self.t0

    def job_s(self, cell) -> float:
        """A job's expected wall time: the cell's own so far; else the most of the slowest of its adapter's (Ray
        and JAX start slowly, and a process per env costs more the more envs), the median of this env's jobs so
        far (its observations and resets cost every strategy) and the least its units can take at the profiled
        cost of a step (a process, the env opened as the profile took, the warm-up and the window): the
        calibration's jobs step a free env, and a round that trusted them ran past the budget on a 28 KB frame
        (issue 63)."""
        own = self.cell_walls.get(cell.cell_id)
        if own:
            return float(np.median(own))
        every = [w for ws in self.cell_walls.values() for w in ws]
        return max(max(self.adapter_walls.get(cell.adapter) or [0.0]), float(np.median(every)) if every else 0.0,
                   self.least_s(cell))

    def least_s(self, cell) -> float:
        """The least a job of the cell can take: a process, the env opened as the profile took, the warm-up and the
        timed window, each at least its units at the profiled cost of a step on the cores the envs may use."""
        s = self.settings
        workload = getattr(cell, "workload", None)
        unit_s = 0.0
        if workload is not None and self.step_s > 0:
            steps = workload.num_envs * _unit_length(cell)
            unit_s = steps * self.step_s / max(1, min(self.cpus, workload.num_envs))
        warmup_units, min_units = getattr(s, "warmup_units", 0), getattr(s, "min_units", 0)
        return 1.5 + self.open_s + max(s.warmup_s, warmup_units * unit_s) + max(s.duration_s, min_units * unit_s)

    def learn(self, walls: dict) -> None:
        """Wall times of jobs run elsewhere (adapter -> seconds: the calibration's) count for their adapters
        until their own are seen: a Ray adapter's first job is not guessed at a second."""
        for adapter, wall in walls.items():
            if wall:
                self.adapter_walls.setdefault(adapter, []).append(float(wall) + SPAWN_S)

    def run(self, cells, level: int, admit) -> list:
        """The level-th repeat of each cell (those admit(cell) lets start, or kept from an earlier session), as
        results rows."""
        wanted = [(c.cell_id, r) for c in cells for r in range(level)]
        replayed = [self.kept.pop(key) for key in wanted if key in self.kept]
        self.done.update(row.job for row in replayed)
        results = run_sweep(SweepRequest(self.run_id, "tune", tuple(cells), replace(self.settings, repeats=level),
                                         self.out_dir, envs=self.envs, done=frozenset(self.done),
                                         admit=lambda job: admit(job.cell), cluster=self.cluster))
        return [self._learn(row) for row in [*replayed, *results.runs]]

    def missed(self, results) -> list:
        """The rows of `results` (the run folder's) no call returned: a sweep cut short by a signal or a full disk
        between a row's write and its return. What the search decides on must cover them."""
        return [self._learn(r) for r in results.runs if r.job not in self.done and r.status != "lost"]

    def _learn(self, row):
        """A results row (rlbench.results.model.Run) counted done, its wall time learnt."""
        self.done.add(row.job)
        wall = row.get("wall_s")
        if wall:
            self.cell_walls.setdefault(row.cell_id, []).append(float(wall) + SPAWN_S)
            self.adapter_walls.setdefault(row["adapter"], []).append(float(wall) + SPAWN_S)
        return row


def _unit_length(cell) -> int:
    """Steps of each env in one of the cell's units: its unit option's value (rlbench.contract.Adapter.unit_option),
    else 1 (a vector step)."""
    from rlbench import registry
    name = registry.get(cell.adapter).unit_option
    return int(cell.options.get(name, 1)) if name else 1
