"""validation.csv and its console and HTML views: measured vs published, with a verdict per check."""
import os

from rlbench.families.validation.checks import COLUMNS, validation_rows
from rlbench.report.csv_reporter import to_csv
from rlbench.report.format import si as _num
from rlbench.report.writer import Reporter, write_atomic


class ValidationReporter(Reporter):
    def report(self, results, out_dir):
        rows = validation_rows(results)
        if not rows:
            return []
        return [write_atomic(os.path.join(out_dir, "validation.csv"), to_csv(rows, COLUMNS))]


def validation_text(rows) -> str:
    lines = [f"{'check':<14} {'env':<34} {'w':>2}  {'quantity':<52} {'measured':>9} {'published':>9}  verdict"]
    for r in rows:
        lines.append(f"{r['check']:<14} {r['env'][:34]:<34} {r['workers']:>2}  {r['quantity'][:52]:<52} "
                     f"{_num(r['measured']):>9} {_num(r['published']):>9}  {r['verdict']}")
    return "\n".join(lines)
