"""Open a report in headless Chromium (Debian's, driven by Playwright) with the network cut off, and check
what a reader would see: plotly.js inlined once, every chart drawn (an SVG with the traces its div says it
has, data points on them), no overlapping data labels, hover shows median / CI / n / CV, a legend click hides
a series, no console error, no request leaving the page, every table filled, sorting works; keep a
full-page screenshot.

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
  const overlaps = (boxes) => {
    let n = 0;
    for (let a = 0; a < boxes.length; a++) for (let b = a + 1; b < boxes.length; b++) {
      const p = boxes[a], q = boxes[b];
      if (p.left < q.right - 1 && q.left < p.right - 1 && p.top < q.bottom - 1 && q.top < p.bottom - 1) n++;
    }
    return n;
  };
  const charts = Array.from(document.querySelectorAll('.plotly-graph-div')).map((gd, i) => {
    const svg = gd.querySelector('.main-svg'), box = gd.getBoundingClientRect();
    const holder = gd.closest('[data-traces]');
    const labels = Array.from(gd.querySelectorAll('.cartesianlayer .textpoint text, .cartesianlayer .bartext'))
      .filter(t => t.textContent && getComputedStyle(t).display !== 'none' && t.getAttribute('opacity') !== '0')
      .map(t => t.getBoundingClientRect()).filter(r => r.width > 0);
    return {i, id: gd.id, svg: !!svg, width: box.width, height: box.height,
            expected: holder ? Number(holder.dataset.traces) : null, data: (gd.data || []).length,
            drawn: gd.querySelectorAll('.cartesianlayer g.trace').length,
            points: gd.querySelectorAll('.cartesianlayer .point').length,
            offsite: gd.querySelectorAll('.modebar-btn[data-title^="Share"], a.modebar-btn[href^="http"]').length,
            overlapping: overlaps(labels)};
  });
  const legacy = Array.from(document.querySelectorAll('svg.chart')).length;
  const tables = Array.from(document.querySelectorAll('table')).map((t, i) => ({
    i, rows: t.tBodies.length ? t.tBodies[0].rows.length : t.rows.length, sortable: t.classList.contains('sortable'),
    heading: (t.previousElementSibling && t.previousElementSibling.textContent || '').slice(0, 60)}));
  const plotlyjs = Array.from(document.scripts).filter(s => s.text.slice(0, 200).includes('plotly.js v')).length;
  const external = Array.from(document.querySelectorAll('[src], link[href]'))
    .map(e => e.getAttribute('src') || e.getAttribute('href')).filter(u => /^(https?:)?\\/\\//.test(u));
  return {charts, legacy, tables, plotlyjs, external, title: document.title};
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
            problems += _chart_problems(seen)
            for t in seen["tables"]:
                if t["rows"] == 0:
                    problems.append(f"table {t['i']} ({t['heading']!r}) is empty")
            if require_charts and not seen["charts"]:
                problems.append("no chart in the report")
            if screenshot:  # the page as it opened, before any hover, legend click or sort
                page.screenshot(path=screenshot, full_page=True)
            if seen["charts"] and not problems:
                problems += _interactions(page)
            problems += _sorting_works(page)
        finally:
            browser.close()
    return console + problems


def _chart_problems(seen) -> list:
    problems = []
    if seen["charts"] and seen["plotlyjs"] != 1:
        problems.append(f"plotly.js is inlined {seen['plotlyjs']} times (once per page expected)")
    if seen["external"]:
        problems.append(f"the page loads from outside itself: {', '.join(seen['external'][:3])}")
    if seen["legacy"]:
        problems.append(f"{seen['legacy']} hand-drawn SVG chart(s) left beside the plotly ones")
    for c in seen["charts"]:
        name = f"chart {c['i']} ({c['id']})"
        if not c["svg"] or c["width"] <= 0 or c["height"] <= 0:
            problems.append(f"{name} is not rendered")
        elif c["expected"] is not None and c["data"] != c["expected"]:
            problems.append(f"{name} has {c['data']} traces, its div says {c['expected']}")
        elif c["drawn"] < c["data"]:
            problems.append(f"{name} drew {c['drawn']} of its {c['data']} traces")
        elif c["points"] == 0:
            problems.append(f"{name} has no data points")
        if c["offsite"]:
            problems.append(f"{name} has a toolbar button that leads off the page")
        if c["overlapping"]:
            problems.append(f"{name}: {c['overlapping']} pair(s) of data labels overlap")
    return problems


HOVER_WORDS = ("median", "95% CI", "n:", "CV")


def _interactions(page) -> list:
    """On the first chart with measured points: hovering a point shows its median, CI, n and CV; clicking
    its first legend entry hides that series, clicking again brings it back."""
    gd = next((g for g in page.query_selector_all(".plotly-graph-div")
               if g.evaluate("g => (g.data || []).some(t => (t.hovertemplate || '').includes('median'))")), None)
    if gd is None:
        return []
    name = gd.get_attribute("id")
    problems = []
    gd.scroll_into_view_if_needed()
    point = next((p for p in gd.query_selector_all(".scatterlayer g.trace path.point") if p.bounding_box()), None)
    if point is None:
        return [f"chart {name}: no point to hover"]
    box = point.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    try:
        page.wait_for_function("g => g.querySelector('.hoverlayer .hovertext')", arg=gd, timeout=3000)
        text = gd.evaluate("g => g.querySelector('.hoverlayer .hovertext').textContent")
        missing = [w for w in HOVER_WORDS if w not in text]
        if missing:
            problems.append(f"chart {name}: hovering a point shows {text!r}, without {', '.join(missing)}")
    except Exception:  # playwright's TimeoutError
        problems.append(f"chart {name}: hovering a point shows nothing")
    page.mouse.move(0, 0)
    toggle = gd.query_selector(".legend .traces .legendtoggle")
    if toggle is None:
        return problems + [f"chart {name}: no legend to toggle"]
    hidden = "g => (g.data || []).filter(t => t.visible === 'legendonly').length"
    try:
        toggle.click()
        page.wait_for_function(f"g => ({hidden})(g) > 0", arg=gd, timeout=3000)
        toggle.click()
        page.wait_for_function(f"g => ({hidden})(g) === 0", arg=gd, timeout=3000)
    except Exception:
        problems.append(f"chart {name}: clicking a legend entry does not hide and show its series")
    page.mouse.move(0, 0)
    return problems


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
