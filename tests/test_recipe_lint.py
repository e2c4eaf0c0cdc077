"""The recipe against the checks conda-smithy does not make (support/recipe_checks.py).

conda-smithy's own lints run for real in test_conda_smithy.py. The checks run on an unchanged copy of the
feedstock, which none may fail, and on broken copies, to show each mistake trips exactly its checks.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import REPO, SHARED
from support import recipe_checks as checks
from support.recipe_checks import Feedstock, run_checks

Edit = Callable[[str], str]


def _replace(old: str, new: str, after: str = "") -> Edit:
    """Replace the first `old` that follows `after`."""
    def edit(text: str) -> str:
        at = text.index(old, text.index(after) if after else 0)
        return text[:at] + new + text[at + len(old):]
    return edit


CPP = "name: onnxruntime-cpp"
CXX_COMPILER = '        - ${{ compiler("cxx") }}\n'
CPU_ONLY = '        - cuda_compiler_version != "None"\n'
BROKEN: dict[str, tuple[str, Edit, set[str]]] = {
    "unchanged": (checks.RECIPE, lambda text: text, set()),
    # rattler-build accepts it; the recipe format, which conda-forge's tools follow, does not
    "license_family in about": (
        checks.RECIPE, _replace("\nabout:\n", "\nabout:\n  license_family: MIT\n"),
        {"check_recipe_matches_schema"}),
    "CPU output requiring a CUDA package": (
        checks.RECIPE,
        _replace("      run_exports:", "      host:\n        - libcublas-dev\n      run_exports:", after=CPP),
        {"check_cpu_outputs_never_require_cuda"}),
    "CPU output compiled with nvcc": (
        checks.RECIPE, _replace(CXX_COMPILER, '        - ${{ compiler("cuda") }}\n' + CXX_COMPILER, after=CPP),
        {"check_cpu_outputs_never_require_cuda"}),
    # a CPU output that reads the CUDA compiler's key is built once per CUDA compiler
    "CPU output varying with the CUDA compiler": (
        checks.RECIPE, _replace(CPU_ONLY, CPU_ONLY + '        - cuda_compiler == "clang"\n', after=CPP),
        {"check_cpu_outputs_never_require_cuda"}),
    # a stale CUDA version list: the plugin never builds and the CUDA jobs build nothing
    "plugin skipped everywhere": (
        checks.RECIPE, lambda text: re.sub(r"- cuda_compiler_version not in \[.*\]",
                                           '- cuda_compiler_version not in ["12.8", "13.1"]', text, count=1),
        {"check_no_output_is_skipped_everywhere", "check_every_config_builds_an_output"}),
    "README.md left to the rerender": (
        checks.CONDA_FORGE_YML, lambda text: re.sub(r"(?m)^  - README\.md\n", "", text),
        {"check_conda_forge_yml_has_the_settings_the_feedstock_relies_on"}),
}


@pytest.mark.parametrize("case", BROKEN)
def test_a_broken_copy_fails_exactly_the_checks_written_for_it(case: str, tmp_path: Path) -> None:
    path, edit, expected = BROKEN[case]
    shared = SHARED if SHARED.is_dir() else None
    if shared is None:  # the other checks still run; the schema checks need ../shared
        if expected and expected <= checks.NEEDS_SHARED:
            pytest.skip(f"{SHARED} is not here: only the schema checks catch this")
        expected = expected - checks.NEEDS_SHARED
    failing = {name: problems for name, problems in run_checks(_broken_copy(case, tmp_path, shared)).items()
               if problems}
    assert set(failing) == expected, failing


def _broken_copy(case: str, root: Path, shared: Path | None = None) -> Feedstock:
    path, edit, _ = BROKEN[case]
    for name in ("recipe", ".ci_support", "config"):
        shutil.copytree(REPO / name, root / name)
    shutil.copy2(REPO / checks.CONDA_FORGE_YML, root / checks.CONDA_FORGE_YML)
    original = (root / path).read_text()
    (root / path).write_text(edit(original))
    assert case == "unchanged" or (root / path).read_text() != original, "the edit changed nothing"
    return Feedstock(root, shared)


def test_a_cpu_output_given_the_cuda_compiler_requires_cuda_on_every_platform(tmp_path: Path) -> None:
    # what compiler('cuda') renders to differs by platform: cuda-nvcc_linux-64, cuda_osx-arm64, ...
    broken = _broken_copy("CPU output compiled with nvcc", tmp_path)
    problems = checks.check_cpu_outputs_never_require_cuda(broken)
    platforms = {b.platform for b in broken.built if b.name == "onnxruntime-cpp"}
    assert {p for p in platforms if any(f"onnxruntime-cpp ({p}) build requires" in s for s in problems)} == platforms
