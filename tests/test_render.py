"""The generator: determinism, --check, the bot's edits, bad input, speed."""

from __future__ import annotations

import hashlib
import shutil
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest
import yaml

from conftest import FLOOR_CORE_VERSION, REPO

SEED_SHA = "f6681ecbddf53898adf0cc9e8e9e84657485b84d2eca3c8aa353de6d7dd417ef"
# the sha256 of ONNX Runtime's v1.31.0 tag tarball, a real next release for a bot-style bump
NEXT_SHA = "a7e84230b5d509e48fbd6b73c2453a56345ccb22da34a46dac1f0cb4a2d6507b"


def render(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(root / "scripts" / "render.py"), *args],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)


def snapshot(root: Path) -> dict[str, str]:
    """Every file of the tree (outside scripts/) with its hash: what 'untouched' means."""
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and "scripts" not in p.parts}


def test_committed_tree_is_current() -> None:
    result = render(REPO, "--check")
    assert (result.returncode, result.stdout) == (0, ""), result.stdout + result.stderr


def test_two_renders_give_identical_bytes(feedstock: Path) -> None:
    first = render(feedstock)
    assert first.returncode == 0, first.stderr
    after_first = snapshot(feedstock)
    second = render(feedstock)
    assert second.returncode == 0 and second.stdout == ""
    assert snapshot(feedstock) == after_first


def test_render_from_nothing_reproduces_the_committed_files(feedstock: Path) -> None:
    for generated in ("recipe.yaml", "variants.yaml"):
        (feedstock / "recipe" / generated).unlink()
    assert render(feedstock).returncode == 0
    committed = snapshot(REPO)
    for path, digest in snapshot(feedstock).items():
        assert committed[path] == digest, path


def test_check_flags_an_edited_variant_file_and_writes_nothing(feedstock: Path) -> None:
    target = feedstock / "recipe" / "variants.yaml"
    target.write_text(target.read_text().replace("16cpu", "8cpu"))
    before = snapshot(feedstock)
    result = render(feedstock, "--check")
    assert result.returncode == 1
    assert "a/recipe/variants.yaml" in result.stdout and "-    then: namespace-profile-8cpu" in result.stdout
    assert "+    then: namespace-profile-16cpu" in result.stdout
    assert snapshot(feedstock) == before


def test_check_flags_a_deleted_recipe_and_writes_nothing(feedstock: Path) -> None:
    (feedstock / "recipe" / "recipe.yaml").unlink()
    before = snapshot(feedstock)
    result = render(feedstock, "--check")
    assert result.returncode == 1
    assert "+++ b/recipe/recipe.yaml" in result.stdout
    assert snapshot(feedstock) == before


def test_a_job_conda_smithy_adds_shows_up_in_the_readme_matrix(feedstock: Path) -> None:
    cpu_job = feedstock / ".ci_support" / "osx_arm64_.yaml"
    shutil.copy2(cpu_job, feedstock / ".ci_support" / "osx_arm64_extra.yaml")
    result = render(feedstock, "--check")
    assert result.returncode == 1 and "+| `osx_arm64_extra` |" in result.stdout, result.stdout


def bot_bump(recipe: Path, version: str, sha256: str) -> None:
    """What the autotick bot does to a v1 recipe: new version and hash, build number back to 0."""
    text = recipe.read_text()
    text = re.sub(r'(?m)^  version: "[^"]+"$', f'  version: "{version}"', text, count=1)
    text = re.sub(r"(?m)^  sha256: [0-9a-f]{64}$", f"  sha256: {sha256}", text, count=1)
    text = re.sub(r"(?m)^  number: \d+$", "  number: 0", text, count=1)
    recipe.write_text(text)


