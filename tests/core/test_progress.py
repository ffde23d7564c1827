"""The one-line-per-job progress output and the console table's number format."""
import io
import sys

from rlbench.report.format import rate as fmt_rate
from rlbench.running.progress import Progress, clock_text


def test_progress_writes_to_the_stderr_of_now(monkeypatch):
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)  # e.g. redirected after rlbench.running.progress was imported
    progress = Progress(2)
    progress.update({"status": "ok", "steps_per_s": 12345.0, "repeat": 0, "cell_id": "serial/x"})
    progress.update({"status": "error", "error": "RuntimeError: boom", "repeat": 1, "cell_id": "serial/x"})
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and "\r" not in stream.getvalue()
    assert lines[0].startswith("[1/2] ") and lines[0].endswith("serial/x r0  12.35k steps/s")
    assert lines[1].startswith("[2/2] ") and lines[1].endswith("serial/x r1  error: RuntimeError: boom")


def test_clock_text_reads_like_a_wall_clock():
    assert [clock_text(s) for s in (0, 59.9, 61, 3599, 3600, 36061)] == [
        "00:00", "00:59", "01:01", "59:59", "1:00:00", "10:01:01"]


def test_fmt_rate():
    assert fmt_rate(12.345) == "12.3"
    assert fmt_rate(12345.0) == "12.35k"
    assert fmt_rate(2_500_000.0) == "2.50M"
    assert fmt_rate(None) == "-" and fmt_rate(float("nan")) == "-"


def test_live_bar_in_a_terminal_is_redrawn_and_cleared():
    stream = io.StringIO()
    progress = Progress(2, stream=stream, live=True)
    progress.start("serial/x r0")
    progress.update({"status": "ok", "steps_per_s": 1.0, "repeat": 0, "cell_id": "serial/x"})
    progress.close()
    out = stream.getvalue()
    assert "0/2" in out and "serial/x r0 (0 s)" in out and "ETA --:--" in out  # the bar before any job ended
    assert "\r\x1b[K[1/2] " in out and "[##########..........] 1/2" in out    # the job's line, then the bar again
    assert out.endswith("\r\x1b[K")                                           # cleared at the end
