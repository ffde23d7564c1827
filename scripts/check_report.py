"""Open a report in headless Chromium (Debian's, driven by Playwright) with the network cut off, and check
what a reader would see: no console error, every chart drawn with data points, every table filled,
sorting works; keep a full-page screenshot.

    .venv/bin/python scripts/check_report.py reports/latest/index.html --screenshot report.png

Exit 1 and one line per problem when something is wrong. `make browser` installs Chromium.
"""
import argparse
import os
import shutil
import sys

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]

INSPECT = """() => {
  const charts = Array.from(document.querySelectorAll('svg')).map((s, i) => ({
    i, cls: s.getAttribute('class') || '', points: s.querySelectorAll('circle').length,
    bars: s.querySelectorAll('rect[fill]:not([fill="none"])').length, lines: s.querySelectorAll('polyline').length,
    width: s.getBoundingClientRect().width, height: s.getBoundingClientRect().height}));
  const tables = Array.from(document.querySelectorAll('table')).map((t, i) => ({
    i, rows: t.tBodies.length ? t.tBodies[0].rows.length : t.rows.length, sortable: t.classList.contains('sortable'),
    heading: (t.previousElementSibling && t.previousElementSibling.textContent || '').slice(0, 60)}));
  return {charts, tables, title: document.title};
}"""


def chromium_path() -> str:
    return os.environ.get("RLBENCH_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser") or ""


def check(path: str, screenshot: str = None, require_charts: bool = True) -> list:
    """The problems a reader would meet in the report at `path` ([] when none)."""
    from playwright.sync_api import sync_playwright
    exe = chromium_path()
    if not exe:
        return ["no Chromium found (make browser installs Debian's chromium)"]
    problems, console = [], []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(offline=True, viewport={"width": 1280, "height": 900})
            context.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:")
                          else (console.append(f"network request: {route.request.url}"), route.abort()))
            page = context.new_page()
            page.on("console", lambda m: console.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: console.append(f"page error: {e}"))
            page.goto("file://" + os.path.abspath(path))
            page.wait_for_load_state("load")
            seen = page.evaluate(INSPECT)
            for c in seen["charts"]:
                if c["width"] <= 0 or c["height"] <= 0:
                    problems.append(f"chart {c['i']} ({c['cls']}) is not rendered")
                elif c["points"] == 0 and c["bars"] == 0:
                    problems.append(f"chart {c['i']} ({c['cls']}) has no data points")
            for t in seen["tables"]:
                if t["rows"] == 0:
                    problems.append(f"table {t['i']} ({t['heading']!r}) is empty")
            if require_charts and not seen["charts"]:
                problems.append("no chart in the report")
            problems += _sorting_works(page)
            if screenshot:
                page.screenshot(path=screenshot, full_page=True)
        finally:
            browser.close()
    return console + problems


def _sorting_works(page) -> list:
    """Clicking a numeric header of the first sortable table with 2+ rows orders it, twice reverses it."""
    table = next((t for t in page.query_selector_all("table.sortable") if len(t.query_selector_all("tbody tr")) > 1),
                 None)
    if table is None:
        return []
    headers = table.query_selector_all("th")
    for col, th in enumerate(headers):
        values = [_num(td.get_attribute("data-v") or td.inner_text())
                  for td in table.query_selector_all(f"tbody tr td:nth-child({col + 1})")]
        if len(values) < 2 or any(v is None for v in values) or len(set(values)) < 2:
            continue
        th.click()
        asc = [_num(td.get_attribute("data-v") or td.inner_text())
               for td in table.query_selector_all(f"tbody tr td:nth-child({col + 1})")]
        th.click()
        desc = [_num(td.get_attribute("data-v") or td.inner_text())
                for td in table.query_selector_all(f"tbody tr td:nth-child({col + 1})")]
        if asc != sorted(values) or desc != sorted(values, reverse=True):
            return [f"sorting by column {col} ({th.inner_text().strip()!r}) does not order the rows"]
        return []
    return []


def _num(text):
    try:
        return float(str(text).strip().rstrip("x%"))
    except ValueError:
        return None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("report", help="index.html (or compare.html) to open")
    p.add_argument("--screenshot", help="write a full-page PNG here")
    args = p.parse_args(argv)
    if not os.path.exists(args.report):
        print(f"check_report: {args.report} does not exist", file=sys.stderr)
        return 2
    problems = check(args.report, args.screenshot, require_charts=not args.report.endswith("compare.html"))
    for line in problems:
        print(f"check_report: {line}", file=sys.stderr)
    print(f"check_report: {args.report}: {'ok' if not problems else f'{len(problems)} problem(s)'}"
          + (f"; screenshot {args.screenshot}" if args.screenshot else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
