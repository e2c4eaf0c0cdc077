"""Registers the plugin EPs that conda packages installed in this environment, at `import onnxruntime`.

conda-forge installs this module as `onnxruntime/_conda_ep_autoregister.py`, and the manifest reader
(`onnxruntime_ep_cuda/_manifest.py`, which defines the format and the trust rules) beside it as
`onnxruntime/_conda_ep_manifest.py`. It also appends a call to `register_installed_plugins()` at the
end of `onnxruntime/__init__.py`. Each EP package, such as `onnxruntime-ep-cuda`, installs a manifest.

Each manifest is its own unit: whatever reading, checking or registering it does ends as one
`EpAutoregistrationWarning` naming it, and the others go on. A library counts as registered only when
the core has accepted it. Before the core loads a library, the logger of this module says at debug
level which manifest named it, so that a library that kills the process can be traced:

    python -c "import logging; logging.basicConfig(level=logging.DEBUG); import onnxruntime"

ONNXRUNTIME_DISABLE_EP_AUTOREGISTRATION=1 (or true, yes, on) switches this off; 0, false, no, off or
an empty value leave it on. Any other value switches it off too, with a warning.
"""

from __future__ import annotations

import contextlib
import functools
import os
import warnings

import onnxruntime

DISABLE_VARIABLE = "ONNXRUNTIME_DISABLE_EP_AUTOREGISTRATION"
_SWITCHES_OFF = ("1", "true", "yes", "on")
_LEAVES_ON = ("", "0", "false", "no", "off")

# name -> library, for each library this process registered and the core accepted. It outlives
# importlib.reload(onnxruntime), which runs the hook again while the core still holds the libraries.
_registered: dict[str, str] = {}


class EpAutoregistrationWarning(RuntimeWarning):
    """A plugin EP installed in this environment was not registered. onnxruntime works without it."""


def register_installed_plugins() -> None:
    """Register each manifest's library, and warn once for each manifest that fails. Never raises."""
    value = os.environ.get(DISABLE_VARIABLE, "")
    setting = value.strip().lower()
    if setting in _LEAVES_ON:
        said = _register_all(os.path.dirname(os.path.abspath(__file__)))
    elif setting in _SWITCHES_OFF:
        said = []
    else:
        said = [f"{DISABLE_VARIABLE}={value[:40]!r} is none of {', '.join(_SWITCHES_OFF)} (off) or "
                f"{', '.join(v if v else repr(v) for v in _LEAVES_ON)} (on): EP auto-registration is off"]
    _accept_repeated_registration()
    # The warnings come after every registration has been tried. Under `-W error` the first warning
    # raises; suppressing it keeps the import working and the healthy plugins registered.
    with contextlib.suppress(EpAutoregistrationWarning):
        for message in said:
            warnings.warn(message, EpAutoregistrationWarning, stacklevel=2)


def _register_all(package_dir: str) -> list[str]:
    """Register every installed manifest; one message for each that failed."""
    try:
        # inside this package, so that nothing on sys.path (a folder in the working directory) stands in
        import onnxruntime._conda_ep_manifest as reader
    except Exception as error:  # noqa: BLE001 - a broken install must not break `import onnxruntime`
        return [_skipped(__file__, f"its manifest reader cannot be imported: {error!r}")]
    prefix = reader.prefix_of(package_dir)
    try:
        paths = reader.manifest_paths(prefix)
    except reader.ManifestError as error:
        return [_skipped(reader.escaped(error.path), error.reason)]
    said = []
    claimed: dict[str, str] = {}
    for path in paths:
        try:
            reason = _register(reader, path, prefix, claimed)
        except reader.ManifestError as error:
            reason = error.reason
        except Exception as error:  # noqa: BLE001 - whatever one manifest does costs that manifest only
            reason = f"unexpected {type(error).__name__}: {reader.shown(str(error))}"
        if reason:
            said.append(_skipped(reader.escaped(path), reason))
    return said


def _register(reader, path: str, prefix: str, claimed: dict[str, str]) -> str | None:
    """Register the library of the manifest at `path`; why not, if it was not."""
    manifest = reader.load_manifest(path)
    library = reader.library_path(manifest, prefix)
    name = manifest.registration_name
    # The core would hide this clash: it refuses any library under a taken name as "already registered".
    owner = claimed.setdefault(name, path)
    if owner != path:
        return f"registration name {reader.shown(name)} is already used by {reader.escaped(owner)}"
    if _registered.get(name) == library:
        return None  # registered by an earlier run of this hook in this process
    import logging  # not at the top: only environments with a manifest pay for it

    logging.getLogger(__name__).debug("registering %s, named by %s", library, path)
    try:
        onnxruntime.register_execution_provider_library(name, library)
    except Exception as error:  # noqa: BLE001 - the cores raise Fail; any refusal warns, never fails the import
        return f"onnxruntime refused {library}: {reader.escaped(str(error))}"
    _registered[name] = library
    return None


def _skipped(path: str, reason: str) -> str:
    return f"EP auto-registration skipped {path}: {reason} (set {DISABLE_VARIABLE}=1 to turn it off)"


def _accept_repeated_registration() -> None:
    """Let code written for upstream's wheels register the plugin itself, as it always does.

    After auto-registration the core would refuse that call ("already registered"). Registering the
    library that is already registered, under the same name, becomes a no-op; every other call
    reaches the core unchanged, and unregistering forgets the name.
    """
    register = onnxruntime.register_execution_provider_library
    unregister = onnxruntime.unregister_execution_provider_library

    @functools.wraps(register)
    def register_execution_provider_library(registration_name: str, path: str) -> None:
        if _registered.get(registration_name) == os.path.realpath(path):
            return None
        return register(registration_name, path)

    @functools.wraps(unregister)
    def unregister_execution_provider_library(registration_name: str) -> None:
        _registered.pop(registration_name, None)
        return unregister(registration_name)

    onnxruntime.register_execution_provider_library = register_execution_provider_library
    onnxruntime.unregister_execution_provider_library = unregister_execution_provider_library
