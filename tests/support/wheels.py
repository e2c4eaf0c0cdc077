"""Real plugin EP libraries from PyPI wheels, downloaded once and unpacked under `.cache/wheels/`.

The tests need the plugin libraries, not installed packages: installing a plugin would let its own
pins decide the core (onnxruntime-ggml 0.2.0 asks for onnxruntime < 1.31, yet runs on 1.32).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from bootstrap import cache_lock
from support.pyenvs import CACHE, pip_failed

WHEELS = CACHE.parent / "wheels"


@dataclass(frozen=True)
class PluginWheel:
    requirement: str
    ep_name: str
    linux_library: str
    windows_library: str


# Sizes as downloaded: 6.9 MB (manylinux_2_28_x86_64) and 13.1 MB (win_amd64).
WEBGPU = PluginWheel(
    "onnxruntime-ep-webgpu==0.4.0", "WebGpuExecutionProvider",
    linux_library="onnxruntime_ep_webgpu/libonnxruntime_providers_webgpu.so",
    windows_library="onnxruntime_ep_webgpu/onnxruntime_providers_webgpu.dll",
)
# Sizes as downloaded: 22.5 MB (manylinux_2_35_x86_64) and 17.9 MB (win_amd64).
GGML = PluginWheel(
    "onnxruntime-ggml==0.2.0", "ggml",
    linux_library="onnxruntime_ggml/lib/libonnxruntime_ggml.so",
    windows_library="onnxruntime_ggml/lib/onnxruntime_ggml.dll",
)


def unpacked_wheel(requirement: str, platform: str | None) -> Path:
    """The unpacked wheel of a pinned `requirement` for pip's `platform` tag (None: this machine's)."""
    target = WHEELS / f"{requirement.replace('==', '-')}-{platform or 'native'}"
    with cache_lock(target):
        done = target / "unpacked.ok"
        if done.exists():
            return target
        with tempfile.TemporaryDirectory() as download:
            command = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                       "--no-deps", "--only-binary=:all:", "--dest", download, requirement]
            if platform:
                command += ["--platform", platform]
            result = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL)
            if result.returncode != 0:
                pip_failed(f"download {requirement} for {platform or 'this machine'}", result.stdout + result.stderr)
            (wheel,) = Path(download).glob("*.whl")
            with zipfile.ZipFile(wheel) as archive:
                archive.extractall(target)
        done.write_text(f"{wheel.name}\n")
        return target


def linux_library(plugin: PluginWheel) -> Path:
    return unpacked_wheel(plugin.requirement, None) / plugin.linux_library


def windows_library(plugin: PluginWheel) -> Path:
    return unpacked_wheel(plugin.requirement, "win_amd64") / plugin.windows_library
