"""Put the running script inside the feedstock's own virtual environment.

Both entry points (`render.py`, `run_tests.py`) call `ensure(...)` before importing anything that is
not in the standard library. When the interpreter already has what the script needs it carries on;
otherwise `.venv/` is created (or refreshed when the requirements file changed) and the script is
started again with that interpreter, with the same arguments.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VENV = REPO / ".venv"


def _venv_python() -> Path:
    if os.name == "nt":
        return VENV / "Scripts" / "python.exe"
    return VENV / "bin" / "python"


def _missing(modules: tuple[str, ...]) -> list[str]:
    return [name for name in modules if importlib.util.find_spec(name) is None]


def _digest(requirements: Path) -> str:
    """Changes whenever the file or one it includes with `-r` changes."""
    digest = hashlib.sha256(requirements.read_bytes())
    for line in requirements.read_text().splitlines():
        if line.startswith("-r "):
            digest.update((requirements.parent / line[3:].strip()).read_bytes())
    return digest.hexdigest()


def _stamp(requirements: Path) -> Path:
    return VENV / f"{requirements.parent.name}-{requirements.stem}.sha256"


def _provision(requirements: Path) -> None:
    digest = _digest(requirements)
    stamp = _stamp(requirements)
    if _venv_python().exists() and stamp.exists() and stamp.read_text().strip() == digest:
        return
    print(f"bootstrap: installing {requirements.relative_to(REPO)} into {VENV.relative_to(REPO)}/", file=sys.stderr)
    if not _venv_python().exists():
        venv.EnvBuilder(with_pip=True).create(VENV)
    subprocess.run(
        [str(_venv_python()), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "-r", str(requirements)],
        check=True,
        stdin=subprocess.DEVNULL,
    )
    stamp.write_text(digest + "\n")


def ensure(requirements: Path, modules: tuple[str, ...], *, always_venv: bool = False) -> None:
    """Return when `modules` import here; else re-run this process inside `.venv/`.

    `always_venv` insists on `.venv/` even when the current interpreter could do: the test suite
    wants the pinned tool versions, the renderer only wants to start fast.
    """
    inside = Path(sys.prefix).resolve() == VENV.resolve()
    if inside:
        if _missing(modules):
            _provision(requirements)
            importlib.invalidate_caches()
        missing = _missing(modules)
        if missing:
            raise SystemExit(f"{requirements}: installed into {VENV}, yet {', '.join(missing)} will not import")
        return
    if not always_venv and not _missing(modules):
        return
    _provision(requirements)
    python = str(_venv_python())
    os.execv(python, [python, *sys.argv])
