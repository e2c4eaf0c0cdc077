"""Throw-away Python environments holding real ONNX Runtime cores and plugin EPs from PyPI.

The recipe's test scripts run in an environment of their own on conda-forge; here they run in one
venv per requirement set, kept in `.cache/pyenvs/` and reused while the set is unchanged.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import venv
from pathlib import Path
from typing import NoReturn

import pytest

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("FEEDSTOCK_TEST_CACHE", REPO / ".cache")) / "pyenvs"


def pip_failed(what: str, result: subprocess.CompletedProcess[str]) -> NoReturn:
    """Skip the test when the package index offered nothing at all (no network, or no index: a fresh clone
    offline); any other failure of pip is an error."""
    output = result.stdout + result.stderr
    if "(from versions: none)" in output:
        pytest.skip(f"pip could not {what}: the package index offers nothing (no network or no index?)")
    raise RuntimeError(f"pip could not {what}:\n{output}")


def _python(env: Path) -> Path:
    return env / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def python_env(name: str, requirements: list[str]) -> Path:
    """The interpreter of a venv named `name` with exactly `requirements` installed."""
    key = hashlib.sha256("\n".join(sorted(requirements)).encode()).hexdigest()[:12]
    env = CACHE / f"{name}-{key}"
    done = env / "installed.ok"
    if done.exists():
        return _python(env)
    venv.EnvBuilder(with_pip=True, clear=True).create(env)
    result = subprocess.run(
        [str(_python(env)), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *requirements],
        capture_output=True, text=True, stdin=subprocess.DEVNULL,
    )
    if result.returncode != 0:
        pip_failed(f"install {requirements} into {env}", result)
    done.write_text("\n".join(requirements) + "\n")
    return _python(env)


def site_packages(python: Path) -> Path:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    )
    return Path(out.stdout.strip())


def run(python: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    merged = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    merged.update(env or {})
    return subprocess.run(
        [str(python), *args], capture_output=True, text=True, env=merged, timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


