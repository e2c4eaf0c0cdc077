"""The real conda-smithy on this feedstock: its lints, its rerender, and what it wrote into .ci_support/.

conda-smithy owns `.ci_support/` and the CI files. They are committed as its offline rerender writes
them, and these tests rerender a copy of the tree to show that nothing would change.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CONFIG, OSX_CPU_JOB, REPO
from feedstock.ci_support import load_jobs
from support.clean_clone import clean_copy, git
from support.smithy import MAINTAINER_CHECK, Smithy
from support.yaml_files import read_yaml

CI_SUPPORT = REPO / ".ci_support"


def _python_lists(root: Path) -> dict[str, list[str]]:
    return {p.name: read_yaml(p).get("python", [])
            for p in sorted((root / ".ci_support").glob("*.yaml"))}


def _say(capsys: pytest.CaptureFixture[str], line: str) -> None:
    with capsys.disabled():
        print(f"\n{line}")


def test_recipe_lint_reports_no_lints_and_no_hints(conda_smithy: Smithy, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    root = clean_copy(tmp_path)
    result = conda_smithy.run("recipe-lint", "--conda-forge", "recipe", cwd=root)
    _say(capsys, MAINTAINER_CHECK)
    assert (result.returncode, result.stdout.strip()) == (0, "recipe is in fine form"), result.stdout + result.stderr
    # the maintainer check was asked, once per maintainer, and answered here
    assert result.stderr.count("answered 200 without asking") == len(CONFIG.maintainers), result.stderr


def test_recipe_lint_reports_a_source_without_its_hash(conda_smithy: Smithy, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    root = clean_copy(tmp_path)
    recipe = root / "recipe" / "recipe.yaml"
    recipe.write_text("\n".join(line for line in recipe.read_text().splitlines() if not line.startswith("  sha256:"))
                      + "\n")
    result = conda_smithy.run("recipe-lint", "--conda-forge", "recipe", cwd=root)
    _say(capsys, MAINTAINER_CHECK)
    assert result.returncode == 1 and "recipe has some lint" in result.stdout, result.stdout + result.stderr
    assert "sha256" in result.stdout


def test_rerender_of_the_committed_tree_changes_nothing(conda_smithy: Smithy, tmp_path: Path) -> None:
    root = clean_copy(tmp_path)
    result = conda_smithy.rerender(root)
    assert result.returncode == 0, result.stderr[-4000:]
    assert git(root, "status", "--porcelain", "--untracked-files=all") == ""


def test_deleting_a_migration_removes_its_python_from_every_job(conda_smithy: Smithy, tmp_path: Path) -> None:
    migration = read_yaml(CI_SUPPORT / "migrations" / "python314.yaml")
    added = migration["python"][0]
    assert {name for name, pythons in _python_lists(REPO).items() if added in pythons} == set(_python_lists(REPO))
    root = clean_copy(tmp_path)
    (root / ".ci_support" / "migrations" / "python314.yaml").unlink()
    result = conda_smithy.rerender(root)
    assert result.returncode == 0, result.stderr[-4000:]
    pythons = _python_lists(root)
    assert set(pythons) == set(_python_lists(REPO))
    assert {name for name, values in pythons.items() if added in values} == set()


def _build_system(ci: dict) -> str:
    """The OS of the machine a job runs on: conda-forge.yml maps cross-compiled targets to it."""
    forge = read_yaml(REPO / "conda-forge.yml")
    target = ci["target_platform"][0].replace("-", "_")
    return (forge.get("build_platform") or {}).get(target, target).split("_")[0]


def test_cuda_jobs_run_on_the_large_runners_of_their_build_machine() -> None:
    cuda_jobs = {p.name: read_yaml(p) for p in sorted(CI_SUPPORT.glob("*.yaml"))
                 if read_yaml(p)["cuda_compiler_version"] != ["None"]}
    assert {ci["target_platform"][0] for ci in cuda_jobs.values()} == set(CONFIG.cuda_platforms), cuda_jobs
    labels = {name: (ci.get("github_actions_labels"), CONFIG.runners[_build_system(ci)])
              for name, ci in cuda_jobs.items()}
    assert {name: got for name, (got, _) in labels.items()} == {name: [want] for name, (_, want) in labels.items()}


def test_jobs_on_an_os_without_a_runner_stay_on_the_hosted_runners() -> None:
    hosted = {p.name: read_yaml(p) for p in sorted(CI_SUPPORT.glob("*.yaml"))}
    hosted = {name: ci for name, ci in hosted.items() if _build_system(ci) not in CONFIG.runners}
    assert hosted, "every OS has a large runner: nothing to check"
    assert {name: ci.get("github_actions_labels") for name, ci in hosted.items()} == {name: None for name in hosted}


@pytest.mark.parametrize("folder", ["scripts", "config", "tests", ".ci", "recipe", ".ci_support"])
def test_gitignore_hides_nothing_in_the_feedstocks_own_folders(folder: str) -> None:
    probe = f"{folder}/any_file.py"
    result = subprocess.run(["git", "check-ignore", "--no-index", "--quiet", probe], cwd=REPO,
                            stdin=subprocess.DEVNULL)
    # exit 1: not ignored; 0 would mean ignored
    assert result.returncode == 1, probe


def test_the_rattler_build_given_to_conda_smithy_renders_but_never_builds(conda_smithy: Smithy) -> None:
    program = str(conda_smithy.bin / "rattler-build")
    build = subprocess.run([program, "build", "--recipe", "recipe"], cwd=REPO, capture_output=True, text=True,
                           timeout=60, stdin=subprocess.DEVNULL)
    assert (build.returncode, build.stdout) == (2, ""), build.stderr
    assert "only renders" in build.stderr
    render = subprocess.run([program, "build", "--render-only", "--recipe", "recipe", "--target-platform", "osx-arm64",
                             "--build-platform", "osx-arm64", "-m", OSX_CPU_JOB],
                            cwd=REPO, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert render.returncode == 0, render.stderr
    assert {item["recipe"]["package"]["name"] for item in json.loads(render.stdout)} == {
        CONFIG.outputs.cpp.name, CONFIG.outputs.python.name}


def test_a_free_threaded_python_migration_is_built_and_shown_as_such(conda_smithy: Smithy, tmp_path: Path) -> None:
    """Upstream publishes free-threaded wheels (onnxruntime 1.30.0 has a cp314t one on PyPI), so the
    recipe builds conda-forge's free-threaded Python too, and the README's matrix names it 3.14t."""
    from rattler_render import render

    root = clean_copy(tmp_path)
    shutil.copy2(conda_smithy.pinning.parent / "share" / "conda-forge" / "migrations" / "python314t.yaml",
                 root / ".ci_support" / "migrations" / "python314t.yaml")
    result = conda_smithy.rerender(root)
    assert result.returncode == 0, result.stderr[-4000:]
    cpu_job_names = {f"{job.name}.yaml" for job in load_jobs(root) if job.cuda_version is None}
    cpu_jobs = {name: pythons for name, pythons in _python_lists(root).items() if name in cpu_job_names}
    # two CPU jobs per platform (vectorized and -novec), each offering the free-threaded Python
    assert len(cpu_jobs) == 2 * len(CONFIG.platforms) and all("3.14.* *_cp314t" in pythons
                                                              for pythons in cpu_jobs.values()), cpu_jobs
    rendered = subprocess.run([sys.executable, str(root / "scripts" / "render.py")], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=120)
    assert rendered.returncode == 0, rendered.stderr
    readme = (root / "README.md").read_text()
    python_cells = re.findall(r"(?m)^\| `[^`]+` \| `onnxruntime(-novec)?-cpp`, `onnxruntime(?:-novec)?` \| — \| — \| "
                              r"([^|]+) \|$", readme)
    python_cells = [cell for _, cell in python_cells]
    assert len(python_cells) == len(cpu_jobs), python_cells
    assert all("3.14t" in cell.split(", ") for cell in python_cells), python_cells
    builds_before = int(re.search(r"\((\d+) Python builds in all;", (REPO / "README.md").read_text()).group(1))
    assert f"({builds_before + len(cpu_jobs)} Python builds in all;" in readme
    variants = read_yaml(root / OSX_CPU_JOB)
    packages = [r for r in render(root / "recipe" / "recipe.yaml", variants, "osx-arm64", "osx-arm64")
                if r.name == CONFIG.outputs.python.name]
    assert sorted(r.used_variant["python"] for r in packages) == sorted(
        p for p in variants["python"] if not p.startswith("3.10"))
