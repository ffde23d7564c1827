"""Wheels written by hand (a wheel is a zip with a dist-info; PEP 427), so that a test can serve released
versions of a package from a local folder (`PIP_NO_INDEX=1 PIP_FIND_LINKS=folder`) without a network."""
import base64
import hashlib
import zipfile
from pathlib import Path


def write_wheel(folder: Path, name: str, version: str, files: dict) -> Path:
    """`files`: path inside the wheel -> text. Returns the wheel's path."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    contents = {**files,
                f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
                f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: rlbench-tests\nRoot-Is-Purelib: true\n"
                                 "Tag: py3-none-any\n"}
    record = []
    for path, text in contents.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{info}/RECORD,,")
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for path, text in contents.items():
            z.writestr(path, text)
        z.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return wheel
