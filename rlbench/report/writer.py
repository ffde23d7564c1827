"""The one writer every export goes through, as hyperfine's exporters have it: an exporter renders its
files (name -> text), and they are written here, each whole or not at all, so a report is never
half-written."""
import os


def write_files(out_dir: str, files: dict) -> list:
    """Every file an exporter rendered, into out_dir; the paths written."""
    return [write_atomic(os.path.join(out_dir, name), text) for name, text in files.items()]


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
