"""A tune search over CartPole-v1 on recorded rates (no cell runs): the race, and the run folder's rows its
repeats are, for the tests of tune's decision and of its report section."""
import os

from rlbench.results.model import ResultSet, Run
from rlbench.tuning.candidates import Space
from rlbench.tuning.profile import EnvProfile
from rlbench.tuning.search import Search
from rlbench.workload import PolicySpec, Workload
from support.result_rows import _row

PROFILE = EnvProfile.from_json({"step": {"median_us": 20.0, "p99_us": 30.0, "cv": 0.1}, "reset_share": 0.01, "obs_bytes": 16,
           "rss_per_env_mb": 0.1, "policy_us_per_batch": {"1": 5.0}})


class RateMeasurer:
    """A Measurer whose rows are `value(cell, level)` (None: the cell gives no row), a second a job; `ran`:
    the adapter of each job, in order."""
    slots = 1

    def __init__(self, rates):
        self.rates, self.t, self.ran = rates, 0.0, []

    def elapsed(self):
        return self.t

    def job_s(self, cell):
        return 1.0

    def value(self, cell, level):
        raise NotImplementedError

    def run(self, cells, level, admit):
        out = []
        for cell in cells:
            value = self.value(cell, level)
            if value is not None and admit(cell):
                self.t += 1
                self.ran.append(cell.adapter)
                out.append(Run.from_row({"cell_id": cell.cell_id, "repeat": level - 1, "status": "ok",
                                         "steps_per_s": value}))
        return out


class _Recorded(RateMeasurer):
    """Recorded rates: (adapter, num_envs) -> steps/s of each repeat."""

    def value(self, cell, level):
        values = self.rates.get((cell.adapter, cell.workload.num_envs))
        return values[level - 1] if values and level <= len(values) else None


def _searched(rates, adapters):
    """A search over CartPole-v1 on recorded rates, and the run folder's rows its repeats are."""
    space = Space(Workload("CartPole-v1", 1, PolicySpec()), adapters, 8, 2)
    search = Search(space, _Recorded(rates), 1e6, PROFILE, {}, 2, stream=open(os.devnull, "w"))
    search.go()
    rows = [{**_row(c.adapter, c.num_envs, i, v, cell_id=c.cell.cell_id, cell_index=c.cell.index,
                    options=c.cell.given_options), "steps_per_s": v}
            for c in search.candidates for i, v in enumerate(c.values)]
    return search, ResultSet.from_rows(rows)


def _five(x):
    return [x, x * 1.01, x * 0.99, x * 1.005, x * 0.995]
