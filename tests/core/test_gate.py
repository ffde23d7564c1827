"""The one regression gate (rlbench.results.gate): one vocabulary of verdicts of which only `slower` fails, one
exit rule, one counts label, one ratio label, a confirmation that makes new values, and one table that writes each
gate's CSV with the columns that gate names."""
import math
from dataclasses import FrozenInstanceError

import pytest

from rlbench.report.csv_reporter import frame_to_csv
from rlbench.results import gate
from rlbench.results.changes import CHECK_COLUMNS
from rlbench.results.compare import COLUMNS
from rlbench.results.gate import VERDICTS, CellChange, confirmed, counts_label, exit_code, ratio_label


def test_one_vocabulary_where_only_slower_fails():
    assert set(VERDICTS) == {"slower", "faster", "same", "uncertain", "not comparable", "failed", "not run",
                             "only in base", "only in new", "no history"}
    assert [v for v, fails in VERDICTS.items() if fails] == ["slower"]
    with pytest.raises(ValueError, match="verdict 'regressed'"):
        CellChange("a", "regressed")
    with pytest.raises(FrozenInstanceError):
        CellChange("a", "same").verdict = "slower"


def test_exit_rule_counts_and_ratio_label():
    changes = [CellChange("a", "same"), CellChange("b", "slower", ratio=0.8), CellChange("c", "failed"),
               CellChange("d", "same"), CellChange("e", "no history")]
    assert exit_code(changes) == 1 and [c.cell_id for c in gate.regressions(changes)] == ["b"]
    assert exit_code([c for c in changes if c.verdict != "slower"]) == 0 and exit_code([]) == 0
    assert counts_label(changes) == "1 failed, 1 no history, 2 same, 1 slower"
    assert changes[1].change_pct == pytest.approx(-20.0) and changes[0].change_pct is None
    assert ratio_label(CellChange("a", "faster", ratio=1.29, ratio_low=1.1, ratio_high=1.52)) == "1.29x [1.10, 1.52]"
    assert ratio_label(CellChange("a", "same", ratio=0.8)) == "0.80x"   # the history gate: no CI
    assert ratio_label(CellChange("a", "faster", ratio=math.nan)) == ""


def test_a_confirmation_makes_new_values_and_keeps_the_first_verdict():
    first = CellChange("a", "slower", ratio=0.7, reason="30.0% below", first_verdict="slower")
    kept = confirmed(first, CellChange("a", "slower", ratio=0.72))
    cleared = confirmed(first, CellChange("a", "same", ratio=1.01))
    gone = confirmed(first, None)
    assert (kept.verdict, kept.confirm_ratio, kept.reason) == ("slower", 0.72, "30.0% below")
    assert (cleared.verdict, cleared.first_verdict, cleared.confirm_ratio) == ("same", "slower", 1.01)
    assert cleared.reason == "30.0% below; not in its confirmation run (+1.0%)"
    assert gone.reason.endswith("(no ok repeat)") and gone.confirm_ratio is None
    assert first.verdict == "slower" and first.confirm_ratio is None   # never mutated


def test_each_gate_names_its_csv_columns():
    """The columns and values of compare.csv and history-check.csv, as they were when each gate wrote dicts."""
    pair = CellChange("a/x", "slower", base=100.0, new=80.0, ratio=0.8, ratio_low=0.787129, ratio_high=0.813131,
                      p_value=0.00793651, reason="20.0% slower, significant (mann-whitney-exact)",
                      test="mann-whitney-exact", base_n=5, new_n=5, base_ci_low=99.0207, base_ci_high=100.984,
                      new_ci_low=79.0212, new_ci_high=80.9846)
    assert frame_to_csv(gate.table([pair, CellChange("b/x", "only in new")], COLUMNS)).splitlines() == [
        "cell_id,verdict,base_median,new_median,ratio,ratio_ci_low,ratio_ci_high,change_pct,p_value,test,base_n,"
        "new_n,base_ci_low,base_ci_high,new_ci_low,new_ci_high,reason",
        "a/x,slower,100,80,0.8,0.787129,0.813131,-20,0.00793651,mann-whitney-exact,5,5,99.0207,100.984,79.0212,"
        '80.9846,"20.0% slower, significant (mann-whitney-exact)"',
        "b/x,only in new,,,,,,,,,,,,,,,"]
    history = CellChange("a/x", "same", base=95628.3, new=77207.0, ratio=0.807365, p_value=5.61198e-06,
                         reason="cleared", test="t prediction, Holm", p_holm=2.24479e-05, window=8,
                         noise_sd=0.0183031, noise_source="A/A: 8 runs of this cell", first_verdict="slower",
                         confirm_ratio=1.01)
    assert frame_to_csv(gate.table([history, CellChange("b/x", "failed", reason="no ok repeat", first_verdict="failed")],
                              CHECK_COLUMNS)).splitlines() == [
        "cell_id,verdict,new_median,level_median,ratio,p_value,p_holm,window,noise_sd,noise_source,first_verdict,"
        "confirm_ratio,reason",
        "a/x,same,77207,95628.3,0.807365,5.61198e-06,2.24479e-05,8,0.0183031,A/A: 8 runs of this cell,slower,1.01,"
        "cleared",
        "b/x,failed,,,,,,,,,failed,,no ok repeat"]
