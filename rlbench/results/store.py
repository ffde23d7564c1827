"""results.jsonl, the source of truth: one line per finished repeat, written whole (one write, then fsync;
cut back on failure), so an interrupted or disk-full sweep loses nothing that finished; and its reader,
which leaves out what is not a row."""
import errno
import json
import os

RESULTS = "results.jsonl"


ROW_KEYS = ("cell_id", "adapter", "status", "repeat")  # what every results row has, whatever its schema


def read_rows(path: str, skipped: list = None) -> list:
    """Every whole row of a results.jsonl. A line that is not a row (cut by a crash mid-write in an old
    run, or edited by hand) is left out; its line number goes to `skipped` when given."""
    rows = []
    with open(path, errors="replace") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                row = json.loads(line)
            except ValueError:
                row = None
            if isinstance(row, dict) and all(k in row for k in ROW_KEYS):
                rows.append(row)
            elif skipped is not None:
                skipped.append(number)
    return rows


class StoreError(Exception):
    """A row could not be written (disk full, I/O error): the sweep stops, every earlier row is intact."""


class ResultStore:
    """Append-only results.jsonl. A row is written whole or not at all: one write() of the whole line, then
    fsync; when either fails (disk full), the file is cut back to where the line began."""

    def __init__(self, run_dir: str):
        self.path = os.path.join(run_dir, RESULTS)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def append(self, row: dict) -> None:
        line = (json.dumps(dict(row), default=str) + "\n").encode()
        end = os.fstat(self._fd).st_size
        try:
            written = os.write(self._fd, line)
            if written != len(line):
                raise OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)} (wrote {written} of {len(line)} bytes)")
            os.fsync(self._fd)
        except OSError as exc:
            try:
                os.ftruncate(self._fd, end)
            except OSError:
                pass
            raise StoreError(f"cannot write {self.path}: {exc.strerror or exc}") from exc

    def close(self):
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
