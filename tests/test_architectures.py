"""The facts the GPU architecture rule rests on, checked against NVIDIA's real compilers from PyPI.

scripts/feedstock/architectures.py keeps, for each CUDA version, the architectures its nvcc compiles
for. Each row is compared here with what that version's compiler says. PyPI's CUDA 12 wheel
(nvidia-cuda-nvcc-cu12) has no nvcc, only ptxas, which makes the SASS: its `--gpu-name` values stand in.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CONFIG, REPO
from feedstock.architectures import NVCC_ARCHITECTURES, NVCC_RELEASES, ORT_CUDA_CONFIGURATION, ort_rule
from feedstock.cuda_targets import number, nvcc_targets
from feedstock.inputs import load_bot_fields
from feedstock.reader import version_tuple
from standins import cache_folder
from standins.sources import MIRROR_VARIABLE, at_hand, recipe_source
from support.wheels import unpacked_wheel

# The wheel each row was read from (at its NVCC_RELEASES version), and the program in it that says what it
# compiles for.
COMPILERS = {
    version: (f"nvidia-cuda-nvcc-cu12=={release}", "nvidia/cuda_nvcc/bin/ptxas", "--help")
    if version_tuple(version)[0] == 12 else
    (f"nvidia-cuda-nvcc=={release}", "nvidia/cu13/bin/nvcc", "--list-gpu-code")
    for version, release in NVCC_RELEASES.items()
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


# --- the lists as ONNX Runtime's own CMake builds them (its cmake/external/cuda_configuration.cmake)

def ort_mirror() -> Path:
    """The mirror folder, when it holds the recipe's source; a skip that says why otherwise."""
    located = at_hand(recipe_source(REPO), cache_folder(REPO))
    if located is None or not located.origin.startswith("mirror"):
        pytest.skip("the recipe's ONNX Runtime source is in no mirror folder "
                    "(ORT_SOURCE_MIRROR, else ../shared/upstream)")
    return located.tarball.parent


def test_every_listed_list_is_built_by_orts_cmake_as_listed() -> None:
    from render import ort_refusals

    ort_mirror()
    assert shutil.which("cmake"), "no cmake on PATH: the render would check nothing"
    assert ort_refusals(REPO, CONFIG, load_bot_fields(REPO)) == []


def test_nvcc_targets_are_what_orts_cmake_compiles_each_architecture_as(tmp_path: Path) -> None:
    """cuda_targets.py's copy of ORT's arch-specific rule, against ORT's own on every architecture an nvcc of the
    config accepts: an `a` it misses or adds would misprice predict_build_cost.py's jobs."""
    mirror = ort_mirror()
    assert shutil.which("cmake"), "no cmake on PATH"
    configuration = tmp_path / "cuda_configuration.cmake"
    configuration.write_text(at_hand(recipe_source(REPO), cache_folder(REPO), {MIRROR_VARIABLE: str(mirror)})
                             .read(ORT_CUDA_CONFIGURATION))
    differ = {}
    for architecture in sorted({a for known in NVCC_ARCHITECTURES.values() for a in known}):
        entry = f"{architecture}-real"
        done = ort_rule((entry,), configuration, "cmake", tmp_path)
        (compiled,) = re.findall(r"^targets=(.*)$", done.stderr, re.MULTILINE)
        ort = [f"sm_{a.removesuffix('-real')}" for a in compiled.split(";")]
        if nvcc_targets([entry]) != ort:
            differ[entry] = (nvcc_targets([entry]), ort)
    assert differ == {}


# (what the newest listed CUDA's linux-64 list becomes, the problem the render names)
ORT_REFUSES = {
    "a leading zero": (lambda a: ["0" + a[0], *a[1:]],
                       "ONNX Runtime's CMake refuses it (Unrecognized CUDA architecture"),
    "PTX not last": (lambda a: [f"{number(a[0])}-virtual", *a[1:]], "ONNX Runtime's CMake compiles it as SASS"),
    "one architecture in two spellings": (lambda a: [a[0], str(number(a[0])), *a[1:]],
                                          "ONNX Runtime's CMake compiles it as SASS"),
}


@pytest.mark.parametrize("case", ORT_REFUSES)
def test_render_refuses_a_list_orts_cmake_would_not_build_as_listed(feedstock: Path, case: str) -> None:
    mirror = ort_mirror()
    change, problem = ORT_REFUSES[case]
    newest = max(CONFIG.cuda.versions, key=version_tuple)
    listed = list(CONFIG.cuda.versions[newest].architectures["linux-64"])
    config = feedstock / "config" / "feedstock.yaml"
    text, count = re.subn(rf'(?ms)^(    "{re.escape(newest)}":\n.*?^        linux-64: )\[[^\]]*\]',
                          rf"\g<1>[{', '.join(repr(a) for a in change(listed))}]", config.read_text(), count=1)
    assert count == 1
    config.write_text(text.replace("'", '"'))
    before = {p: p.read_bytes() for p in (feedstock / "recipe").rglob("*") if p.is_file()}
    done = subprocess.run([sys.executable, str(feedstock / "scripts" / "render.py")], capture_output=True, text=True,
                          env={**os.environ, MIRROR_VARIABLE: str(mirror)}, stdin=subprocess.DEVNULL, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f'config/feedstock.yaml: cuda.versions."{newest}".architectures.linux-64: {problem}'), line
    assert {p: p.read_bytes() for p in (feedstock / "recipe").rglob("*") if p.is_file()} == before
