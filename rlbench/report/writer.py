"""The one writer every export goes through: whole or not at all, so a report is never half-written."""
import os


class Reporter:
    def report(self, results, out_dir: str) -> list:
        """Write this view; return the paths written."""
        raise NotImplementedError


def write_atomic(path: str, text: str) -> str:
    """Whole or not at all: a failed write (disk full) leaves the old file, and no temporary one."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path
