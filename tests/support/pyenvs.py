"""Throw-away Python environments holding real ONNX Runtime cores and plugin EPs from PyPI.

The recipe's test scripts run in an environment of their own on conda-forge; here they run in one
venv per requirement set, kept in `.cache/pyenvs/` and reused while the set is unchanged.
"""

from __future__ import annotations

import hashlib
import os
import resource
import subprocess
from pathlib import Path
from typing import NoReturn

import pytest

from bootstrap import PipFailed, cached_venv, pip_install

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("FEEDSTOCK_TEST_CACHE", REPO / ".cache")) / "pyenvs"


def pip_failed(what: str, output: str) -> NoReturn:
    """Skip the test when the package index offered nothing at all (no network, or no index: a fresh clone
    offline); any other failure of pip is an error."""
    if "(from versions: none)" in output:
        pytest.skip(f"pip could not {what}: the package index offers nothing (no network or no index?)")
    raise RuntimeError(f"pip could not {what}:\n{output}")


def python_env(name: str, requirements: list[str]) -> Path:
    """The interpreter of a venv named `name` with exactly `requirements` installed."""
    key = hashlib.sha256("\n".join(sorted(requirements)).encode()).hexdigest()[:12]
    env = CACHE / f"{name}-{key}"
    try:
        return cached_venv(env, key, lambda python: pip_install(python, requirements, naming=" ".join(requirements)))
    except PipFailed as failure:
        pip_failed(f"install {requirements} into {env}", failure.output)


def site_packages(python: Path) -> Path:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    )
    return Path(out.stdout.strip())


def run(python: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 300, cwd: Path | None = None,
        memory: int | None = None) -> subprocess.CompletedProcess[str]:
    """`python ARGS`, without the caller's PYTHON* variables; `memory` bounds its address space in bytes."""
    merged = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    merged.update(env or {})

    def bound() -> None:
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.run(
        [str(python), *args], capture_output=True, text=True, env=merged, timeout=timeout, cwd=cwd,
        stdin=subprocess.DEVNULL, preexec_fn=bound,
    )


