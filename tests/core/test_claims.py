"""The claims matrix: every headline of the source papers with a rule and a verdict. A rule judges the cells it
names (reproduced or not, from the measured ratio), a claim whose hardware the machine lacks is not comparable
there, one without its cells is not measured; docs/claims.md and each reference set's matrix are current."""
import csv
import math
import subprocess
import sys

import pytest
from support import REPO, run_cli
from support.result_rows import _row

from rlbench.families.validation import claims
from rlbench.results.model import ResultSet

CPU_2CORE = {"cpu_model": "x", "cpu_logical_cores": 2, "ram_gb": 24.0, "gpus": []}
ONE_GPU = {**CPU_2CORE, "cpu_logical_cores": 16, "ram_gb": 126.0, "gpus": [{"name": "H100"}]}


def _ppo(jax_rate: float, torch_rate: float) -> list:
    rows = []
    for rep in range(3):
        rows.append(_row("purejaxrl-ppo", 4, rep, jax_rate, kind="learner", options={"updates_per_unit": 10},
                         cell_id="purejaxrl-ppo/CartPole-v1/n=4/mlp/updates_per_unit=10"))
        rows.append(_row("cleanrl-ppo", 4, rep, torch_rate, kind="learner", options={"vec": "dummy"},
                         cell_id="cleanrl-ppo/CartPole-v1/n=4/mlp/vec=dummy"))
    return rows


def _by_id(rows) -> dict:
    """The matrix's JudgedClaims by claim id."""
    return {r.claim: r for r in rows}


def test_every_claim_has_a_source_a_figure_and_a_rule():
    assert len(claims.CLAIMS) >= 15
    assert len({c.id for c in claims.CLAIMS}) == len(claims.CLAIMS)
    for c in claims.CLAIMS:
        assert c.source and c.says and c.published and c.rule, c.id
        assert c.judge is not None or c.needs is not None, f"{c.id}: neither a rule on cells nor hardware it needs"


@pytest.mark.parametrize("jax_rate, verdict", [(150000.0, claims.REPRODUCED), (60000.0, claims.NOT_REPRODUCED)])
def test_a_rule_judges_the_cells_it_names(jax_rate, verdict):
    rows = _by_id(claims.matrix([ResultSet.from_rows(_ppo(jax_rate, 10000.0), CPU_2CORE)]))
    got = rows["purejaxrl-10x"]
    assert got.verdict == verdict
    assert got.measured.startswith(f"{jax_rate / 10000.0:.2f}x [")          # the ratio and its bootstrap CI
    [(ratio, low, high)] = got.ratios
    assert ratio == pytest.approx(jax_rate / 10000.0) and low <= ratio <= high
    assert got.cells == ("purejaxrl-ppo/CartPole-v1/n=4/mlp/updates_per_unit=10", "cleanrl-ppo/CartPole-v1/n=4/mlp/vec=dummy")
    assert got.own and got.record()["own"] == "rlbench's own implementations"
    assert rows["baselines-608"].verdict == claims.NOT_MEASURED and "suites/validate.toml" in rows["baselines-608"].why