def test_a_bot_version_bump_survives_render(feedstock: Path) -> None:
    recipe = feedstock / "recipe" / "recipe.yaml"
    bot_bump(recipe, "1.31.0", NEXT_SHA)
    assert render(feedstock, "--check").returncode == 1  # the README's matrix names the version
    assert render(feedstock).returncode == 0
    text = recipe.read_text()
    assert 'version: "1.31.0"' in text and f"sha256: {NEXT_SHA}" in text and SEED_SHA not in text
    assert "ONNX Runtime 1.31.0, build 0" in (feedstock / "README.md").read_text()
    assert render(feedstock, "--check").returncode == 0


def test_a_hand_edited_build_number_is_kept(feedstock: Path) -> None:
    recipe = feedstock / "recipe" / "recipe.yaml"
    recipe.write_text(re.sub(r"(?m)^  number: \d+$", "  number: 3", recipe.read_text(), count=1))
    assert render(feedstock).returncode == 0
    assert "\nbuild:\n  number: 3\n" in recipe.read_text()
    assert "ONNX Runtime 1.30.0, build 3" in (feedstock / "README.md").read_text()


CONFIG_ERROR = "error: config/feedstock.yaml: "
BAD_CONFIGS: dict[str, tuple[Callable[[str], str], str]] = {
    "unknown key": (
        lambda t: t.replace("maintainers:", "colour: blue\nmaintainers:"),
        "colour: unknown key (allowed: about, cuda, cudnn, feedstock, license, maintainers, min_core_version, "
        "outputs, platforms, python, runners, source)"),
    "wrong type": (
        lambda t: re.sub(r"(?m)^  nvcc_threads: \d+$", "  nvcc_threads: two", t),
        "cuda.nvcc_threads: expected a whole number, got a string 'two'"),
    "unknown platform": (
        lambda t: t.replace("  osx-arm64:\n", "  osx-arm65:\n"),
        "platforms.osx-arm65: unknown platform (known: linux-64, linux-aarch64, linux-ppc64le, osx-64, osx-arm64, "
        "win-64)"),
    "CUDA version without an arch list": (
        lambda t: re.sub(r"(?m)^        linux-aarch64: \[75-real.*\n", "", t),
        'cuda.versions."13.0".architectures: no architecture list for CUDA platform linux-aarch64'),
    "malformed sha256": (
        lambda t: t.replace(f"sha256: {SEED_SHA}", "sha256: f6681ecbddf5389"),
        "source.seed.sha256: 'f6681ecbddf5389' is not 64 lowercase hex digits"),
    "python below 3.11": (
        lambda t: t.replace('minimum: "3.11"', 'minimum: "3.10"'),
        "python.minimum: 3.10 is below ONNX Runtime's Python floor 3.11"),
    "float version": (
        lambda t: t.replace(f'min_core_version: "{FLOOR_CORE_VERSION}"', "min_core_version: 1.24"),
        "min_core_version: expected a quoted string, got a decimal number 1.24"),
    "unknown cudnn mode": (
        lambda t: t.replace("  as: run", "  as: maybe"),
        "cudnn.as: 'maybe' is not one of run, constraint"),
    "unquoted CUDA version": (
        lambda t: t.replace('    "13.0":\n', "    13.0:\n"),
        "cuda.versions: keys must be quoted strings, got 13.0 (a decimal number)"),
    "runner for an OS nothing builds on": (
        lambda t: t.replace("runners:\n", "runners:\n  freebsd: namespace-profile-16cpu-on-linux-64\n"),
        "runners.freebsd: no platform of this feedstock builds on freebsd (they build on linux, osx, win)"),
    "missing required key": (
        lambda t: t.replace("  plugin:\n    name: onnxruntime-ep-cuda\n", "  plugin:\n"),
        "outputs.plugin.name: required key is missing"),
    "invalid YAML": (
        lambda t: t + "\n  - [unbalanced\n",
        "line {appended}: not valid YAML (expected <block end>, but found '-')"),
}


