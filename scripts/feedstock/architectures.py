"""Where the plugin's CUDA architecture list is decided, for every CUDA version the recipe builds.

The rule: a CUDA version that `cuda.versions` in the config lists gets the config's list, checked
against what that version's nvcc accepts. A newer release of a listed major (a CUDA migration the
config has not caught up with, say 13.5 beside a listed 13.4) gets that major's newest list, limited
to what its nvcc accepts, with PTX for the last entry. Any other version (an older release of a listed
major, or one of a major the config no longer lists) has no list: the recipe skips it, so conda-smithy
writes no job for it. A version that no row of NVCC_ARCHITECTURES knows cannot be derived either:
render names it and says what to add. Whether ONNX Runtime builds a list as listed is its own CMake's
to say (`ort_keeps`).
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .cuda_targets import number, ort_cuda_architectures
from .reader import version_tuple

# The nvcc release each CUDA version's facts below were read from: PyPI's nvidia-cuda-nvcc wheel at that
# version (nvidia-cuda-nvcc-cu12 for 12.x), which tests/test_architectures.py runs. The rehearsal's stand-in
# nvcc (scripts/standins/standins.yaml, `{nvcc}`) and the build-cost tests' toolkit use the same wheels.
NVCC_RELEASES: dict[str, str] = {
    "12.9": "12.9.86",
    "13.0": "13.0.88",
    "13.1": "13.1.115",
    "13.2": "13.2.86",
    "13.3": "13.3.73",
    "13.4": "13.4.92",
    "13.5": "13.5.37",
}
# The SASS targets (compute capabilities) each CUDA version's compiler accepts.
# - 13.x: `nvcc --list-gpu-code` of the release's wheel; tests/test_architectures.py runs each and compares.
# - 12.9: PyPI's nvidia-cuda-nvcc-cu12 ships no nvcc, only ptxas, which turns PTX into SASS: the values its
#   `--gpu-name` accepts (the same test compares them). NVIDIA's CUDA 12.9 release notes agree: 12.8 added
#   100, 101 and 120, 12.9 added 103 and 121.
NVCC_ARCHITECTURES: dict[str, tuple[int, ...]] = {
    "12.9": (50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 103, 120, 121),
    "13.0": (75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121),
    "13.1": (75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121),
    "13.2": (75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121),
    "13.3": (75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121),
    "13.4": (75, 80, 86, 87, 88, 89, 90, 100, 103, 107, 110, 120, 121),
    "13.5": (75, 80, 86, 87, 88, 89, 90, 100, 103, 107, 110, 120, 121),
}
# Jetson modules' integrated GPUs (NVIDIA's compute capability table, developer.nvidia.com/cuda-gpus):
# Nano 5.3, TX2 6.2, Xavier 7.2, Orin 8.7, Thor 10.1 (11.0 from CUDA 13 on). They are arm64 boards, so an
# x86_64 package never runs on them, although nvcc for x86_64 accepts them.
JETSON = (53, 62, 72, 87, 101, 110)
ARM64_PLATFORMS = ("linux-aarch64",)


def problems(version: str, platform: str, architectures: tuple[str, ...]) -> list[tuple[int, str]]:
    """(index, problem) for each entry CUDA `version`'s nvcc cannot build for, or no `platform` GPU has."""
    accepted = NVCC_ARCHITECTURES[version]
    found = []
    for index, architecture in enumerate(architectures):
        if number(architecture) not in accepted:
            found.append((index, f"{architecture!r}: CUDA {version}'s nvcc does not compile for it (it accepts "
                                 f"{', '.join(map(str, accepted))})"))
        elif number(architecture) in JETSON and platform not in ARM64_PLATFORMS:
            found.append((index, f"{architecture!r} is a Jetson (arm64) GPU, which no {platform} package runs on"))
    return found


@dataclass(frozen=True)
class CudaLists:
    """The architecture list of each CUDA version the recipe builds, by platform."""

    by_version: dict[str, dict[str, tuple[str, ...]]]
    derived_from: dict[str, str]  # a derived version -> the listed version its list comes from

    def get(self, version: str, platform: str) -> tuple[str, ...] | None:
        return self.by_version.get(version, {}).get(platform)


def _derived(listed: tuple[str, ...], version: str) -> tuple[str, ...]:
    kept = [a for a in listed if number(a) in NVCC_ARCHITECTURES[version]]
    # a bare entry is SASS and PTX (ort_cuda_architectures): the newest kept one carries PTX
    return (*kept[:-1], str(number(kept[-1]))) if kept else ()


def _newest_of_major(version: str, listed: dict[str, dict[str, tuple[str, ...]]]) -> str | None:
    """The newest version the config lists of `version`'s major, if it lists one."""
    same_major = [v for v in listed if version_tuple(v)[0] == version_tuple(version)[0]]
    return max(same_major, key=version_tuple, default=None)


