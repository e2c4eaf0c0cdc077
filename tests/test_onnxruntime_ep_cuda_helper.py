"""The upstream-compatible `onnxruntime_ep_cuda` helper, installed into a bare venv.

A venv has the layout of a conda prefix. It has no onnxruntime, which also shows that the helper
does not need onnxruntime.
"""

from __future__ import annotations

import json
import os
import venv
from pathlib import Path
from typing import Any

import pytest

from support.ep_prefix import MANIFEST_DIR, plugin_manifest, recipe_module, write_manifest
from support.pyenvs import run, site_packages

pytestmark = pytest.mark.skipif(os.name == "nt", reason="manifests are written at the unix location")

CUDA_LIBRARY = "lib/libonnxruntime_providers_cuda.so"
ASK_HELPER = """
import json, onnxruntime_ep_cuda as ep
try:
    print(json.dumps([ep.get_library_path(), ep.get_ep_name(), ep.get_ep_names()]))
except ep.ManifestError as error:
    print(json.dumps([type(error).__name__, str(error)]))
"""


@pytest.fixture
def prefix(tmp_path: Path) -> Path:
    root = tmp_path / "prefix"
    venv.EnvBuilder(with_pip=False).create(root)
    recipe_module("install_autoregistration.py").install_helper(site_packages(root / "bin" / "python"))
    return root


def ask_helper(prefix: Path) -> list[Any]:
    result = run(prefix / "bin" / "python", "-c", ASK_HELPER)
    assert result.returncode == 0, result.stderr
    answer: list[Any] = json.loads(result.stdout)
    return answer


def test_helper_answers_from_the_installed_manifest(prefix: Path) -> None:
    (prefix / CUDA_LIBRARY).touch()
    write_manifest(
        prefix, "onnxruntime-ep-cuda", plugin_manifest("onnxruntime-ep-cuda", "CUDAExecutionProvider", CUDA_LIBRARY)
    )
    assert ask_helper(prefix) == [
        str((prefix / CUDA_LIBRARY).resolve()),
        "CUDAExecutionProvider",
        ["CUDAExecutionProvider"],
    ]


def test_helper_without_manifest_names_it_and_the_conda_package(prefix: Path) -> None:
    error, message = ask_helper(prefix)
    assert error == "PluginNotInstalledError"
    assert str(prefix / MANIFEST_DIR / "onnxruntime-ep-cuda.json") in message
    assert "conda install onnxruntime-ep-cuda" in message


def test_helper_with_a_library_missing_says_so(prefix: Path) -> None:
    write_manifest(
        prefix, "onnxruntime-ep-cuda", plugin_manifest("onnxruntime-ep-cuda", "CUDAExecutionProvider", CUDA_LIBRARY)
    )
    error, message = ask_helper(prefix)
    assert error == "ManifestError"
    assert message.endswith(f"library {(prefix / CUDA_LIBRARY).resolve()} does not exist")


@pytest.mark.parametrize(("content", "reason"), [
    ("[" * 1000 + "]" * 1000, "is not valid JSON: nested too deeply"),
    (plugin_manifest("onnxruntime-ep-cuda", "CUDAExecutionProvider", "lib/x\u0000.so"),
     r"library must be a non-empty string of printable characters, not 'lib/x\x00.so'"),
])
def test_helper_answers_a_broken_manifest_with_a_manifest_error_only(
        prefix: Path, content: dict[str, object] | str, reason: str) -> None:
    manifest = write_manifest(prefix, "onnxruntime-ep-cuda", content)
    assert ask_helper(prefix) == ["ManifestError", f"{manifest}: {reason}"]
