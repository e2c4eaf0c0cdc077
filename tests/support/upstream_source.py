"""Files of ONNX Runtime's source tarball in ../shared/upstream, read without unpacking the whole tree."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

TARBALL = Path("upstream") / "onnxruntime-1.30.0-src.tar.zst"


def _tar(shared: Path, *args: str, needed_for: str = "") -> subprocess.CompletedProcess[str]:
    tarball = shared / TARBALL
    if not tarball.is_file():
        pytest.skip(f"{tarball} is not here" + (f": {needed_for}" if needed_for else ""))
    return subprocess.run(["tar", "--zstd", *args[:1], str(tarball), *args[1:]],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300)


def read(shared: Path, member: str) -> str:
    """One file of the source tree, by its path below the tree's top folder."""
    result = _tar(shared, "-xOf", f"onnxruntime/{member}")
    if result.returncode != 0:
        pytest.skip(f"tar could not read {member} from {TARBALL.name}: {result.stderr.strip()}")
    return result.stdout


def exists(shared: Path, member: str) -> bool:
    return _tar(shared, "-tf", f"onnxruntime/{member}").returncode == 0


def unpack(shared: Path, into: Path, *members: str, needed_for: str) -> Path:
    """Some folders and files of the source tree under `into`; returns the tree's top folder."""
    result = _tar(shared, "-xf", "-C", str(into), *(f"onnxruntime/{m}" for m in members), needed_for=needed_for)
    if result.returncode != 0:
        pytest.skip(f"tar could not unpack {TARBALL.name}: {result.stderr.strip()}")
    return into / "onnxruntime"