def test_hardware_decides_what_is_comparable():
    on_cpu = _by_id(claims.matrix([ResultSet.from_rows(_ppo(150000.0, 10000.0), CPU_2CORE)]))
    assert on_cpu["gymnax-a100-1000x"].verdict == claims.NOT_COMPARABLE
    assert "needs a GPU; this machine: 2 cores, no GPU" in on_cpu["gymnax-a100-1000x"].why
    assert on_cpu["survey-capacity"].verdict == claims.NO_RULE   # no rule written: not "not comparable" either
    assert on_cpu["survey-capacity"].why.startswith("no rule written yet: it would measure a store holding the full")
    gpu_rows = [_row("gymnax", 2048, rep, 1.2e8, kind="jax", device="gpu", options={"platform": "gpu"},
                     cell_id="gymnax/CartPole-v1/n=2048/random/platform=gpu") for rep in range(3)]
    minatar = "gymnax/gymnax:make(env_id=Breakout-MinAtar)/n=2048/random/platform=gpu"
    gpu_rows += [_row("gymnax", 2048, rep, 4e6, kind="jax", device="cuda:0", options={"platform": "gpu"},
                      env="gymnax:make", env_kwargs={"env_id": "Breakout-MinAtar"}, cell_id=minatar)
                 for rep in range(3)]
    on_gpu = _by_id(claims.matrix([ResultSet.from_rows(gpu_rows, ONE_GPU)]))
    assert on_gpu["gymnax-a100-1000x"].verdict == claims.REPRODUCED          # 1e6 / 1.2e8 s <= 0.05 s
    assert on_gpu["gymnax-minatar-breakout"].verdict == claims.NOT_REPRODUCED   # 0.25 s > 0.19 s
    assert on_gpu["gymnax-minatar-breakout"].cells == (minatar,)
    assert on_gpu["survey-capacity"].verdict == claims.NO_RULE
    assert on_gpu["purejaxrl-10x"].verdict == claims.NOT_MEASURED


