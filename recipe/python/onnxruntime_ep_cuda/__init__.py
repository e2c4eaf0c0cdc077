"""Finds conda-forge's CUDA plugin EP for code written against upstream's `onnxruntime-ep-cuda` wheels.

Upstream's wheels ship this module next to the library. In conda-forge, the `onnxruntime` package
ships this module, and the library comes from the `onnxruntime-ep-cuda` package
(`lib/libonnxruntime_providers_cuda.so`, or `Library\\bin\\onnxruntime_providers_cuda.dll` on
Windows). The answers come from the manifest that the plugin package installs. This module does not
import onnxruntime.
"""

from __future__ import annotations

import os

from onnxruntime_ep_cuda._manifest import (
    ManifestError,
    PluginManifest,
    library_path,
    load_manifest,
    manifest_dir,
    prefix_of,
)

__all__ = ["ManifestError", "PluginNotInstalledError", "get_ep_name", "get_ep_names", "get_library_path"]


class PluginNotInstalledError(ManifestError):
    """The conda package `onnxruntime-ep-cuda` is not installed in this environment."""


def get_library_path() -> str:
    """The absolute path of the CUDA plugin EP library."""
    prefix = _prefix()
    return library_path(_installed_manifest(prefix), prefix)


def get_ep_name() -> str:
    """The name to register the library under. The same name also works in `providers=[...]`."""
    return _installed_manifest(_prefix()).registration_name


def get_ep_names() -> list[str]:
    """The names of the EPs that the library provides."""
    return list(_installed_manifest(_prefix()).ep_names)


def _prefix() -> str:
    return prefix_of(os.path.dirname(os.path.abspath(__file__)))


def _package() -> str:
    """The plugin's conda package, from the copy of its manifest that ships with this module."""
    import json  # not at the top: only a helper call pays for it

    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "plugin_manifest.json"), encoding="utf-8") as f:
        package: str = json.load(f)["package"]
    return package


def _installed_manifest(prefix: str) -> PluginManifest:
    package = _package()
    path = os.path.join(manifest_dir(prefix), f"{package}.json")
    if not os.path.isfile(path):
        raise PluginNotInstalledError(
            path,
            f"not found: the CUDA plugin EP is not installed in {prefix}; install it with `conda install {package}`",
        )
    return load_manifest(path)
