"""The run's headline, a sentence per workload (env x policy) in the style of hyperfine's "X ran 1.52 ±
0.03 times faster than Y": the fastest cell, its speedup over the serial loop with the bootstrap 95% CI, the
runner-up of another strategy as a fraction of it (the same CI) and whether the lead is significant. Printed last by `rlbench run`, boxed on
top of index.html; a hook of every family (rlbench.contract.Family.headlines)."""
import re

from support.result_rows import _row

from rlbench import registry
from rlbench.families.stepping.report import headlines
from rlbench.report import export
from rlbench.report.html import export_html
from rlbench.results.model import ResultSet
from rlbench.results.stats import ratio_ci
from rlbench.results.text import sig, speedup

EA16 = "envpool-async/CartPole-v1/n=16/random/batch_size=8"


def _cells(*cells, repeats=3):
    """(adapter, num_envs, steps/s, extra row fields) -> a ResultSet of `repeats` runs each."""
    return ResultSet.from_rows([_row(adapter, n, rep, rate, **extra)
                                for rep in range(repeats) for adapter, n, rate, extra in cells], {})


def _repeats(res, cell_id):
    return [r["steps_per_s"] for r in res.benchmarks[cell_id].ok_runs]


def clear_winner(repeats=3):
    return _cells(("serial", 1, 1000.0, {}), ("serial", 4, 990.0, {}), ("gymnasium-async", 4, 1600.0, {}),
                  ("envpool-async", 16, 4000.0, {"options": {"batch_size": 8}, "batch_size": 8, "cell_id": EA16}),
                  ("impala", 8, 50000.0, {"kind": "learner"}),       # learners train as well: never compete
                  ("rlpyt-async", 8, 90000.0, {"kind": "runner"}),   # nor do runners
                  repeats=repeats)


def test_a_clear_winner_is_named_with_its_speedup_ci_and_a_significant_lead():
    res = clear_winner()
    ratio, low, high = ratio_ci(_repeats(res, EA16), _repeats(res, "serial/CartPole-v1/n=1/random"))
    assert 3.9 < low < ratio < high < 4.1
    lead, lead_low, lead_high = ratio_ci(_repeats(res, EA16), _repeats(res, "gymnasium-async/CartPole-v1/n=4/random"))
    assert 1 < lead_low < lead < lead_high
    assert headlines(res) == [
        f"CartPole-v1 · random: envpool-async (num_envs=16, batch_size=8) is fastest at "
        f"{sig(4000.0 * 1.01)} env steps/s, {speedup(ratio, low, high)} the serial loop (serial, num_envs=1); "
        f"runner-up gymnasium-async (num_envs=4) at {speedup(1 / lead, 1 / lead_high, 1 / lead_low)} of it, "
        "lead significant"]
    assert sig(4040.0) == "4.04k" and re.fullmatch(r"4\.00x \[\d\.\d\d, \d\.\d\d\]", speedup(ratio, low, high))
    assert re.fullmatch(r"0\.40x \[0\.\d\d, 0\.\d\d\]", speedup(1 / lead, 1 / lead_high, 1 / lead_low))


def test_a_tie_is_not_a_significant_lead():
    res = _cells(("serial", 1, 1000.0, {}), ("gymnasium-async", 4, 2000.0, {}),
                 ("envpool-sync", 4, 2010.0, {}), ("envpool-sync", 16, 1500.0, {}))
    [line] = headlines(res)
    assert line.startswith("CartPole-v1 · random: envpool-sync (num_envs=4) is fastest at 2.03k env steps/s, 2.01x [")
    share = re.search(r"; runner-up gymnasium-async \(num_envs=4\) at 1\.00x \[(\S+), (\S+)\] of it, lead not "
                      r"significant \(the 95% CI includes 1x\)$", line)
    assert share and float(share[1]) < 1 < float(share[2]), line


def test_the_runner_up_is_another_strategy_not_the_winner_at_another_size():
    res = _cells(("serial", 1, 1000.0, {}), ("envpool-sync", 16, 3000.0, {}), ("envpool-sync", 4, 2900.0, {}),
                 ("gymnasium-sync", 4, 1200.0, {}))
    [line] = headlines(res)
    assert re.search(r"runner-up gymnasium-sync \(num_envs=4\) at 0\.40x \[[\d.]+, [\d.]+\] of it, lead significant$",
                     line), line


def test_options_make_another_strategy():
    opt = {"options": {"shared_memory": False}, "cell_id": "gymnasium-async/CartPole-v1/n=4/random/shm=false"}
    res = _cells(("gymnasium-async", 4, 3000.0, {}), ("gymnasium-async", 4, 1500.0, opt))
    [line] = headlines(res)
    assert "; runner-up gymnasium-async (num_envs=4, shared_memory=false) at 0.50x [" in line


