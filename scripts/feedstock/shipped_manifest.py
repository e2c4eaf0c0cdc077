"""What the plugin's manifests are, as the shipped runtime defines them: the module users' `import onnxruntime`
reads manifests with (recipe/python/onnxruntime_ep_cuda/_manifest.py) is their one definition, because it
runs on users' machines, where nothing of the generator is. The generator and the device scripts load it
with `recipe_code`: it imports only the standard library, so it needs no installed package.
"""

from __future__ import annotations

from recipe_code import recipe_module

_RUNTIME = recipe_module("python/onnxruntime_ep_cuda/_manifest.py")
MANIFEST_VERSION: int = _RUNTIME.MANIFEST_VERSION


def manifest_dir(family: str) -> str:
    """Where conda packages install manifests, relative to the prefix, for a `unix` or `win` platform."""
    return "/".join(_RUNTIME.manifest_folder(windows=family == "win"))


def manifest_path(package: str, family: str) -> str:
    """The manifest of the plugin package `package`, relative to the prefix, for a `unix` or `win` platform."""
    return f"{manifest_dir(family)}/{package}.json"
