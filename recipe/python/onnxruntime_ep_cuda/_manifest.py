"""EP plugin manifests: where conda packages install them, what they say, and what is trusted.

This is the one definition of the format. `onnxruntime/_conda_ep_autoregister.py` reads it at every
`import onnxruntime`, and `onnxruntime_ep_cuda` answers upstream's helper calls from it. At module
level it imports only what `import onnxruntime` has already loaded (`os`, `stat`, `typing`): it runs
during every `import onnxruntime`, and most environments have no manifest.

A manifest is `<prefix>/share/onnxruntime/ep-plugins/<package>.json`
(`<prefix>/Library/share/...` on Windows):

    {"manifest_version": 1, "package": "onnxruntime-ep-cuda",
     "registration_name": "CUDAExecutionProvider", "ep_names": ["CUDAExecutionProvider"],
     "library": "lib/libonnxruntime_providers_cuda.so"}

`library` is relative to the prefix and uses forward slashes. A library that resolves outside the
prefix is refused, whether through `..`, an absolute path or a symlink.

Any package can drop a file in that folder, so a manifest is read as untrusted input: only a regular
file of at most MAX_BYTES is read, opened without blocking (a FIFO or a device is refused unread);
text values must be printable (a NUL would cut a name or a path short inside the core); and every
value a message quotes goes through `shown`, escaped and cut. Reading, checking and resolving a
manifest raise ManifestError and nothing else.

The same file is installed twice: as `onnxruntime/_conda_ep_manifest.py`, which the hook imports from
inside the onnxruntime package (never found by name on sys.path), and as `onnxruntime_ep_cuda/_manifest.py`
for the helper.
"""

from __future__ import annotations

import os
import stat
from typing import NamedTuple, TypeGuard

MANIFEST_VERSION = 1
# a manifest is about 200 bytes; the bound keeps a hostile one from costing time or memory
MAX_BYTES = 64 * 1024
# O_NONBLOCK: opening a FIFO would otherwise wait for a writer; O_NOCTTY: a tty must not become ours
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
_KEYS = ("manifest_version", "package", "registration_name", "ep_names", "library")


class ManifestError(RuntimeError):
    """A manifest that cannot be used. `path` names the file and `reason` says why."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(path, reason)
        self.path = path
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class PluginManifest(NamedTuple):
    path: str
    package: str
    registration_name: str
    ep_names: tuple[str, ...]
    library: str


def prefix_of(package_dir: str) -> str:
    """The environment prefix whose site-packages holds `package_dir`.

    The prefix comes from where the code is installed and never from `CONDA_PREFIX`. That way the
    only manifests trusted are those of the environment that also supplied this code.
    """
    site_packages = os.path.dirname(os.path.abspath(package_dir))
    # <prefix>\Lib\site-packages on Windows, <prefix>/lib/pythonX.Y/site-packages elsewhere
    levels = 2 if os.name == "nt" else 3
    prefix = site_packages
    for _ in range(levels):
        prefix = os.path.dirname(prefix)
    return prefix


def manifest_folder(windows: bool) -> tuple[str, ...]:
    """Where conda packages install manifests, relative to the prefix: under its Library folder on Windows,
    where conda packages keep native files. The feedstock's generator reads it from here and tells the
    plugin's build script (scripts/feedstock/shipped_manifest.py)."""
    shared = ("share", "onnxruntime", "ep-plugins")
    return ("Library", *shared) if windows else shared


def manifest_dir(prefix: str) -> str:
    return os.path.join(prefix, *manifest_folder(os.name == "nt"))


def manifest_paths(prefix: str) -> list[str]:
    """The manifests installed in `prefix`, in a stable order. An absent directory has none."""
    directory = manifest_dir(prefix)
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    except OSError as error:
        raise ManifestError(directory, f"cannot list the directory: {error.strerror}") from None
    return [os.path.join(directory, name) for name in sorted(names) if name.endswith(".json")]


def load_manifest(path: str) -> PluginManifest:
    """The validated manifest at `path`. Its library is checked only for shape, not for location."""
    import json  # not at the top: only environments with a manifest pay for it

    try:
        data = json.loads(_read(path).decode("utf-8"))
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError, an integer of too many digits
        raise ManifestError(path, f"is not valid JSON: {error}") from None
    except RecursionError:
        raise ManifestError(path, "is not valid JSON: nested too deeply") from None
    return _validated(path, data)


