"""Imports onnxruntime and prints, as one JSON line, what EP auto-registration did.

Run it with the interpreter of a staged prefix:

    python ep_probe.py [--reload] [--register NAME LIBRARY]

The report holds the warnings raised by the import (and by a reload, when asked), the EP names that
the core's devices show, and, when asked, the result of registering NAME again: with the core's
own function (`registration`), which refuses a name already taken, and the way upstream-style
application code does (`application_registration`).
"""

from __future__ import annotations

import argparse
import importlib
import json
import warnings
from collections.abc import Callable


def _warnings_of(action: Callable[[], object]) -> list[dict[str, str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        action()
    return [{"category": w.category.__name__, "message": str(w.message)} for w in caught]


def _attempt(register: Callable[[str, str], object], name: str, library: str) -> str:
    import onnxruntime

    try:
        register(name, library)
    except onnxruntime.capi.onnxruntime_pybind11_state.Fail as error:
        return f"refused: {error}"
    return "accepted"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reload", action="store_true")
    parser.add_argument("--register", nargs=2, metavar=("NAME", "LIBRARY"))
    args = parser.parse_args()

    report: dict[str, object] = {"warnings": _warnings_of(lambda: importlib.import_module("onnxruntime"))}
    import onnxruntime  # imported above, under the warnings recorder

    if args.reload:
        report["reload_warnings"] = _warnings_of(lambda: importlib.reload(onnxruntime))
    report["ep_names"] = sorted({device.ep_name for device in onnxruntime.get_ep_devices()})
    if args.register:
        report["registration"] = _attempt(onnxruntime.capi._pybind_state.register_execution_provider_library,
                                          *args.register)
        report["application_registration"] = _attempt(onnxruntime.register_execution_provider_library,
                                                      *args.register)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
