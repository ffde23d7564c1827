"""results.csv (tidy, one row per repeat) and summary.csv (one row per cell), from the run view's pandas
frames; every CSV of a report (profiles, validation, compare) is written by `frame_to_csv` the same way."""
import json
import math


def frame_to_csv(frame) -> str:
    """Cells as a reader wants them: 6 significant digits, JSON for lists and tables, empty for missing."""
    return frame.map(_cell).to_csv(index=False, lineterminator="\n")


def to_csv(rows, columns) -> str:
    import pandas as pd
    return frame_to_csv(pd.DataFrame([dict(r) for r in rows], columns=list(columns), dtype=object))


def _cell(v):
    if isinstance(v, (dict, list, tuple)):
        return json.dumps(v, sort_keys=True) if v else ""
    if isinstance(v, float):
        return "" if math.isnan(v) else f"{v:.6g}"
    return "" if v is None else v


def export_csv(view) -> dict:
    """results.csv (one row per repeat) and summary.csv (one row per cell), of a RunView (rlbench.report.view)."""
    return {"results.csv": frame_to_csv(view.runs).encode(), "summary.csv": frame_to_csv(view.summaries).encode()}
