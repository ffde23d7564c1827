"""CPU settings as sweep axes: OMP threads and CPU affinity are applied per cell and recorded."""
import os

import pytest
from support import run_cli, write_suite

from rlbench.errors import UsageError
from rlbench.planning.suite import load_suite

SWEEP = """[[sweep]]
adapters = ["gymnasium-sync"]
envs = ["CartPole-v1"]
num_envs = [2]
policy = "mlp:hidden=8,threads=1"
"""


def test_omp_threads_and_affinity_are_axes(tmp_path):
    suite = load_suite(str(write_suite(tmp_path, SWEEP + "omp_threads = [1, 2]\naffinity = [[0], [0, 1]]\n")))
    ids = sorted(c.cell_id for c in suite.cells)
    assert len(ids) == 4
    assert "gymnasium-sync/CartPole-v1/n=2/mlp8-cpu-t1/omp=2/cpus=0+1" in ids


def test_a_flat_affinity_list_is_one_setting(tmp_path):
    suite = load_suite(str(write_suite(tmp_path, SWEEP + "affinity = [0, 1]\n")))
    assert [c.affinity for c in suite.cells] == [(0, 1)]


@pytest.mark.parametrize("line, expected", [("omp_threads = [-1]\n", "omp_threads: -1"),
                                            ("affinity = ['a']\n", "affinity: CPU 'a' is not available here"),
                                                ("affinity = [[0], [99]]\n", r"affinity: CPU 99 is not available here \(valid: 0")])
def test_bad_cpu_settings(tmp_path, line, expected):
    path = write_suite(tmp_path, SWEEP + line)
    with pytest.raises(UsageError, match=expected):
        load_suite(str(path))


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs")
def test_settings_are_applied_in_the_cell_and_recorded(tmp_path):
    path = write_suite(tmp_path, SWEEP + "omp_threads = [3]\naffinity = [[0], [0, 1]]\n")
    run = run_cli(["run", path], tmp_path / "run")
    assert run.rc == 0
    got = sorted((r["cpus"], r["omp_threads"], r["torch_threads"], r["affinity"]) for r in run.rows)
    assert got == [(1, 3, 1, [0]), (2, 3, 1, [0, 1])]
    assert all(r["status"] == "ok" for r in run.rows)
