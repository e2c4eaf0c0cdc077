"""The facts the GPU architecture rule rests on, checked against NVIDIA's real compilers from PyPI.

scripts/feedstock/architectures.py keeps, for each CUDA version, the architectures its nvcc compiles
for. Each row is compared here with what that version's compiler says. PyPI's CUDA 12 wheel
(nvidia-cuda-nvcc-cu12) has no nvcc, only ptxas, which makes the SASS: its `--gpu-name` values stand in.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from feedstock.architectures import NVCC_ARCHITECTURES
from support.wheels import unpacked_wheel

# The wheel each row was read from, and the program in it that says what it compiles for.
COMPILERS = {
    "12.9": ("nvidia-cuda-nvcc-cu12==12.9.86", "nvidia/cuda_nvcc/bin/ptxas", "--help"),
    "13.0": ("nvidia-cuda-nvcc==13.0.88", "nvidia/cu13/bin/nvcc", "--list-gpu-code"),
    "13.1": ("nvidia-cuda-nvcc==13.1.115", "nvidia/cu13/bin/nvcc", "--list-gpu-code"),
    "13.2": ("nvidia-cuda-nvcc==13.2.86", "nvidia/cu13/bin/nvcc", "--list-gpu-code"),
    "13.3": ("nvidia-cuda-nvcc==13.3.73", "nvidia/cu13/bin/nvcc", "--list-gpu-code"),
    "13.4": ("nvidia-cuda-nvcc==13.4.92", "nvidia/cu13/bin/nvcc", "--list-gpu-code"),
    "13.5": ("nvidia-cuda-nvcc==13.5.37", "nvidia/cu13/bin/nvcc", "--list-gpu-code"),
}


def test_every_row_of_the_facts_table_has_a_compiler_to_check_it_against() -> None:
    assert set(COMPILERS) == set(NVCC_ARCHITECTURES)


def sass_targets(program: Path, option: str) -> list[int]:
    program.chmod(0o755)  # zipfile drops the executable bit
    result = subprocess.run([str(program), option], capture_output=True, text=True, check=True,
                            stdin=subprocess.DEVNULL, timeout=60)
    if option == "--help":  # ptxas: "Allowed values for this option: 'compute_100', ... 'sm_90'" under --gpu-name
        section = result.stdout.split("--gpu-name", 1)[1].split("Default value", 1)[0]
        return sorted({int(n) for n in re.findall(r"'sm_(\d+)'", section)})
    return sorted({int(n) for n in re.findall(r"^sm_(\d+)$", result.stdout, re.MULTILINE)})


@pytest.mark.network
@pytest.mark.parametrize("version", list(COMPILERS))
def test_the_facts_table_lists_what_each_cuda_versions_compiler_accepts(version: str) -> None:
    requirement, program, option = COMPILERS[version]
    wheel = unpacked_wheel(requirement, "manylinux2014_x86_64")  # skips when the package index offers nothing
    assert sass_targets(wheel / program, option) == sorted(NVCC_ARCHITECTURES[version])
