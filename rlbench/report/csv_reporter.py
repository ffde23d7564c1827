"""results.csv (tidy, one row per repeat) and summary.csv (one row per cell)."""
import csv
import io
import json
import os

from rlbench import SCHEMA_VERSION
from rlbench.report.writer import Reporter, write_atomic
from rlbench.results import RUN_COLUMNS, SUMMARY_COLUMNS


def to_csv(rows, columns) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _cell(row.get(k)) for k in columns})
    return buf.getvalue()


def _cell(v):
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True) if v else ""
    if isinstance(v, float):
        return "" if v != v else f"{v:.6g}"
    return "" if v is None else v


class CsvReporter(Reporter):
    def report(self, results, out_dir):
        rows = [{**r, "schema": r.get("schema", SCHEMA_VERSION)} for r in results.rows]
        summary = results.summary_rows()
        return [write_atomic(os.path.join(out_dir, "results.csv"), to_csv(rows, RUN_COLUMNS)),
                write_atomic(os.path.join(out_dir, "summary.csv"), to_csv(summary, SUMMARY_COLUMNS))]
