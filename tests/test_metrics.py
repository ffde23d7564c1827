"""The metrics registry is the one list: the sessions' allowed names, the summary columns and the README's
reference all come from it."""
import math
import re

from conftest import REPO

from rlbench import registry
from rlbench.results import metrics
from rlbench.results.model import RUN_COLUMNS, SUMMARY_COLUMNS


def test_readme_reference_is_the_registry():
    text = (REPO / "README.md").read_text()
    block = re.search(r"<!-- metrics:begin -->\n(.*?)<!-- metrics:end -->", text, re.S)
    assert block, "README lacks the metrics block"
    assert block.group(1) == metrics.markdown(), "README is stale: paste `python -m rlbench.results.metrics` into it"


FAMILIES = {"all", *(f.name for f in registry.families())}


def test_every_metric_has_a_column_and_a_format():
    for m in metrics.METRICS.values():
        assert m.family in FAMILIES and m.description and not m.description.endswith(".")
        assert m.name in RUN_COLUMNS, m.name
        if m.summary == "median":
            assert f"{m.name}_median" in SUMMARY_COLUMNS, m.name
        assert m.format(1.5) != "-" and m.format(None) == "-" and m.format(math.nan) == "-"


def test_session_metrics_are_the_session_figures_in_order():
    assert metrics.SESSION_METRICS == tuple(m.name for m in metrics.METRICS.values() if m.session)
    assert len(set(metrics.SESSION_METRICS)) == len(metrics.SESSION_METRICS)
    assert metrics.metric("latency_p99_ms").format(1.23456) == "1.235"
    assert metrics.metric("env_frac").format(0.25) == "25.0%"
