"""One line per finished job: readable in a terminal and in a CI log (no carriage returns)."""
import sys
import time

from rlbench.report.console import fmt_rate


def _clock(s: float) -> str:
    s = int(s)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60:02d}:{s % 60:02d}"


class Progress:
    def __init__(self, total: int, stream=None):
        self.total, self.done, self.stream = total, 0, stream or sys.stderr  # the stderr of now, not of import
        self.t0 = time.monotonic()

    def update(self, row: dict) -> None:
        self.done += 1
        elapsed = time.monotonic() - self.t0
        eta = elapsed / self.done * (self.total - self.done)
        width = len(str(self.total))
        if row["status"] == "ok":
            what = f"{fmt_rate(row['steps_per_s'])} steps/s"
        else:
            what = f"{row['status']}: {(row.get('error') or '')[:80]}"
        tag = " (profile)" if row.get("profiled") else f" r{row['repeat']}"
        print(f"[{self.done:>{width}}/{self.total}] {_clock(elapsed)} elapsed, ETA {_clock(eta)}  "
              f"{row['cell_id']}{tag}  {what}", file=self.stream, flush=True)