def test_without_a_serial_loop_there_is_no_ratio():
    res = _cells(("gymnasium-async", 4, 1600.0, {}), ("gymnasium-sync", 4, 800.0, {}))
    [line] = headlines(res)
    assert re.fullmatch(r"CartPole-v1 · random: gymnasium-async \(num_envs=4\) is fastest at 1\.62k env steps/s, no "
                        r"serial loop measured to compare with; runner-up gymnasium-sync \(num_envs=4\) at 0\.50x "
                        r"\[0\.\d\d, 0\.\d\d\] of it, lead significant", line), line
    assert "the serial loop (" not in line


def test_a_single_strategy_and_the_loop_itself():
    [line] = headlines(_cells(("serial", 1, 1000.0, {}), ("serial", 4, 900.0, {})))
    assert line == ("CartPole-v1 · random: serial (num_envs=1) is fastest at 1.01k env steps/s, the serial loop "
                    "itself; the only strategy measured")


def test_one_repeat_leaves_the_lead_untested():
    [line] = headlines(clear_winner(repeats=1))
    assert "4.00x the serial loop (serial, num_envs=1)" in line  # no CI from one repeat per cell
    assert line.endswith("runner-up gymnasium-async (num_envs=4) at 0.40x of it, lead untested (fewer than 2 repeats)")


def test_no_successful_cell_no_headline():
    failed = {"status": "error", "error": "boom"}
    assert headlines(_cells(("serial", 1, 1000.0, failed), ("gymnasium-async", 4, 1600.0, failed))) == []
    assert headlines(_cells(("impala", 8, 5000.0, {"kind": "learner"}))) == []
    assert headlines(ResultSet.from_rows([], {})) == []


def test_a_headline_per_workload_in_suite_order():
    synth = {"env": "rlbench/Synthetic-v0", "env_kwargs": {"step_cost_us": 100.0}}
    mlp = {"policy": "mlp64x64-cpu-t1"}
    res = _cells(("serial", 1, 1000.0, {}), ("serial", 1, 500.0, {**synth, "cell_id": "s-synth"}),
                 ("gymnasium-async", 4, 900.0, {**synth, "cell_id": "g-synth"}),
                 ("serial", 1, 300.0, {**mlp, "cell_id": "s-mlp"}))
    assert [line.split(":")[0] for line in headlines(res)] == [
        "CartPole-v1 · random", "rlbench/Synthetic-v0 (step_cost_us=100) · random", "CartPole-v1 · mlp64x64-cpu-t1"]


def test_every_family_has_the_hook_and_only_stepping_answers_here():
    res = clear_winner()
    by_family = {f.name: f.headlines(res) for f in registry.families()}
    assert by_family.pop("stepping") == headlines(res)
    assert all(lines == [] for lines in by_family.values())


def test_the_page_opens_with_the_headline_box(tmp_path):
    res = clear_winner()
    export(res, str(tmp_path), [export_html])
    page = (tmp_path / "index.html").read_text()
    box = page.index("<div class='headlines'><ul><li>CartPole-v1 · random: envpool-async (num_envs=16, "
                     "batch_size=8) is fastest at 4.04k env steps/s")
    assert page.index("<h1>") < box < page.index("<h2>")
    assert "lead significant</li></ul></div>" in page
    (tmp_path / "none").mkdir()
    export(_cells(("serial", 1, 1000.0, {"status": "error", "error": "x"})), str(tmp_path / "none"), [export_html])
    assert "class='headlines'" not in (tmp_path / "none" / "index.html").read_text()


def test_a_run_ends_with_its_headlines(cli_run):
    run = cli_run(["run", "--adapter", "serial", "--adapter", "gymnasium-sync", "--env", "CartPole-v1",
                   "--num-envs", "2", "--repeats", "2", "--duration", "0.05"])
    assert run.rc == 0, run.stderr
    tail = run.stdout.rstrip("\n").splitlines()[-2:]
    assert tail[0] == "Summary"
    assert re.fullmatch(r"  CartPole-v1 · random: (serial|gymnasium-sync) \(num_envs=2\) is fastest at \S+ env "
                        r"steps/s, .*; runner-up (serial|gymnasium-sync) \(num_envs=2\) at [01]\.\d\dx \[\S+, \S+\] of "
                        r"it, lead (significant|not significant \(the 95% CI includes 1x\))", tail[1]), tail[1]
    assert "<div class='headlines'>" in (run.out / "index.html").read_text()
