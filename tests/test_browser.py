"""The report in a real browser: headless Chromium (Debian's, `make browser`) driven by Playwright, network
cut off. No console error, every chart drawn with data points, every table filled, sorting works; the
screenshot is kept in reports/artifacts/ as a test artifact."""
import importlib.util

import pytest

from conftest import REPO
from rlbench.compare import compare
from rlbench.report import compare as compare_report
from rlbench.report.html import HtmlReporter
from test_report_html import results

ARTIFACTS = REPO / "reports" / "artifacts"
spec = importlib.util.spec_from_file_location("check_report", REPO / "scripts" / "check_report.py")
check_report = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_report)



def test_report_renders_in_chromium(tmp_path):
    assert check_report.chromium_path(), "Chromium is missing: run `make browser` (part of `make test`)"
    HtmlReporter().report(results(), str(tmp_path))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "report.png"
    assert check_report.check(str(tmp_path / "index.html"), str(shot)) == []
    assert shot.stat().st_size > 10_000


def test_comparison_renders_in_chromium(tmp_path):
    res = results()
    compare_report.write(compare(res, res), "base", "new", str(tmp_path))
    assert check_report.check(str(tmp_path / "compare.html"), require_charts=False) == []


def test_a_broken_page_is_caught(tmp_path):
    page = tmp_path / "bad.html"
    page.write_text("<html><body><svg class='chart' width='100' height='50'></svg><table><tbody></tbody></table>"
                    "<img src='http://example.com/x.png'><script>undefinedFunction()</script></body></html>")
    problems = check_report.check(str(page))
    assert any("page error" in p and "undefinedFunction" in p for p in problems), problems
    assert any("network request: http://example.com/x.png" in p for p in problems), problems
    assert any("has no data points" in p for p in problems) and any("is empty" in p for p in problems)