def cuda_lists(listed: dict[str, dict[str, tuple[str, ...]]]) -> CudaLists:
    """The config's lists (`cuda.versions`) and the ones the rule derives for newer releases of their majors."""
    by_version = dict(listed)
    derived_from = {}
    for version in NVCC_ARCHITECTURES:
        if version in listed:
            continue
        newest = _newest_of_major(version, listed)
        if newest is None or version_tuple(newest) > version_tuple(version):
            continue
        lists = {platform: _derived(archs, version) for platform, archs in listed[newest].items()}
        if all(lists.values()):
            by_version[version] = lists
            derived_from[version] = newest
    return CudaLists(dict(sorted(by_version.items(), key=lambda item: version_tuple(item[0]))), derived_from)


def missing_list(version: str, listed: dict[str, dict[str, tuple[str, ...]]]) -> str:
    """Why CUDA `version` has no list, and what to add so that it gets one."""
    facts = ("what its nvcc compiles for (`nvcc --list-gpu-code`) to NVCC_ARCHITECTURES in "
             "scripts/feedstock/architectures.py")
    newest = _newest_of_major(version, listed)
    if newest is not None and version_tuple(newest) < version_tuple(version):
        return f"CUDA {version} has no GPU architecture list: add {facts}, and its list follows CUDA {newest}'s"
    why = f"the config lists no CUDA {version_tuple(version)[0]}" if newest is None else \
        f"it is older than the config's CUDA {newest}"
    config = f"cuda.versions.\"{version}\" to config/feedstock.yaml"
    return (f"CUDA {version} has no GPU architecture list: {why}; add "
            f"{config if version in NVCC_ARCHITECTURES else facts + ', and ' + config}")


# Where ONNX Runtime's source keeps its rules for CMAKE_CUDA_ARCHITECTURES.
ORT_CUDA_CONFIGURATION = "cmake/external/cuda_configuration.cmake"

# ORT's own rule run on one list: its setup_cuda_architectures macro, in CMake's script mode, where the
# project-only add_definitions has nothing to add to; it prints the SASS and PTX entries it keeps, and the
# targets it compiles them as (CMAKE_CUDA_ARCHITECTURES as it leaves it: 90a-real, 121-virtual).
_ORT_SCRIPT = """cmake_minimum_required(VERSION 3.16)
function(add_definitions)
endfunction()
include("${ORT_CUDA_CONFIGURATION}")
setup_cuda_architectures()
message(NOTICE "sass=${CMAKE_CUDA_ARCHITECTURES_ORIG}")
message(NOTICE "ptx=${CMAKE_CUDA_ARCHITECTURES_LAST_VIRTUAL}")
message(NOTICE "targets=${CMAKE_CUDA_ARCHITECTURES}")
"""


def ort_rule(architectures: tuple[str, ...], cuda_configuration: Path, cmake: str,
             scratch: Path) -> subprocess.CompletedProcess[str]:
    """ONNX Runtime's CMake rule (`cuda_configuration`) run on one list: its `sass=`, `ptx=` and `targets=` lines
    are on stderr (_ORT_SCRIPT)."""
    script = scratch / "ort_cuda_architectures.cmake"
    if not script.is_file():  # one script for every list checked in `scratch`
        script.write_text(_ORT_SCRIPT)
    return subprocess.run([cmake, f"-DORT_CUDA_CONFIGURATION={cuda_configuration}",
                           f"-DCMAKE_CUDA_ARCHITECTURES={ort_cuda_architectures(architectures)}", "-P", str(script)],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)


def ort_keeps(architectures: tuple[str, ...], cuda_configuration: Path, cmake: str, scratch: Path) -> str | None:
    """None when ONNX Runtime's CMake (`cuda_configuration`, its cmake/external/cuda_configuration.cmake) keeps
    the list as the config means it, every SASS target and the PTX one in order; otherwise what it does."""
    done = ort_rule(architectures, cuda_configuration, cmake, scratch)
    if done.returncode != 0:
        said = [line.strip() for line in done.stderr.splitlines()
                if line.strip() and not line.startswith("CMake Error")]
        return f"ONNX Runtime's CMake refuses it ({said[0][:120] if said else f'cmake exited {done.returncode}'})"
    kept = dict(re.findall(r"^(sass|ptx)=(.*)$", done.stderr, re.MULTILINE))
    sass = [str(number(a)) for a in architectures if not a.endswith("-virtual")]
    ptx = [f"{number(a)}-virtual" for a in architectures if not a.endswith("-real")]
    kept_sass = [a for a in kept.get("sass", "").split(";") if a]
    kept_ptx = [kept["ptx"]] if kept.get("ptx") else []
    if kept_sass == sass and kept_ptx == ptx:
        return None
    return (f"ONNX Runtime's CMake compiles it as SASS {kept.get('sass') or 'none'} "
            f"and PTX {kept.get('ptx') or 'none'}, "
            f"not as listed (SASS {';'.join(sass) or 'none'}, PTX {';'.join(ptx) or 'none'}): list each architecture "
            "once, and PTX for the last one only")
