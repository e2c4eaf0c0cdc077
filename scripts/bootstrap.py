"""Put the running script inside the feedstock's own virtual environment.

Both entry points (`render.py`, `run_tests.py`) call `ensure(...)` before importing anything that is
not in the standard library. When the interpreter already has every pinned distribution at its pinned
version it carries on; otherwise `.venv/` is created (or refreshed when the requirements changed) and
the script is started again with that interpreter, with the same arguments. Exact versions, not mere
imports, because the renderer's bytes depend on its jinja2 and PyYAML.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VENV = REPO / ".venv"
PIN = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")


def _venv_python() -> Path:
    if os.name == "nt":
        return VENV / "Scripts" / "python.exe"
    return VENV / "bin" / "python"


def _files(requirements: Path) -> list[Path]:
    """The requirements file and those it includes with `-r`."""
    found = [requirements]
    for line in requirements.read_text().splitlines():
        if line.startswith("-r "):
            found += _files(requirements.parent / line[3:].strip())
    return found


def _pins(requirements: Path) -> dict[str, str]:
    pins = {}
    for path in _files(requirements):
        for line in path.read_text().splitlines():
            match = PIN.fullmatch(line.split("#")[0].strip())
            if match:
                pins[match.group(1)] = match.group(2)
    return pins


def off_pin(requirements: Path) -> list[str]:
    """The pinned distributions this interpreter lacks or has at another version."""
    wrong = []
    for name, version in _pins(requirements).items():
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            installed = None
        if installed != version:
            wrong.append(f"{name}=={version} (found {installed or 'none'})")
    return wrong


def _digest(requirements: Path) -> str:
    """Changes whenever the file or one it includes changes."""
    digest = hashlib.sha256()
    for path in _files(requirements):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _stamp(requirements: Path) -> Path:
    return VENV / f"{requirements.parent.name}-{requirements.stem}.sha256"


def _cannot(requirements: Path, why: str) -> SystemExit:
    print(f"bootstrap: cannot install {requirements.relative_to(REPO)} into {VENV.relative_to(REPO)}/: {why}",
          file=sys.stderr)
    return SystemExit(2)


def _provision(requirements: Path) -> None:
    digest = _digest(requirements)
    stamp = _stamp(requirements)
    if _venv_python().exists() and stamp.exists() and stamp.read_text().strip() == digest:
        return
    print(f"bootstrap: installing {requirements.relative_to(REPO)} into {VENV.relative_to(REPO)}/", file=sys.stderr)
    fresh = not _venv_python().exists()
    try:
        if fresh:
            venv.EnvBuilder(with_pip=True).create(VENV)
        pip = subprocess.run(
            [str(_venv_python()), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             "-r", str(requirements)],
            capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        raise _cannot(requirements, f"creating the environment failed ({exc})") from None
    if pip.returncode != 0:
        if fresh:
            # a half-made environment would pass for a working one next time
            shutil.rmtree(VENV, ignore_errors=True)
        said = [line.strip() for line in (pip.stderr + pip.stdout).splitlines() if line.strip()]
        errors = [line for line in said if line.startswith("ERROR:")] or said or ["no output"]
        raise _cannot(requirements, f"pip exited {pip.returncode} ({errors[0]}); is the package index reachable?")
    stamp.write_text(digest + "\n")


def ensure(requirements: Path, *, always_venv: bool = False) -> None:
    """Return when this interpreter has every pin of `requirements`; else re-run this process in `.venv/`.

    `always_venv` insists on `.venv/` even when the current interpreter could do: the test suite
    wants an environment of its own, the renderer only wants to start fast.
    """
    inside = Path(sys.prefix).resolve() == VENV.resolve()
    if inside:
        if off_pin(requirements):
            _provision(requirements)
        wrong = off_pin(requirements)
        if wrong:
            raise _cannot(requirements, f"after installing, {', '.join(wrong)}")
        return
    if not always_venv and not off_pin(requirements):
        return
    _provision(requirements)
    python = str(_venv_python())
    os.execv(python, [python, *sys.argv])
