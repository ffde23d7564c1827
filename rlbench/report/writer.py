"""The one writer every export goes through: an exporter renders its files (name -> bytes), and they are written
here, each whole or not at all, so a report is never half-written. Text (a family's exports, env.json,
plan.json) is accepted too and written as UTF-8."""
import os


def as_bytes(content) -> bytes:
    """A file's content as written: bytes as given, text as UTF-8."""
    if isinstance(content, (bytes, bytearray, memoryview)):
        return bytes(content)
    if isinstance(content, str):
        return content.encode("utf-8")
    raise TypeError(f"a file's content is bytes or str, not {type(content).__name__}")


def write_files(out_dir: str, files: dict) -> list:
    """Every file an exporter rendered, into out_dir; the paths written."""
    return [write_atomic(os.path.join(out_dir, name), content) for name, content in files.items()]


def write_atomic(path: str, content) -> str:
    """Whole or not at all: the bytes (or text, as UTF-8) go to a temporary file beside `path`, synced, then
    renamed over it; a failed write (disk full) leaves the old file, and no temporary one."""
    data = as_bytes(content)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
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
