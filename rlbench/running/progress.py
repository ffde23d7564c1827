"""One line per finished job, readable in a CI log (no carriage returns there); in a terminal, below
them, a live bar with the running job, its elapsed time and the sweep's ETA, redrawn every half second."""
import shutil
import sys
import threading
import time

from rlbench.report.format import rate as fmt_rate
from rlbench.results.model import Run


def clock_text(s: float) -> str:
    """Seconds as a wall clock reads them (MM:SS, H:MM:SS past an hour): the one spelling of elapsed times and
    ETAs, shared with `rlbench tune`'s progress lines so both read alike."""
    s = int(s)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60:02d}:{s % 60:02d}"


class Progress:
    def __init__(self, total: int, stream=None, live: bool = None):
        self.total, self.done, self.stream = total, 0, stream or sys.stderr  # the stderr of now, not of import
        self.t0 = time.monotonic()
        self.live = self.stream.isatty() if live is None else live
        self.running, self.job_t0 = "", None
        self._lock, self._stop = threading.Lock(), threading.Event()
        if self.live:
            threading.Thread(target=self._tick, daemon=True).start()

    def start(self, label: str) -> None:
        """A job begins (the live bar shows it)."""
        with self._lock:
            self.running, self.job_t0 = label, time.monotonic()
            self._draw()

    def close(self) -> None:
        self._stop.set()
        if self.live:
            with self._lock:
                print("\r\x1b[K", end="", file=self.stream, flush=True)

    def _tick(self) -> None:
        while not self._stop.wait(0.5):
            with self._lock:
                self._draw()

    def _draw(self) -> None:
        if not self.live or self._stop.is_set():
            return
        now = time.monotonic()
        elapsed = now - self.t0
        eta = f"ETA {clock_text(elapsed / self.done * (self.total - self.done))}" if self.done else "ETA --:--"
        filled = int(20 * self.done / max(self.total, 1))
        job = f"  {self.running} ({now - self.job_t0:.0f} s)" if self.running else ""
        line = f"[{'#' * filled}{'.' * (20 - filled)}] {self.done}/{self.total} {clock_text(elapsed)} {eta}{job}"
        print("\r\x1b[K" + line[:shutil.get_terminal_size().columns - 1], end="", file=self.stream, flush=True)

    def update(self, row: dict) -> None:
        with self._lock:
            self._line(row)
            self.running = ""
            self._draw()

    def _line(self, row: dict) -> None:
        self.done += 1
        elapsed = time.monotonic() - self.t0
        eta = elapsed / self.done * (self.total - self.done)
        width = len(str(self.total))
        run = Run.of(row)
        if run.status == "ok":
            what = f"{fmt_rate(run.steps_per_s)} steps/s"
        else:
            what = f"{run.status}: {(run.error or '')[:80]}"
        tag = " (profile)" if run.profiled else f" r{run.repeat}"
        print(("\r\x1b[K" if self.live else "")
              + f"[{self.done:>{width}}/{self.total}] {clock_text(elapsed)} elapsed, ETA {clock_text(eta)}  "
              f"{run.cell_id}{tag}  {what}", file=self.stream, flush=True)