def test_validate_from_several_runs_writes_the_matrix(tmp_path, capsys):
    base = REPO / "reports" / "reference" / "cpu-2core-epyc"
    run = run_cli(["validate", "--from", base / "validate", base / "train", "--claims-out", tmp_path])
    out = capsys.readouterr().out
    assert run.rc == 0, out
    assert f"claims of the source papers: {len(claims.CLAIMS)}" in out
    with open(tmp_path / "claims.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["claim"] for r in rows] == [c.id for c in claims.CLAIMS]
    by_id = {r["claim"]: r for r in rows}
    assert by_id["purejaxrl-10x"]["verdict"] in (claims.REPRODUCED, claims.NOT_REPRODUCED)   # train's cells
    assert (tmp_path / "claims.md").read_text().startswith("# Claims of the source papers")
    assert run_cli(["validate", "--from", tmp_path / "nothing"]).rc == 2


def test_the_reference_sets_and_the_docs_carry_the_current_matrix():
    for machine in ("cpu-2core-epyc", "cpu-2core-xeon", "nvidia-h100-x1", "nvidia-h200"):
        with open(REPO / "reports" / "reference" / machine / "claims.csv", newline="") as f:
            assert [r["claim"] for r in csv.DictReader(f)] == [c.id for c in claims.CLAIMS], machine
    check = subprocess.run([sys.executable, str(REPO / "scripts" / "claims_doc.py"), "--check"],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


def _reuse_rows(ppo_free_max: float) -> list:
    rows = []
    for env, bound, free_max in (("replay/PPO-Qbert", 2, ppo_free_max), ("replay/IMPALA-Qbert", 64, 91.0)):
        for adapter, reuse, most in (("numpy-ring", bound, bound), ("shm-ring", bound, bound),
                                     ("numpy-ring", -1, free_max)):
            kwargs = {"mode": "target", "max_reuse": reuse}
            for rep in range(2):
                rows.append(_row(adapter, 1, rep, 87.0, kind="replay", env=env, env_kwargs=kwargs,
                                 reuse_max=most, reuse_mean=most / 2,
                                 cell_id=f"{adapter}/{env}(max_reuse={reuse},mode=target)/n=1/random"))
    return rows


@pytest.mark.parametrize("ppo_free_max, verdict", [(6.0, claims.REPRODUCED), (2.0, claims.NOT_REPRODUCED)])
def test_bounded_reuse_holds_where_unbounded_sampling_goes_past_the_bound(ppo_free_max, verdict):
    """The survey's claim is that the workloads need a bound, not that rlbench's stores enforce one: the stores'
    reuse_max at the bound is shown, the verdict is whether sampling without it goes past."""
    got = _by_id(claims.matrix([ResultSet.from_rows(_reuse_rows(ppo_free_max), CPU_2CORE)]))["survey-bounded-reuse"]
    assert got.verdict == verdict
    assert got.measured.startswith(f"PPO-Qbert bound 2: unbounded up to {ppo_free_max:.0f} (enforcing it: "
                                   "numpy-ring 2, shm-ring 2)")
    unbounded_only = [r for r in _reuse_rows(6.0) if r["env_kwargs"]["max_reuse"] == -1]
    got = _by_id(claims.matrix([ResultSet.from_rows(unbounded_only, CPU_2CORE)]))["survey-bounded-reuse"]
    assert got.verdict == claims.REPRODUCED and "enforcing" not in got.measured


def test_claims_csv_keeps_its_columns_and_values():
    """claims.csv (and docs/claims.md made from it) is read by scripts: a JudgedClaim writes the columns and text
    the row dicts wrote before it (the cells joined by ' | ', `own` as its note, '' where nothing was found)."""
    from rlbench.families.validation.report import claims_csv
    judged = claims.JudgedClaim("purejaxrl-10x", "PureJaxRL", "says, it", "> 10x", "a rule", claims.NOT_REPRODUCED,
                                measured="1.50x [1.40, 1.60]", why="", cells=("a/x", "b/y"), own=True,
                                ratios=((1.5, 1.4, 1.6),))
    unjudged = claims.JudgedClaim("envpool-dgx", "EnvPool", "1M", "1,069,922", "rate", claims.NOT_COMPARABLE,
                                  why="needs 256 CPU threads", needs="256 CPU threads")
    assert claims_csv([judged, unjudged]).splitlines() == [
        "claim,source,says,published,rule,verdict,measured,why,cells,needs,own",
        'purejaxrl-10x,PureJaxRL,"says, it",> 10x,a rule,not reproduced,"1.50x [1.40, 1.60]",,a/x | b/y,,'
        "rlbench's own implementations",
        "envpool-dgx,EnvPool,1M,\"1,069,922\",rate,not comparable here,,needs 256 CPU threads,,256 CPU threads,"]


def test_a_verdict_the_ci_cannot_settle_is_inconclusive_with_the_repeats_that_would():
    """reproduced only where every ratio's 95% CI lies where the rule holds, not reproduced where one lies wholly
    where it does not, inconclusive otherwise (the median alone would have decided it), naming the repeats that
    would likely settle it; a ratio without a CI (one repeat a side) is never a verdict."""
    from rlbench.families.validation.claims import repeats_to_settle, settled, side
    at_least_10 = lambda r: r >= 10   # noqa: E731
    assert side(at_least_10, 12.0, 11.0, 13.0) == "in"
    assert side(at_least_10, 5.0, 4.0, 6.0) == "out"
    assert side(at_least_10, 12.0, 9.8, 14.4) == "open"
    assert side(at_least_10, 12.0, float("nan"), float("nan")) == "open"
    band = lambda r: abs(r / 1.6 - 1) <= 0.25   # noqa: E731  (within 25% of 1.6: 1.2 to 2.0)
    assert side(band, 1.0, 0.5, 2.5) == "open"   # a CI wider than the band on both sides
    # the half-width 2.4 must shrink to the median's distance 2.0 from the edge: (2.4 / 2.0)^2 x 3 repeats
    assert repeats_to_settle(at_least_10, 12.0, 9.6, 14.4, 3) == 5
    assert repeats_to_settle(at_least_10, 12.0, 11.0, 13.0, 3) == 0
    assert settled([("Pong", "out", 0, (0.9, 0.8, 1.0)), ("Ant", "open", 9, (1.3, 1.1, 1.5))]) == ""
    assert settled([("", "in", 0, (12.0, 11.0, 13.0))]) == ""
    why = settled([("Pong", "in", 0, (1.6, 1.5, 1.7)), ("Ant", "open", 9, (1.3, 1.1, 1.5))])
    assert why == "Ant: the 95% CI of 1.30x [1.10, 1.50] reaches both sides of the rule: about 9 repeats a side " \
                  "would likely settle it"


def test_a_ratios_two_sides_come_from_one_run():
    """Issue 66: pairs were taken from two runs hours apart (purejaxrl-10x on the EPYC). A ratio whose sides only
    runs apart hold is `not measured`, naming the runs; where one run holds both, its own repeats make the ratio
    (not a cell of the same id an earlier run holds)."""
    jax_rows, torch_rows = _ppo(150000.0, 10000.0)[0::2], _ppo(150000.0, 10000.0)[1::2]
    apart = _by_id(claims.matrix([ResultSet.from_rows(jax_rows, {**CPU_2CORE, "run_id": "jax-run"}),
                                  ResultSet.from_rows(torch_rows, {**CPU_2CORE, "run_id": "torch-run"})]))
    got = apart["purejaxrl-10x"]
    assert got.verdict == claims.NOT_MEASURED and not got.ratios
    assert "different runs (jax-run, torch-run)" in got.why and "suites/validate.toml" in got.why
    # the first run holds only the jax side (at a rate that would not reproduce); the second holds both
    slow_jax = _ppo(60000.0, 10000.0)[0::2]
    together = _by_id(claims.matrix([ResultSet.from_rows(slow_jax, {**CPU_2CORE, "run_id": "a"}),
                                     ResultSet.from_rows(_ppo(150000.0, 10000.0), {**CPU_2CORE, "run_id": "b"})]))
    assert together["purejaxrl-10x"].verdict == claims.REPRODUCED
    assert together["purejaxrl-10x"].ratios[0][0] == pytest.approx(15.0)


def test_run_to_run_noise_from_aa_runs_widens_a_ratios_ci_and_can_open_a_verdict():
    """Issue 66: a claim's CI accounts for run-to-run noise, not only the repeats of one run. The noise is learned
    from A/A runs (each cell's log median across the runs, pooled over the cells, floored at 1%); each side's
    median moves by it between runs, so the log ratio's CI gains 1.96 sqrt(2) sd in quadrature."""
    from rlbench.results.changes import RUN_SD_FLOOR, aa_noise
    from rlbench.results.stats import widened

    def aa(rate):
        return ResultSet.from_rows([_row("serial", 4, rep, rate * (1 + 0.001 * rep)) for rep in range(3)], CPU_2CORE)
    noise = aa_noise([aa(1000.0), aa(1100.0), aa(1000.0 * 1.1 ** 2)])
    assert noise.sd == pytest.approx(math.log(1.1), rel=1e-3) and noise.dof == 2   # log medians 0, 1, 2 x log 1.1
    assert noise.source == "A/A: 3 runs, 1 cells"
    assert aa_noise([aa(1000.0)]).sd == RUN_SD_FLOOR and aa_noise([aa(1000.0), aa(1000.0)]).sd == RUN_SD_FLOOR
    ratio, low, high = widened(2.0, 2.0 / 1.05, 2.0 * 1.05, 0.05)
    extra = 1.959964 * math.sqrt(2) * 0.05
    assert ratio == 2.0 and math.log(high / 2.0) == pytest.approx(math.hypot(math.log(1.05), extra), rel=1e-4)
    assert math.log(2.0 / low) == pytest.approx(math.hypot(math.log(1.05), extra), rel=1e-4)
    assert widened(2.0, float("nan"), float("nan"), 0.05)[1] != widened(2.0, float("nan"), float("nan"), 0.05)[1]
    # 12x with a tight CI reproduces PureJaxRL's >= 10x on one run's repeats; with 10% run-to-run noise it cannot
    run = [ResultSet.from_rows(_ppo(120000.0, 10000.0), CPU_2CORE)]
    assert _by_id(claims.matrix(run))["purejaxrl-10x"].verdict == claims.REPRODUCED
    noisy = _by_id(claims.matrix(run, noise=noise))["purejaxrl-10x"]
    assert noisy.verdict == claims.INCONCLUSIVE and noisy.ratios[0][1] < 10.0 < noisy.ratios[0][2]
    # 12x is 0.18 from the edge in log space, the run-to-run part alone 0.26 wide: more repeats cannot settle it
    assert noisy.why.endswith("the run-to-run noise alone reaches its edge: no number of repeats in one run would "
                              "settle it")
    at_least_10 = lambda r: r >= 10   # noqa: E731
    assert claims.repeats_to_settle(at_least_10, 12.0, 9.6, 14.4, 3, run_sd=0.1) is None
    # a small run-to-run part leaves the repeats' share to shrink: more repeats than without it
    assert claims.repeats_to_settle(at_least_10, 12.0, 9.6, 14.4, 3, run_sd=0.05) == 7 > \
        claims.repeats_to_settle(at_least_10, 12.0, 9.6, 14.4, 3) == 5


def test_validate_refuses_a_noise_folder_that_is_not_a_run(tmp_path, capsys):
    base = REPO / "reports" / "reference" / "cpu-2core-epyc"
    got = run_cli(["validate", "--from", base / "validate", "--noise-from", tmp_path / "nothing",
                   "--claims-out", tmp_path / "out"])
    assert got.rc == 2 and "--noise-from" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_validate_refuses_aa_runs_of_another_machine(tmp_path, capsys):
    """A/A runs say how one machine's runs vary: the Xeon's are no measure of the EPYC's noise."""
    ref = REPO / "reports" / "reference"
    got = run_cli(["validate", "--from", ref / "cpu-2core-epyc" / "validate", "--noise-from",
                   ref / "cpu-2core-xeon" / "check-history" / "aa-00", "--claims-out", tmp_path / "out"])
    err = capsys.readouterr().err
    assert got.rc == 2 and "a run of another machine (Intel(R) Xeon(R) Processor x2" in err and "AMD EPYC" in err
    assert not (tmp_path / "out").exists()


def _storage_rows(r2d2_kept: tuple) -> list:
    """Target-mode cells of the three workloads (1 GB buffers): numpy-ring keeps up everywhere but on R2D2, where
    its repeats' keeps_up are r2d2_kept; memmap (cold) never does; a store with a rate limiter is not counted."""
    rows = []
    for env in ("replay/IMPALA-Qbert", "replay/R2D2-Qbert", "replay/DQN-Qbert"):
        for adapter, options, kept in (("numpy-ring", {}, r2d2_kept if "R2D2" in env else (1.0, 1.0)),
                                       ("memmap", {"cache": "cold"}, (0.0, 0.0)),
                                       ("reverb", {"rate_limiter": "sample-to-insert"}, (0.0, 0.0))):
            kwargs = {"mode": "target", "max_mb": 1024}
            for rep, flag in enumerate(kept):
                rows.append(_row(adapter, 1, rep, 50.0, kind="replay", env=env, env_kwargs=kwargs, options=options,
                                 keeps_up=flag, cell_id=f"{adapter}/{env}(mode=target)/n=1/random/{options}"))
    return rows


@pytest.mark.parametrize("r2d2_kept, verdict", [((1.0, 1.0), claims.NOT_REPRODUCED), ((1.0, 0.0), claims.REPRODUCED)])
def test_storage_is_the_bottleneck_only_where_no_store_keeps_up_with_a_workload(r2d2_kept, verdict):
    """The survey's storage claim in its fair form: at the workloads' add and sample rates together, is there a
    store that keeps up in every repeat? A store behind in one repeat does not keep up."""
    got = _by_id(claims.matrix([ResultSet.from_rows(_storage_rows(r2d2_kept), CPU_2CORE)]))["storage-bottleneck"]
    assert got.verdict == verdict
    assert "IMPALA-Qbert: 1 of 2 stores keep up (numpy-ring 2/2); behind: memmap (cold cache) 0/2" in got.measured
    assert "reverb" not in got.measured
