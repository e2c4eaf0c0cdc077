"""Throw-away Python environments holding real ONNX Runtime cores and plugin EPs from PyPI.

The recipe's test scripts run in an environment of their own on conda-forge; here they run in one
venv per requirement set, kept in `.cache/pyenvs/` and reused while the set is unchanged.
"""

from __future__ import annotations

import hashlib
import os
import resource
import subprocess
import urllib.request
from pathlib import Path
from typing import NoReturn

import pytest

from bootstrap import PipFailed, cached_venv, pip_install

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("FEEDSTOCK_TEST_CACHE", REPO / ".cache")) / "pyenvs"


def index_reachable() -> bool:
    """Whether pip's package index answers (PIP_INDEX_URL, else PyPI's)."""
    index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple/").rstrip("/")
    try:
        with urllib.request.urlopen(f"{index}/pip/", timeout=20):
            return True
    except (OSError, ValueError):
        return False


def pip_failed(what: str, output: str) -> NoReturn:
    """Skip the test when the package index cannot be reached (a fresh clone offline); any other failure of
    pip is an error, a pin the index does not have (a misspelled name, a version never released) included."""
    if "(from versions: none)" in output and not index_reachable():
        pytest.skip(f"pip could not {what}: the package index cannot be reached")
    raise RuntimeError(f"pip could not {what}:\n{output}")


def python_env(name: str, requirements: list[str]) -> Path:
    """The interpreter of a venv named `name` with exactly `requirements` installed."""
    key = hashlib.sha256("\n".join(sorted(requirements)).encode()).hexdigest()[:12]
    env = CACHE / f"{name}-{key}"
    # no byte-compiling of every module installed (half of pip's time here): a test imports few of them
    try:
        return cached_venv(env, key, lambda python: pip_install(python, ["--no-compile", *requirements],
                                                                naming=" ".join(requirements)))
    except PipFailed as failure:
        pip_failed(f"install {requirements} into {env}", failure.output)


# what the recipe's test scripts need beside a core: onnx builds their models, numpy compares the results
CORE_TEST_REQUIREMENTS = ["onnx==1.23.2", "numpy"]


def core_env(version: str) -> Path:
    """The interpreter of a venv with PyPI's onnxruntime `version` and what the recipe's test scripts need."""
    return python_env(f"core-{version}", [f"onnxruntime=={version}", *CORE_TEST_REQUIREMENTS])


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


