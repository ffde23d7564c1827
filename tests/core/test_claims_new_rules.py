"""The rules of the headlines added last (issue 66, part 4) and the pieces they stand on: a learning claim judged
over seeds (a repeat per seed, never one seed's curve redrawn), one cell's figure against a bound, the share of the
machine's memory bandwidth a store's traffic takes, a figure per CPU-second; and the stability of verdicts over
separate runs (`make claims-stability`), where only a flip between reproduced and not reproduced fails."""
import pytest
from support.result_rows import _row

from rlbench.families.validation import claims
from rlbench.families.validation.stability import stability
from rlbench.results.model import ResultSet

CPU_2CORE = {"cpu_model": "x", "cpu_logical_cores": 2, "ram_gb": 24.0, "gpus": []}
ONE_GPU = {**CPU_2CORE, "cpu_logical_cores": 16, "ram_gb": 126.0, "gpus": [{"name": "H100"}]}


def _judged(rows, machine=CPU_2CORE) -> dict:
    return {r.claim: r for r in claims.matrix([ResultSet.from_rows(rows, machine)])}


def _ppo_to_target(jax_steps, torch_steps, seeds=True) -> list:
    """Both PPOs' steps to the target per repeat; `seeds`: each repeat its own seed, else all the suite's."""
    rows = []
    for rep, (j, t) in enumerate(zip(jax_steps, torch_steps)):
        seed = rep if seeds else 0
        rows.append(_row("purejaxrl-ppo", 4, rep, 2e5, kind="learner", options={"updates_per_unit": 10}, seed=seed,
                         steps_to_target=j, cell_id="purejaxrl-ppo/CartPole-v1/n=4/mlp/updates_per_unit=10"))
        rows.append(_row("cleanrl-ppo", 4, rep, 1.5e4, kind="learner", options={"vec": "dummy"}, seed=seed,
                         steps_to_target=t, cell_id="cleanrl-ppo/CartPole-v1/n=4/mlp/vec=dummy"))
    return rows


def test_same_results_are_judged_over_seeds_and_one_seed_redrawn_decides_nothing():
    near = _judged(_ppo_to_target([250e3, 260e3, 255e3, 258e3, 252e3], [255e3, 262e3, 250e3, 257e3, 259e3]))
    assert near["purejaxrl-same-results"].verdict == claims.REPRODUCED
    assert "5 of 5 repeats, 5 seeds" in near["purejaxrl-same-results"].measured
    far = _judged(_ppo_to_target([600e3, 620e3, 610e3, 615e3, 605e3], [250e3, 255e3, 252e3, 251e3, 253e3]))
    assert far["purejaxrl-same-results"].verdict == claims.NOT_REPRODUCED
    one_seed = _judged(_ppo_to_target([250e3] * 3, [255e3] * 3, seeds=False))["purejaxrl-same-results"]
    assert one_seed.verdict == claims.INCONCLUSIVE and "--seeds 5" in one_seed.why
    # a seed that never reached the target is counted and left out of the median, not taken as 0
    missed = _judged(_ppo_to_target([250e3, 260e3, 255e3], [255e3, float("nan"), 250e3]))["purejaxrl-same-results"]
    assert "cleanrl-ppo 2 of 3 repeats, 3 seeds" in missed.measured


def _physics(rate) -> list:
    return [_row("mjx", 65536, rep, rate, kind="jax", device="gpu", options={"platform": "gpu"}, env="Ant-v4",
                 cell_id="mjx/Ant-v4/n=65536/random/platform=gpu") for rep in range(3)]


@pytest.mark.parametrize("rate, verdict", [(2.5e7, claims.REPRODUCED), (3e6, claims.NOT_REPRODUCED)])
def test_one_cells_figure_against_a_bound_uses_its_ci(rate, verdict):
    got = _judged(_physics(rate), ONE_GPU)["gpu-sim-10m-fps"]
    assert got.verdict == verdict and got.cells == ("mjx/Ant-v4/n=65536/random/platform=gpu",)
    (value, low, high), = got.ratios
    assert low <= value <= high and value == pytest.approx(rate * 1.01)
    assert _judged(_physics(2.5e7))["gpu-sim-10m-fps"].verdict == claims.NOT_COMPARABLE   # no GPU
    # a CI reaching the bound from both sides decides nothing
    edge = _judged([_row("mjx", 65536, rep, r, kind="jax", device="gpu", env="Ant-v4", options={"platform": "gpu"},
                         cell_id="mjx/Ant-v4/n=65536/random/platform=gpu")
                    for rep, r in enumerate((0.7e7, 1.3e7, 0.9e7, 1.1e7))], ONE_GPU)["gpu-sim-10m-fps"]
    assert edge.verdict == claims.INCONCLUSIVE


