"""How ONNX Runtime reads an entry of a CUDA architecture list (`80-real`, `121`, `90-virtual`): the compute
capability it names, and the nvcc targets ORT compiles it as (`sm_80`, `sm_121a`, `compute_121`).

Standard library only, and no import of the rest of the package: scripts/buildcost.py imports it on the GPU
machine, whose Python has neither pydantic nor yaml.
"""

from __future__ import annotations

import re

# The compute capabilities whose SASS ONNX Runtime compiles arch-specific (`sm_90a`), which runs on that exact chip
# only: ARCHITECTURES_WITH_ACCEL in 1.30.0's cmake/external/cuda_configuration.cmake (tests/test_architectures.py
# runs that file on every architecture an nvcc accepts)
ARCH_SPECIFIC = (90, 100, 103, 110, 120, 121)


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
    """A config's list (`75-real`, `90-real`, `121` ...) as the nvcc targets ONNX Runtime compiles: SASS as
    sm_NNN, or sm_NNNa for ARCH_SPECIFIC, and PTX as compute_NNN."""
    targets = []
    for entry in ort_cuda_architectures(tuple(architectures)).split(";"):
        n = number(entry)
        targets.append(f"compute_{n}" if entry.endswith("-virtual") else f"sm_{n}{'a' if n in ARCH_SPECIFIC else ''}")
    return targets