def library_path(manifest: PluginManifest, prefix: str) -> str:
    """The manifest's library as an absolute path with symlinks resolved, known to lie in `prefix`."""
    root = os.path.realpath(prefix)
    library = os.path.realpath(os.path.join(root, *manifest.library.split("/")))
    if not _is_within(library, root):
        raise ManifestError(
            manifest.path, f"library {shown(manifest.library)} resolves to {library}, outside the prefix {root}"
        )
    if not os.path.exists(library):
        raise ManifestError(manifest.path, f"library {library} does not exist")
    if not os.path.isfile(library):
        raise ManifestError(manifest.path, f"library {library} is not a regular file")
    return library


def shown(value: object, limit: int = 80) -> str:
    """`value` as a message may quote it: repr() escapes control characters, and the cut bounds its length."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def escaped(text: str) -> str:
    """`text` with each character that is not printable written as its escape, as repr() writes it."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _read(path: str) -> bytes:
    """The bytes of `path` if it is a regular file of at most MAX_BYTES (through symlinks), without blocking."""
    try:
        descriptor = os.open(path, _OPEN_FLAGS)
    except OSError as error:
        raise ManifestError(path, f"cannot be read: {error.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise ManifestError(path, "is not a regular file")
        with open(descriptor, "rb", closefd=False) as stream:
            data = stream.read(MAX_BYTES + 1)
    except OSError as error:
        raise ManifestError(path, f"cannot be read: {error.strerror}") from None
    finally:
        os.close(descriptor)
    if len(data) > MAX_BYTES:
        raise ManifestError(path, f"is over {MAX_BYTES:,} bytes, more than a manifest may have")
    return data


def _validated(path: str, data: object) -> PluginManifest:
    if not isinstance(data, dict):
        raise ManifestError(path, "expected a JSON object")
    missing = [key for key in _KEYS if key not in data]
    if missing:
        raise ManifestError(path, f"missing keys: {', '.join(missing)}")
    unknown = sorted(set(data) - set(_KEYS))
    if unknown:
        raise ManifestError(path, f"unknown keys for manifest_version {MANIFEST_VERSION}: {shown(unknown)}")
    version = data["manifest_version"]
    # type(), not isinstance(): JSON `true` would otherwise pass as version 1
    if type(version) is not int or version != MANIFEST_VERSION:
        raise ManifestError(
            path, f"manifest_version {shown(version)} is not {MANIFEST_VERSION}, the version this reader knows"
        )
    package = _text(path, data, "package")
    if os.path.basename(path) != f"{package}.json":
        raise ManifestError(path, f"the manifest of package {shown(package)} must be named {package}.json")
    registration_name = _text(path, data, "registration_name")
    ep_names = data["ep_names"]
    if not isinstance(ep_names, list) or not ep_names or not all(_is_text(name) for name in ep_names):
        raise ManifestError(path, "ep_names must be a non-empty list of non-empty strings of printable characters")
    library = _text(path, data, "library")
    # ':' catches Windows drive paths ("C:/...", "C:lib") on every platform
    if library.startswith("/") or "\\" in library or ":" in library:
        raise ManifestError(
            path, f"library {shown(library)} must be relative to the prefix and use forward slashes"
        )
    return PluginManifest(path, package, registration_name, tuple(ep_names), library)


def _text(path: str, data: dict[str, object], key: str) -> str:
    value = data[key]
    if not _is_text(value):
        raise ManifestError(path, f"{key} must be a non-empty string of printable characters, not {shown(value)}")
    return value


def _is_text(value: object) -> TypeGuard[str]:
    """A NUL or a control character would cut a name or a path short in the core, or reach a terminal."""
    return isinstance(value, str) and bool(value) and value.isprintable()


def _is_within(path: str, root: str) -> bool:
    try:
        common = os.path.commonpath([root, path])
    except ValueError:  # Windows: the two are on different drives
        return False
    return os.path.normcase(common) == os.path.normcase(root)