def _store(env, add_mb, sample_mb, limit_gbps=18.0) -> list:
    return [_row("numpy-ring", 1, rep, 100.0, kind="replay", env=env, env_kwargs={"mode": "target", "max_mb": 1024},
                 add_mb_per_s=add_mb, sample_mb_per_s=sample_mb * (1 + 0.01 * rep), bound="memcpy_1core",
                 bound_gbps=limit_gbps, keeps_up=1.0, cell_id=f"numpy-ring/{env}(max_mb=1024,mode=target)/n=1/random")
            for rep in range(3)]


@pytest.mark.parametrize("impala_sample_mb, verdict", [(760.0, claims.REPRODUCED), (12000.0, claims.NOT_REPRODUCED)])
def test_storage_utilisation_is_a_stores_traffic_over_the_machines_copy_bandwidth(impala_sample_mb, verdict):
    rows = (_store("replay/IMPALA-Qbert", 12.0, impala_sample_mb) + _store("replay/R2D2-Qbert", 30.0, 450.0)
            + _store("replay/DQN-Qbert", 44.0, 181.0))
    got = _judged(rows)["survey-storage-utilisation"]
    assert got.verdict == verdict
    assert got.measured.startswith(f"IMPALA-Qbert numpy-ring {(12.0 + impala_sample_mb * 1.01) / 18000:.1%}")
    assert _judged(rows[:6])["survey-storage-utilisation"].verdict == claims.NOT_MEASURED   # DQN's cell missing


@pytest.mark.parametrize("ray_rate, verdict", [(5000.0, claims.REPRODUCED), (100000.0, claims.NOT_REPRODUCED)])
def test_utilisation_compares_env_steps_per_cpu_second(ray_rate, verdict):
    rows = []
    for rep in range(3):
        rows.append(_row("ray-actors", 8, rep, ray_rate, cpu_util=1.4,
                         options={"actors": 2, "mode": "sync", "transport": "inline"},
                         cell_id="ray-actors/CartPole-v1/n=8/random/actors=2,mode=sync,transport=inline"))
        rows.append(_row("envpool-sync", 8, rep, 130000.0, cpu_util=1.2))
    got = _judged(rows)["ray-low-utilisation"]
    assert got.verdict == verdict
    (value, _, _), = got.ratios
    assert value == pytest.approx((ray_rate / 1.4) / (130000.0 / 1.2), rel=0.02)


class _Row:
    def __init__(self, claim, verdict, measured=""):
        self.claim, self.verdict, self.measured = claim, verdict, measured


def test_stability_fails_only_a_flip_between_reproduced_and_not():
    runs = [[_Row("a", claims.REPRODUCED), _Row("b", claims.REPRODUCED), _Row("c", claims.NOT_COMPARABLE)],
            [_Row("a", claims.INCONCLUSIVE), _Row("b", claims.NOT_REPRODUCED), _Row("c", claims.NOT_COMPARABLE)],
            [_Row("a", claims.REPRODUCED), _Row("b", claims.REPRODUCED)]]
    got = {s.claim: s for s in stability(runs)}
    assert not got["a"].flipped and got["a"].held == 2 and got["a"].verdict == "reproduced 2/3, inconclusive 1/3"
    assert got["b"].flipped and got["b"].verdict == "flipped"
    assert got["c"].verdicts == (claims.NOT_COMPARABLE, claims.NOT_COMPARABLE, claims.NOT_MEASURED)
    row = got["b"].record(["run-1", "run-2", "run-3"])
    assert row["verdict run-2"] == claims.NOT_REPRODUCED and row["held"] == "2/3" and row["flipped"] is True
