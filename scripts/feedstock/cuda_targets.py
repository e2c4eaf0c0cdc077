"""How ONNX Runtime reads an entry of a CUDA architecture list (`80-real`, `121`, `90-virtual`): the compute
capability it names, and the nvcc targets ORT compiles it as (`sm_80`, `sm_121a`, `compute_121`).

Standard library only, and no import of the rest of the package: scripts/buildcost.py imports it on the GPU
machine, whose Python has neither pydantic nor yaml.
"""

from __future__ import annotations

import re


def number(architecture: str) -> int:
    """`80-real`, `sm_90a`, `compute_121` -> 80, 90, 121: the compute capability an entry or target is for."""
    return int(re.search(r"\d+", architecture).group())


def ort_cuda_architectures(archs: tuple[str, ...]) -> str:
    """The config's list as ORT's CMAKE_CUDA_ARCHITECTURES: a bare entry means SASS and PTX.

    ORT (cmake/external/cuda_configuration.cmake, setup_cuda_architectures) compiles a bare `NNN` like
    `NNN-real`, as SASS only; PTX is embedded only for an `NNN-virtual`, so a bare entry gets both.
    """
    return ";".join(f"{a}-real;{a}-virtual" if a.isdigit() else a for a in archs)


def nvcc_targets(architectures: list[str]) -> list[str]:
    """A config's list (`75-real`, `90-real`, `121` ...) as the nvcc targets ONNX Runtime compiles: SASS from
    90 up arch-specific (sm_90a: its ARCHITECTURES_WITH_ACCEL, cuda_configuration.cmake), PTX as compute_NNN."""
    targets = []
    for entry in ort_cuda_architectures(tuple(architectures)).split(";"):
        n = number(entry)
        targets.append(f"compute_{n}" if entry.endswith("-virtual") else f"sm_{n}{'a' if n >= 90 else ''}")
    return targets
