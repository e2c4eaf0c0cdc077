"""What the plugin's manifests are, as the shipped runtime defines them: the module users' `import onnxruntime`
reads manifests with (recipe/python/onnxruntime_ep_cuda/_manifest.py) is their one definition, because it
runs on users' machines, where nothing of the generator is. The generator and the device scripts read it
from its file, which imports only the standard library, so it needs no installed package.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

RUNTIME_MANIFEST = Path(__file__).resolve().parents[2] / "recipe" / "python" / "onnxruntime_ep_cuda" / "_manifest.py"


def _runtime():
    spec = importlib.util.spec_from_file_location("_shipped_manifest", RUNTIME_MANIFEST)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_RUNTIME = _runtime()
MANIFEST_VERSION: int = _RUNTIME.MANIFEST_VERSION


def manifest_dir(family: str) -> str:
    """Where conda packages install manifests, relative to the prefix, for a `unix` or `win` platform."""
    return "/".join(_RUNTIME.manifest_folder(windows=family == "win"))