@pytest.mark.parametrize("case", list(BAD_CONFIGS))
def test_bad_config_gets_one_clear_message_and_an_untouched_tree(feedstock: Path, case: str) -> None:
    edit, message = BAD_CONFIGS[case]
    config = feedstock / "config" / "feedstock.yaml"
    original = config.read_text()
    config.write_text(edit(original))
    message = message.replace("{appended}", str(len(original.splitlines()) + 2))
    (feedstock / "recipe" / "variants.yaml").unlink()  # a render would have to restore it
    before = snapshot(feedstock)
    for args in ((), ("--check",)):
        result = render(feedstock, *args)
        assert (result.returncode, result.stdout, result.stderr) == (2, "", CONFIG_ERROR + message + "\n")
    assert snapshot(feedstock) == before


def test_bot_fields_that_are_malformed_are_named(feedstock: Path) -> None:
    recipe = feedstock / "recipe" / "recipe.yaml"
    recipe.write_text(recipe.read_text().replace(f"sha256: {SEED_SHA}", "sha256: 12zz"))
    result = render(feedstock)
    assert result.returncode == 2
    assert result.stderr == "error: recipe/recipe.yaml: source.sha256: '12zz' is not 64 lowercase hex digits\n"


def test_a_write_failure_leaves_every_file_as_it_was(feedstock: Path) -> None:
    (feedstock / "recipe" / "recipe.yaml").unlink()
    manifests = feedstock / "recipe" / "ep-plugins" / "unix"
    shutil.rmtree(manifests)
    manifests.write_text("a file where a folder should be")
    before = snapshot(feedstock)
    result = render(feedstock)
    assert result.returncode == 2 and "nothing was changed" in result.stderr
    assert snapshot(feedstock) == before
    assert not [p for p in feedstock.rglob(".*") if p.is_file() and p.name.startswith(".recipe")]


@pytest.mark.parametrize("args", [(), ("--check",)])
def test_render_takes_under_a_second(feedstock: Path, args: tuple[str, ...]) -> None:
    timings = []
    for _ in range(5):
        start = time.perf_counter()
        result = render(feedstock, *args)
        timings.append(time.perf_counter() - start)
        assert result.returncode == 0
    assert statistics.median(timings) < 1.0, timings


def test_a_readme_without_its_markers_is_named_and_left_alone(feedstock: Path) -> None:
    readme = feedstock / "README.md"
    readme.write_text(readme.read_text().replace("<!-- end of build matrix -->", ""))
    before = snapshot(feedstock)
    result = render(feedstock)
    assert (result.returncode, result.stderr) == (
        2, "error: README.md: build matrix: its begin and end markers are missing or out of order\n")
    assert snapshot(feedstock) == before


@pytest.mark.parametrize(("mode", "section", "other"), [("run", "run", "run_constraints"),
                                                        ("constraint", "run_constraints", "run")])
def test_the_cudnn_switch_moves_cudnn_between_run_and_run_constraints(
        feedstock: Path, mode: str, section: str, other: str) -> None:
    config = feedstock / "config" / "feedstock.yaml"
    config.write_text(re.sub(r"(?m)^  as: \w+$", f"  as: {mode}", config.read_text()))
    assert render(feedstock).returncode == 0
    recipe = yaml.safe_load((feedstock / "recipe" / "recipe.yaml").read_text())
    plugin = recipe["outputs"][0]["requirements"]
    assert "cudnn 9.*" in plugin[section]
    assert not [spec for spec in plugin[other] if isinstance(spec, str) and spec.startswith("cudnn")]


def test_a_job_file_without_its_platform_is_named_and_nothing_is_written(feedstock: Path) -> None:
    job = feedstock / ".ci_support" / "osx_arm64_.yaml"
    job.write_text(re.sub(r"(?m)^target_platform:\n- osx-arm64\n", "", job.read_text()))
    (feedstock / "recipe" / "variants.yaml").unlink()  # a render would have to restore it
    before = snapshot(feedstock)
    result = render(feedstock)
    assert (result.returncode, result.stderr) == (
        2, "error: .ci_support/osx_arm64_.yaml: target_platform: required key is missing\n")
    assert snapshot(feedstock) == before
