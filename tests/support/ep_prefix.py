"""Staged conda-like prefixes for the EP auto-registration tests.

A staged prefix is a private copy of a venv from `pyenvs`. A venv has a conda prefix's layout
(`<prefix>/lib/python3.X/site-packages`). The recipe's installer then adds auto-registration the
same way the `onnxruntime` build script does. Tests may write manifests and libraries into the copy
without touching the cached venv.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path
from types import ModuleType
from typing import TypedDict

from support.pyenvs import run, site_packages

RECIPE_PYTHON = Path(__file__).resolve().parents[2] / "recipe" / "python"
PROBE = Path(__file__).resolve().parent / "ep_probe.py"


class RecordedWarning(TypedDict):
    category: str
    message: str


class ProbeReport(TypedDict, total=False):
    """What `ep_probe.py` prints. The last two keys appear only when asked for."""

    warnings: list[RecordedWarning]
    ep_names: list[str]
    reload_warnings: list[RecordedWarning]
    registration: str


def recipe_module(relative: str) -> ModuleType:
    """A module under recipe/python, loaded from its own file, the way the build script runs it."""
    path = RECIPE_PYTHON / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# where a conda-like (unix) prefix keeps its manifests, as the shipped reader says
MANIFEST_DIR = Path(*recipe_module("onnxruntime_ep_cuda/_manifest.py").manifest_folder(windows=False))


def stage_prefix(source_python: Path, prefix: Path) -> Path:
    """Copy the venv of `source_python` to `prefix` and install auto-registration into it.

    Returns the copy's interpreter.
    """
    source = source_python.parents[1]
    shutil.copytree(source, prefix, symlinks=True)
    python = prefix / source_python.relative_to(source)
    installer = recipe_module("install_autoregistration.py")
    installer.install_helper(site_packages(python))
    installer.install_hook(site_packages(python))
    return python


def plugin_manifest(package: str, registration_name: str, library: str) -> dict[str, object]:
    return {
        "manifest_version": 1,
        "package": package,
        "registration_name": registration_name,
        "ep_names": [registration_name],
        "library": library,
    }


def write_manifest(prefix: Path, package: str, content: dict[str, object] | str) -> Path:
    path = prefix / MANIFEST_DIR / f"{package}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return path


def probe(python: Path, *args: str, env: dict[str, str] | None = None) -> ProbeReport:
    """Run `ep_probe.py` under `python` and return its report. The import must not raise, nor take a minute
    (an import takes seconds; one that blocks on a manifest fails here), nor 2 GiB of address space (an
    import takes 0.2 GiB; one that reads an endless manifest fails here)."""
    result = run(python, str(PROBE), *args, env=env, timeout=60, memory=2 * 1024**3)
    if result.returncode != 0:
        raise subprocess.SubprocessError(f"ep_probe.py {' '.join(args)} exited {result.returncode}:\n{result.stderr}")
    report: ProbeReport = json.loads(result.stdout.splitlines()[-1])
    return report
