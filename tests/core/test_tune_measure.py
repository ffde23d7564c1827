"""The real measurer's guess at a job's wall time (rlbench.tuning.measure.SweepMeasurer.job_s): a cell's own,
else its adapter's slowest, else any cell's, else a guess from the protocol; whatever the spelling of the ids."""
from dataclasses import dataclass
from types import SimpleNamespace

from rlbench.results.model import Run
from rlbench.tuning import measure
from rlbench.tuning.measure import SPAWN_S, SweepMeasurer


@dataclass(frozen=True)
class _Settings:
    warmup_s: float = 1.0
    duration_s: float = 2.0
    repeats: int = 1


def _cell(cell_id: str, adapter: str):
    return SimpleNamespace(cell_id=cell_id, adapter=adapter)


def test_a_jobs_wall_time_comes_from_its_cell_its_adapter_or_any_cell(monkeypatch):
    # ids without a "/" (a cell id's usual separator): cells and adapters are still told apart
    rows = [Run.from_row({"cell_id": "a", "adapter": "x", "repeat": 0, "wall_s": 1.0}),
            Run.from_row({"cell_id": "b", "adapter": "x", "repeat": 0, "wall_s": 3.0})]
    monkeypatch.setattr(measure, "run_sweep", lambda *args, **kwargs: SimpleNamespace(runs=rows))
    m = SweepMeasurer("run", _Settings(0.1, 0.2), "out", {})
    assert m.job_s(_cell("a", "x")) == 1.5 + 0.1 + 0.2          # nothing seen yet: the protocol's guess
    m.learn({"ray": 10.0, "idle": 0.0})
    assert m.job_s(_cell("c", "ray")) == 10.0 + SPAWN_S          # the calibration's, for its adapter
    assert m.job_s(_cell("c", "z")) == 1.5 + 0.1 + 0.2           # ... and no cell's
    m.run([_cell("a", "x"), _cell("b", "x")], 1, lambda cell: True)
    assert m.job_s(_cell("a", "x")) == 1.0 + SPAWN_S             # its own
    assert m.job_s(_cell("c", "x")) == 3.0 + SPAWN_S             # its adapter's slowest
    assert m.job_s(_cell("c", "z")) == 2.0 + SPAWN_S             # the median of every cell's, not the calibration's


def test_the_guess_pays_for_opening_the_env_as_the_profile_did():
    """A JAX env's profile took 23 s to import, build and compile its loop: every job's process does it again."""
    m = SweepMeasurer("run", _Settings(), "out", {}, open_s=23.0)
    assert m.job_s(_cell("a", "gymnax")) == 1.5 + 23.0 + 1.0 + 2.0


def test_an_unseen_jobs_guess_pays_for_its_units_at_the_profiled_cost():
    """A driving simulator of 29 ms a step: rlpyt's unit of batch_T=4 steps of 16 envs on 2 cores takes ~0.93 s, and
    a job times at least 2 + 5 of them; the calibration's wall time (a free env) does not bound it, nor does the
    cheaper job of a one-step unit measured on the same env."""
    from rlbench.planning.suite import make_cell
    from rlbench.workload import PolicySpec, Workload

    settings = SimpleNamespace(warmup_s=0.2, duration_s=0.5, warmup_units=2, min_units=5, repeats=1)
    m = SweepMeasurer("run", settings, "out", {}, step_s=0.029, cpus=2)
    rlpyt = make_cell("tune", "rlpyt-cpu", Workload("CartPole-v1", 16, PolicySpec()), {"batch_T": 4, "workers": 2})
    m.learn({"rlpyt-cpu": 2.0})
    unit_s = 4 * 16 * 0.029 / 2
    assert m.job_s(rlpyt) == 1.5 + 2 * unit_s + 5 * unit_s
    serial = make_cell("tune", "serial", Workload("CartPole-v1", 16, PolicySpec()), {})
    assert m.job_s(serial) == 1.5 + 2 * (16 * 0.029 / 2) + 5 * (16 * 0.029 / 2)   # a unit: one step of each env
