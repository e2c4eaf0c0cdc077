"""The plugin manifest format, as `onnxruntime_ep_cuda/_manifest.py` defines and checks it.

These tests load the reader in-process from the recipe. Checks on where the library resolves run
against real cores in test_ep_autoregistration.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from support.ep_prefix import RECIPE_PYTHON, plugin_manifest, recipe_module

manifest = recipe_module("onnxruntime_ep_cuda/_manifest.py")
SHIPPED = RECIPE_PYTHON.parent / "ep-plugins"
VALID = plugin_manifest("onnxruntime-ep-cuda", "CUDAExecutionProvider", "lib/libonnxruntime_providers_cuda.so")


def write(tmp_path: Path, content: object, name: str = "onnxruntime-ep-cuda.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(content), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    ("platform", "library"),
    [("unix", "lib/libonnxruntime_providers_cuda.so"), ("win", "Library/bin/onnxruntime_providers_cuda.dll")],
)
def test_shipped_cuda_manifest_is_valid(platform: str, library: str) -> None:
    loaded = manifest.load_manifest(str(SHIPPED / platform / "onnxruntime-ep-cuda.json"))
    assert (loaded.package, loaded.registration_name, loaded.ep_names, loaded.library) == (
        "onnxruntime-ep-cuda",
        "CUDAExecutionProvider",
        ("CUDAExecutionProvider",),
        library,
    )


def test_valid_manifest_loads(tmp_path: Path) -> None:
    loaded = manifest.load_manifest(write(tmp_path, VALID))
    assert loaded.library == "lib/libonnxruntime_providers_cuda.so"


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ([VALID], "expected a JSON object"),
        ({k: v for k, v in VALID.items() if k != "library"}, "missing keys: library"),
        ({**VALID, "priority": 1}, r"unknown keys for manifest_version 1: \['priority'\]"),
        ({**VALID, "manifest_version": 2}, "manifest_version 2 is not 1"),
        ({**VALID, "manifest_version": True}, "manifest_version True is not 1"),
        ({**VALID, "package": "onnxruntime-ep-cuda13"}, "must be named onnxruntime-ep-cuda13.json"),
        ({**VALID, "registration_name": ""}, "registration_name must be a non-empty string"),
        ({**VALID, "ep_names": []}, "ep_names must be a non-empty list"),
        ({**VALID, "ep_names": "CUDAExecutionProvider"}, "ep_names must be a non-empty list"),
        ({**VALID, "library": "/usr/lib/libonnxruntime_providers_cuda.so"}, "must be relative to the prefix"),
        ({**VALID, "library": "Library\\bin\\onnxruntime_providers_cuda.dll"}, "use forward slashes"),
        ({**VALID, "library": "C:/Library/bin/onnxruntime_providers_cuda.dll"}, "must be relative to the prefix"),
    ],
)
def test_invalid_manifest_is_refused_with_its_reason(tmp_path: Path, content: object, reason: str) -> None:
    path = write(tmp_path, content)
    with pytest.raises(manifest.ManifestError, match=reason) as refused:
        manifest.load_manifest(path)
    assert refused.value.path == path


def test_manifest_that_is_no_json_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "onnxruntime-ep-cuda.json"
    path.write_text("{", encoding="utf-8")
    with pytest.raises(manifest.ManifestError, match="is not valid JSON"):
        manifest.load_manifest(str(path))


def test_prefix_without_manifest_directory_has_no_manifests(tmp_path: Path) -> None:
    assert manifest.manifest_paths(str(tmp_path)) == []


def test_manifests_are_the_json_files_in_name_order(tmp_path: Path) -> None:
    directory = Path(manifest.manifest_dir(str(tmp_path)))
    directory.mkdir(parents=True)
    for name in ("b.json", "a.json", "notes.txt"):
        (directory / name).write_text("{}", encoding="utf-8")
    assert manifest.manifest_paths(str(tmp_path)) == [str(directory / "a.json"), str(directory / "b.json")]


@pytest.mark.skipif(os.name == "nt", reason="the unix site-packages layout")
def test_prefix_is_three_levels_above_site_packages() -> None:
    assert manifest.prefix_of("/opt/env/lib/python3.13t/site-packages/onnxruntime") == "/opt/env"
