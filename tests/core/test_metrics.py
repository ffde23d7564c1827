"""The metrics registry is the one list: the sessions' allowed names, the CSV columns of figures, every
figure's header, unit and format, and the docs' reference (docs/metrics.md) all come from it; each family owns its own."""
import math
import re

import pytest
from support import REPO

from rlbench import registry
from rlbench.contract import Family
from rlbench.results import metrics, model
from rlbench.results.model import RUN_COLUMNS, SUMMARY_COLUMNS, ResultSet

FAMILIES = {"all", *(f.name for f in registry.families())}
REFERENCE = REPO / "reports" / "reference"


def test_docs_reference_is_the_registry():
    text = (REPO / "docs" / "metrics.md").read_text()
    block = re.search(r"<!-- metrics:begin -->\n(.*?)<!-- metrics:end -->", text, re.S)
    assert block, "docs/metrics.md lacks the metrics block"
    assert block.group(1) == metrics.markdown(), \
        "docs/metrics.md is stale: paste `python -m rlbench.results.metrics` between its markers"
    listed = re.findall(r"^\| `(\w+)` \|", block.group(1), re.M)
    assert listed == list(metrics.METRICS), "the reference lists every registered figure once, in registry order"


def test_every_metric_has_its_columns_a_label_and_a_format():
    for m in metrics.METRICS.values():
        assert m.family in FAMILIES and m.description and not m.description.endswith("."), m.name
        assert "|" not in m.description and m.label, m.name
        assert (m.name in RUN_COLUMNS) == m.row, m.name
        assert all(c in SUMMARY_COLUMNS for c in m.columns()), m.name
        assert m.format(1.5) != "-" and m.format(None) == "-" and m.format(math.nan) == "-"
        for column in m.summary_columns():
            got = metrics.metric(column.name)
            assert got.name == column.name and got.label and got.description and got.format(2.0) != "-"


def test_every_figure_column_is_registered():
    """A column of either CSV is an identity, setting or outcome column listed by hand, a family's info fact,
    or a registered figure (its per-repeat value or one of its summary aggregates)."""
    facts = set(model.RUN_IDENTITY) | set(model.RUN_SETTINGS) | set(model.RUN_OUTCOME) | set(model.FAMILY_INFO)
    for column in RUN_COLUMNS:
        assert column in facts or metrics.metric(column).row, column
    facts = set(model.SUMMARY_IDENTITY) | {k for f in registry.families() for k in f.identity_keys}
    facts |= {"n", "status", "ci_method", "warning", "error", "profile"}
    for column in SUMMARY_COLUMNS:
        assert column in facts or metrics.metric(column), column
    assert {c for c in SUMMARY_COLUMNS if c not in facts} == {
        c.name for m in metrics.METRICS.values() for c in m.summary_columns()}


def test_families_own_their_metrics():
    for f in registry.families():
        for m in f.metrics:
            assert metrics.METRICS[m.name].family == f.name
            if m.source == "info":
                assert m.name in f.info_keys, f"{f.name}: {m.name} is reported in info but not an info key"
            if m.source == "family":
                assert m.name in f.summary_keys, f"{f.name}: {m.name} is computed but not a summary key"
    assert set(model.FAMILY_SUMMARY) == {n for n, m in metrics.METRICS.items() if m.source == "family"}
    harness = {n for n, m in metrics.METRICS.items() if m.family == "all"}
    assert {"steps_per_s", "latency_p99_ms", "setup_s", "wall_s", "policy_frac"} <= harness


def test_a_name_registered_twice_is_refused(monkeypatch):
    class Twice(Family):
        name = "twice"
        metrics = (metrics.Metric("steps_per_s", "steps/s", "again"),)

    monkeypatch.setattr(registry, "families", lambda: (Twice(),))
    metrics._assembled.cache_clear()
    try:
        with pytest.raises(ValueError, match="steps_per_s of twice is already registered by all"):
            metrics.metrics()
    finally:
        monkeypatch.undo()
        metrics._assembled.cache_clear()
    assert "updates_per_s" in metrics.METRICS


def test_a_bad_unit_or_aggregate_is_refused():
    with pytest.raises(ValueError, match="unit 'furlongs'"):
        metrics.Metric("x", "furlongs", "what")
    with pytest.raises(ValueError, match="aggregate 'mode'"):
        metrics.Metric("x", "s", "what", summary=("mode",))


def test_session_metrics_are_the_session_figures_in_order():
    assert metrics.SESSION_METRICS == tuple(m.name for m in metrics.METRICS.values() if m.session)
    assert len(set(metrics.SESSION_METRICS)) == len(metrics.SESSION_METRICS)
    assert {"updates_per_s", "keeps_up", "state_gb_per_s"} <= set(metrics.SESSION_METRICS)
    assert not {"steps_per_s", "compile_s", "limit_frac"} & set(metrics.SESSION_METRICS)


def test_one_format_per_figure_and_its_summary_columns():
    m = metrics.metric
    assert m("latency_p99_ms").format(1.23456) == "1.235" and m("latency_p99_ms").label == "p99 ms"
    assert m("latency_p99_ms_median").format(1.23456) == "1.235" and m("latency_p99_ms_median").label == "p99 ms"
    assert m("env_frac").format(0.25) == "25.0%"
    assert m("steps_per_s_median").format(12345.6) == "12,346" and m("steps_per_s_median").label == "steps/s median"
    assert m("steps_per_s_ci_low").unit == "steps/s" and m("steps_per_s_ci_low").of == "steps_per_s"
    assert m("steps_per_s_cv").format(0.123) == "12.3%" and m("steps_per_s_cv").label == "steps/s CV"
    assert m("peak_rss_mb_max").label == "peak RSS MB" and m("policy_frac_median").format(0.5) == "50.0%"
    assert m("limit_frac").family == "replay" and m("limit_frac").format(0.5) == "50.0%"
    assert m("compile_s").family == "jax" and m("compile_s").format(12.345) == "12.3"
    for name in ("cell_id", "ci_method", "status", "steps_per_s_p99"):
        with pytest.raises(KeyError):
            m(name)


@pytest.mark.parametrize("folder", sorted(str(p.relative_to(REFERENCE)) for p in REFERENCE.glob("*/*")
                                    if (p / "results.jsonl").exists()))
def test_committed_reference_runs_rebuild_every_committed_column(folder):
    """Old run folders still load: every column of their committed CSVs is one of ours, with the same cells."""
    import csv
    import io

    from rlbench.report.csv_reporter import frame_to_csv
    run_dir = REFERENCE / folder
    results = ResultSet.load(str(run_dir))
    ours = {"results.csv": frame_to_csv(results.runs_frame()), "summary.csv": frame_to_csv(results.summary_frame())}
    for name in ("results.csv", "summary.csv"):
        with open(run_dir / name, newline="") as f:
            committed = list(csv.DictReader(f))
        rebuilt = list(csv.DictReader(io.StringIO(ours[name])))
        assert set(committed[0]) <= set(rebuilt[0]), set(committed[0]) - set(rebuilt[0])
        assert len(rebuilt) == len(committed)
        for ours_row, theirs in zip(rebuilt, committed):
            for k, v in theirs.items():  # the committed Student-t CIs were made with a t table rounded to 3
                same = ours_row[k] == v or k.endswith(("_ci_low", "_ci_high")) and _close(ours_row[k], v)  # decimals
                assert same, (name, theirs["cell_id"], k, ours_row[k], v)


def _close(a: str, b: str) -> bool:
    try:
        return math.isclose(float(a), float(b), rel_tol=1e-3)
    except ValueError:
        return False
