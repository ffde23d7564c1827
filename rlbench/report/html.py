"""index.html: one self-contained file (plotly.js inlined once, no network): its title, then every section
of rlbench.report.sections in order (tune's Recommendation, the run's answer, each family's, the py-spy
profiles', the sortable summary, the machine). Charts come from rlbench.report.charts, numbers from
rlbench.report.format."""
from rlbench import SCHEMA_VERSION
from rlbench.report import charts
from rlbench.report.format import esc
from rlbench.report.sections import sections

CSS = """body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:22px}h2{font-size:18px;margin-top:32px}h3{font-size:15px;margin-top:22px}table{border-collapse:collapse;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 7px;text-align:right}td:first-child,th:first-child{text-align:left}
th{background:#f3f3f3;cursor:pointer;user-select:none}th:after{content:' \\2195';color:#aaa}
tr.bad td{background:#fff3f3}.warn{color:#b35900}.chart{margin:6px 0 12px}
.meta td{text-align:left}.headlines{border:1px solid #9bc;background:#f3f8fc;padding:6px 14px;margin:12px 0}
.headlines li{margin:4px 0}details.dropped{margin:10px 0;font-size:13px}"""

SORT_JS = """document.querySelectorAll('table.sortable').forEach(function(t){
 t.querySelectorAll('th').forEach(function(th,i){th.addEventListener('click',function(){
  var rows=Array.from(t.tBodies[0].rows),asc=th.dataset.asc!=='1';th.dataset.asc=asc?'1':'0';
  rows.sort(function(a,b){var x=a.cells[i].dataset.v||a.cells[i].textContent,
   y=b.cells[i].dataset.v||b.cells[i].textContent;
   var nx=parseFloat(x),ny=parseFloat(y);var c=(!isNaN(nx)&&!isNaN(ny))?nx-ny:x.localeCompare(y);return asc?c:-c;});
  rows.forEach(function(r){t.tBodies[0].appendChild(r);});});});});"""


def export_html(view) -> dict:
    """index.html of a RunView (rlbench.report.view)."""
    return {"index.html": page(view).encode()}


def page(view) -> str:
    body = f"<h1>rlbench report: {esc(view.suite)}</h1>" + "".join(s.render(view) for s in sections())
    return (f"<!doctype html><html><head><meta charset='utf-8'>"
            f"<meta name='rlbench-schema' content='{SCHEMA_VERSION}'><title>rlbench report</title>"
            f"<style>{CSS}</style>{charts.plotlyjs_for(body)}</head>"
            f"<body>{body}<script>{SORT_JS}</script></body></html>")
