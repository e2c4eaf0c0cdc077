"""The recipe's own Python files that the tools use too, in one place.

The recipe's scripts run where nothing of the tools is (rattler-build's build and test, a user's
machine), so they import only the standard library and each other. The tools take their rules from them
rather than keep copies: the plugin's build parallelism (`build_ep_cuda`), the manifest format
(`python/onnxruntime_ep_cuda/_manifest.py`) and the load test (`test_plugin_load`, which the GPU
machine's user checks run, with `RECIPE` on their `PYTHONPATH`).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

RECIPE = Path(__file__).resolve().parents[1] / "recipe"


def recipe_module(relative: str) -> ModuleType:
    """The recipe's file `relative` (a path under recipe/) as a module, loaded once per process under the name
    `recipe.<its path, dotted>`, so it cannot stand in for, or be stood in for by, a module of another name."""
    name = "recipe." + relative.removesuffix(".py").replace("/", ".")
    if name not in sys.modules:
        path = RECIPE / relative
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        # its own imports of the files beside it (build_ep_cuda imports cmake_common), as rattler-build runs it
        sys.path.insert(0, str(path.parent))
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        finally:
            sys.path.remove(str(path.parent))
    return sys.modules[name]
