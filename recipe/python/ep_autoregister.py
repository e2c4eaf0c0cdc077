"""Registers the plugin EPs that conda packages installed in this environment, at `import onnxruntime`.

conda-forge installs this module as `onnxruntime/_conda_ep_autoregister.py`. It also appends a call
to `register_installed_plugins()` at the end of `onnxruntime/__init__.py`. Each EP package, such as
`onnxruntime-ep-cuda`, installs a manifest. The format and the trust rules are defined in
`onnxruntime_ep_cuda/_manifest.py`. Set ONNXRUNTIME_DISABLE_EP_AUTOREGISTRATION=1 to switch this
off.
"""

from __future__ import annotations

import contextlib
import functools
import os
import warnings

import onnxruntime

DISABLE_VARIABLE = "ONNXRUNTIME_DISABLE_EP_AUTOREGISTRATION"

# When the name is already taken, the cores answer "library is already registered under <name>"
# (seen on 1.24.4 and 1.30.0) or "EP library is already registered under <name>" (1.32.0). Upstream's
# registration of a bundled CUDA plugin, in its own onnxruntime/__init__.py, matches the same words.
_ALREADY_REGISTERED = "already registered"


class EpAutoregistrationWarning(RuntimeWarning):
    """A plugin EP installed in this environment was not registered. onnxruntime works without it."""


def register_installed_plugins() -> None:
    """Register each manifest's library, and warn once for each manifest that fails. Never raises."""
    if os.environ.get(DISABLE_VARIABLE, "") not in ("", "0"):
        return
    registered: dict[str, str] = {}
    try:
        failures = _register_all(os.path.dirname(os.path.abspath(__file__)), registered)
        if registered:
            _accept_repeated_registration(registered)
    except Exception as error:  # noqa: BLE001 - a bug in this module must not break `import onnxruntime` either
        failures = [(__file__, f"unexpected {error!r}")]
    # The warnings come after every registration has been tried. Under `-W error` the first warning
    # raises; suppressing it keeps the import working and the healthy plugins registered.
    with contextlib.suppress(EpAutoregistrationWarning):
        for path, reason in failures:
            warnings.warn(
                f"EP auto-registration skipped {path}: {reason} (set {DISABLE_VARIABLE}=1 to turn it off)",
                EpAutoregistrationWarning,
                stacklevel=2,
            )


def _register_all(package_dir: str, registered: dict[str, str]) -> list[tuple[str, str]]:
    """Register every installed manifest into `registered` (name -> library).

    Returns (manifest, reason) for each one that failed."""
    # Imported here, inside the caller's safety net: a missing reader becomes a warning,
    # not an ImportError in onnxruntime/__init__.py.
    from onnxruntime_ep_cuda._manifest import (  # noqa: PLC0415
        ManifestError,
        library_path,
        load_manifest,
        manifest_paths,
        prefix_of,
    )

    prefix = prefix_of(package_dir)
    try:
        paths = manifest_paths(prefix)
    except ManifestError as error:
        return [(error.path, error.reason)]
    failures: list[tuple[str, str]] = []
    claimed: dict[str, str] = {}
    for path in paths:
        try:
            manifest = load_manifest(path)
            library = library_path(manifest, prefix)
        except ManifestError as error:
            failures.append((path, error.reason))
            continue
        reason = _claim(claimed, manifest.registration_name, path) or _register(manifest.registration_name, library)
        if reason:
            failures.append((path, reason))
        else:
            registered[manifest.registration_name] = library
    return failures


def _accept_repeated_registration(registered: dict[str, str]) -> None:
    """Let code written for upstream's wheels register the plugin itself, as it always does.

    After auto-registration the core would refuse that call ("already registered"). Registering the
    library that is already registered, under the same name, becomes a no-op; every other call
    reaches the core unchanged, and unregistering forgets the name.
    """
    register = onnxruntime.register_execution_provider_library
    unregister = onnxruntime.unregister_execution_provider_library

    @functools.wraps(register)
    def register_execution_provider_library(registration_name: str, path: str) -> None:
        if registered.get(registration_name) == os.path.realpath(path):
            return None
        return register(registration_name, path)

    @functools.wraps(unregister)
    def unregister_execution_provider_library(registration_name: str) -> None:
        registered.pop(registration_name, None)
        return unregister(registration_name)

    onnxruntime.register_execution_provider_library = register_execution_provider_library
    onnxruntime.unregister_execution_provider_library = unregister_execution_provider_library


def _claim(claimed: dict[str, str], name: str, path: str) -> str | None:
    """Refuse a second manifest with the same registration name. The core would hide the clash:
    for any library under a name already taken, it says "already registered"."""
    owner = claimed.setdefault(name, path)
    return None if owner == path else f"registration name {name!r} is already used by {owner}"


def _register(name: str, library: str) -> str | None:
    try:
        onnxruntime.register_execution_provider_library(name, library)
    except Exception as error:  # noqa: BLE001 - the cores raise Fail; any refusal warns, never fails the import
        if _ALREADY_REGISTERED in str(error):
            return None  # registered earlier, by the user or by an earlier import: it is there either way
        return f"onnxruntime refused {library}: {error}"
    return None
