"""The recipe against conda-forge's v1 lints, and its evaluated variants against the generator's matrix.

Each lint is a plain function in `support/recipe_checks.py`; the tests here run each one on the real
feedstock, then run all of them on broken copies to show each mistake trips exactly its checks.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from support import rattler_render
from support import recipe_checks as checks
from support.recipe_checks import Feedstock, Render, run_checks
from support.recipe_eval import HASH, RenderedOutput, expand_variants

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
CI_NAMES = sorted(p.stem for p in (REPO / ".ci_support").glob("*.yaml"))


@pytest.fixture(scope="module")
def real() -> Feedstock:
    return Feedstock(REPO, SHARED if SHARED.is_dir() else None)


def _rendered(real: Feedstock, platform: str, cuda: str, python: str = "3.12.* *_cpython") -> Render:
    """The first rendered .ci_support variant for that platform, CUDA version and Python."""
    return next(r for r in real.renders if r.platform == platform and r.variant.get("python") == python
                and r.variant.get("cuda_compiler_version") == cuda)


def _output(render: Render, name: str) -> RenderedOutput:
    return next(o for o in render.outputs if o.name == name)


# The helper itself: rattler-build's functions, as conda-forge's packages are named.

def test_compilers_render_as_conda_forge_package_names(real: Feedstock) -> None:
    linux = _rendered(real, "linux-64", "12.9")
    v = linux.variant
    assert _output(linux, "onnxruntime-ep-cuda").requirements["build"][:4] == [
        f"gcc_linux-64 {v['c_compiler_version']}", f"sysroot_linux-64 {v['c_stdlib_version']}",
        f"gxx_linux-64 {v['cxx_compiler_version']}", "cuda-nvcc_linux-64 12.9"]
    win = _rendered(real, "win-64", "12.9")
    assert _output(win, "onnxruntime-ep-cuda").requirements["build"][:4] == [
        "vs2022_win-64", "vs_win-64", "vs2022_win-64", "cuda-nvcc_win-64 12.9"]


def test_linux_aarch64_is_cross_compiled_from_linux_64(real: Feedstock) -> None:
    aarch64 = _output(_rendered(real, "linux-aarch64", "None"), "onnxruntime").requirements["build"]
    x86_64 = _output(_rendered(real, "linux-64", "None"), "onnxruntime").requirements["build"]
    assert "cross-python_linux-aarch64" in aarch64
    assert any(spec.startswith("gcc_linux-aarch64 ") for spec in aarch64)
    assert not any(spec.startswith("cross-python") for spec in x86_64)


def test_build_strings_and_pins_carry_the_variant_and_the_version(real: Feedstock) -> None:
    osx = _rendered(real, "osx-arm64", "None", python="3.13.* *_cp313")
    major, minor, patch = real.recipe["context"]["version"].split(".")
    number = real.recipe["build"]["number"]
    assert _output(osx, "onnxruntime").build_string == f"py313h{HASH}_{number}_cpu"
    assert _output(osx, "onnxruntime-cpp").requirements["run_exports"] == [
        f"onnxruntime-cpp >={major}.{minor}.{patch},<{major}.{minor}.{int(patch) + 1}.0a0"]
    assert _output(_rendered(real, "win-64", "13.0"), "onnxruntime-ep-cuda").build_string == f"h{HASH}_{number}_cuda130"


def test_variants_expand_zipped_keys_together() -> None:
    config = {"a": ["1", "2"], "b": ["x", "y"], "c": ["p", "q"], "zip_keys": [["a", "b"]], "pin_run_as_build": {}}
    assert expand_variants(config) == [{"a": "1", "b": "x", "c": "p"}, {"a": "1", "b": "x", "c": "q"},
                                       {"a": "2", "b": "y", "c": "p"}, {"a": "2", "b": "y", "c": "q"}]


# Schemas: what rattler-build and conda-smithy parse, offline.

def test_recipe_validates_against_the_recipe_format_schema(real: Feedstock, shared: Path) -> None:
    assert checks.check_recipe_matches_schema(real) == []


def test_conda_forge_yml_validates_against_its_schema_with_the_bot_schema(real: Feedstock, shared: Path) -> None:
    assert checks.check_conda_forge_yml_matches_schema(real) == []


def test_conda_forge_yml_builds_with_rattler_build_and_keeps_the_readme(real: Feedstock) -> None:
    assert checks.check_conda_forge_yml_has_the_settings_the_feedstock_relies_on(real) == []


# conda-smithy's lints for v1 recipes.

def test_recipe_is_schema_version_1(real: Feedstock) -> None:
    assert checks.check_schema_version_is_1(real) == []


def test_top_level_keys_are_the_multi_output_ones_in_conda_forge_order(real: Feedstock) -> None:
    assert checks.check_top_level_keys_are_known_and_in_order(real) == []


def test_about_and_every_output_name_their_license_and_its_files(real: Feedstock) -> None:
    assert checks.check_about_has_homepage_license_summary_and_license_files(real) == []


def test_every_license_is_an_spdx_expression(real: Feedstock) -> None:
    assert checks.check_license_is_an_spdx_expression(real) == []


def test_no_license_spells_out_the_word_license(real: Feedstock) -> None:
    assert checks.check_license_does_not_say_license(real) == []


def test_recipe_maintainers_are_a_non_empty_list(real: Feedstock) -> None:
    assert checks.check_recipe_maintainers_are_listed(real) == []


def test_build_number_is_set_where_the_bot_resets_it(real: Feedstock) -> None:
    assert checks.check_build_number_is_present(real) == []


def test_requirements_read_build_then_host_then_run(real: Feedstock) -> None:
    assert checks.check_requirements_are_in_build_host_run_order(real) == []


def test_every_url_source_is_pinned_by_sha256(real: Feedstock) -> None:
    assert checks.check_every_url_source_has_a_sha256(real) == []


def test_no_selector_hides_in_a_comment(real: Feedstock) -> None:
    assert checks.check_no_comment_selectors(real) == []


def test_every_compiler_has_stdlib_in_the_same_output(real: Feedstock) -> None:
    assert checks.check_every_compiler_has_stdlib_in_the_same_output(real) == []


def test_outputs_of_this_recipe_are_pinned_with_pin_subpackage(real: Feedstock) -> None:
    assert checks.check_own_outputs_are_pinned_with_pin_subpackage(real) == []


def test_every_output_is_tested_on_every_platform_it_builds_for(real: Feedstock) -> None:
    assert checks.check_every_output_has_tests(real) == []


def test_python_in_host_is_also_in_run_unpinned(real: Feedstock) -> None:
    assert checks.check_python_in_host_is_in_run_unpinned(real) == []


def test_recipe_ends_with_exactly_one_newline(real: Feedstock) -> None:
    assert checks.check_recipe_ends_with_exactly_one_newline(real) == []


def test_no_yaml_file_repeats_a_key(real: Feedstock) -> None:
    assert checks.check_no_duplicate_keys(real) == []


def test_no_value_is_a_float_that_should_be_a_version_string(real: Feedstock) -> None:
    assert checks.check_no_floats(real) == []


def test_ci_support_variant_files_exist(real: Feedstock) -> None:
    assert checks.check_ci_support_files_exist(real) == []


# The recipe, evaluated per variant, against the generator's matrix.

def test_recipe_skips_each_output_where_the_generator_says(real: Feedstock) -> None:
    assert checks.check_skip_rules_match_the_generator(real) == []


def test_keys_each_output_reads_are_the_generators_used_keys(real: Feedstock) -> None:
    assert checks.check_used_keys_match_the_generator(real) == []


def test_ci_support_files_are_named_and_split_as_conda_smithy_would(real: Feedstock) -> None:
    assert checks.check_ci_support_names_follow_the_split_keys(real) == []


def test_ci_support_files_hold_every_key_an_output_reads_and_no_other(real: Feedstock) -> None:
    assert checks.check_ci_support_files_hold_the_keys_outputs_read(real) == []


def test_no_output_is_skipped_in_every_config(real: Feedstock) -> None:
    assert checks.check_no_output_is_skipped_everywhere(real) == []


def test_every_config_builds_at_least_one_output(real: Feedstock) -> None:
    assert checks.check_every_config_builds_an_output(real) == []


def test_cpu_outputs_never_require_cuda(real: Feedstock) -> None:
    assert checks.check_cpu_outputs_never_require_cuda(real) == []


def test_every_lint_cited_is_a_current_conda_smithy_lint(shared: Path) -> None:
    messages = json.loads((shared / "schemas/conda-smithy-linter-messages.json").read_text())["messages"]
    current = {m["identifier"] for m in messages if not m.get("deprecated_in")}
    cited = {lint for ids in checks.LINT_IDS.values() for lint in ids}
    assert cited - current == set()


def test_every_check_has_its_own_test() -> None:
    source = Path(__file__).read_text()
    assert [name for name in checks.CHECKS if f"checks.{name}(real)" not in source] == []


# Broken copies: each mistake trips exactly the checks written for it.

Edit = Callable[[str], str]


def _replace(old: str, new: str, after: str = "") -> Edit:
    """Replace the first `old` that follows `after`."""
    def edit(text: str) -> str:
        at = text.index(old, text.index(after) if after else 0)
        return text[:at] + new + text[at + len(old):]
    return edit


def _set_bot_automerge(text: str, value: str) -> str:
    if re.search(r"^bot:", text, re.M):
        return re.sub(r"^bot:\n", f"bot:\n  automerge: {value}\n", text, count=1, flags=re.M)
    return text + f"bot:\n  automerge: {value}\n"


CPP = "name: onnxruntime-cpp"
PLUGIN = "name: onnxruntime-ep-cuda"
MATRIX_FOLLOWS_STDLIB = {"check_used_keys_match_the_generator", "check_ci_support_names_follow_the_split_keys"}
BROKEN: dict[str, tuple[str, Edit, set[str]]] = {
    "unchanged": (checks.RECIPE, lambda text: text, set()),
    "unknown key in an output": (
        checks.RECIPE, _replace("      script:\n", "      script_env: {}\n      script:\n", after=CPP),
        {"check_recipe_matches_schema"}),
    "package at the top of a multi-output recipe": (
        checks.RECIPE, _replace("\nsource:", "\npackage:\n  name: onnxruntime-split\n\nsource:"),
        {"check_recipe_matches_schema", "check_top_level_keys_are_known_and_in_order"}),
    # `version: 1.30` is what an unquoted bump looks like
    "float version": (
        checks.RECIPE, lambda text: re.sub(r'\n  version: "(\d+\.\d+)[.\d]*"', r"\n  version: \1", text, count=1),
        {"check_no_floats"}),
    "missing sha256": (checks.RECIPE, lambda text: re.sub(r"\n  sha256: \w+", "", text, count=1),
                       {"check_every_url_source_has_a_sha256"}),
    # its test requirements still read stdlib("c"), so the matrix does not move
    "compiler without stdlib": (
        checks.RECIPE, _replace('        - ${{ stdlib("c") }}\n', "", after=CPP),
        {"check_every_compiler_has_stdlib_in_the_same_output"}),
    # the plugin then no longer reads c_stdlib_version, so conda-smithy would stop splitting on it
    "compiler without stdlib in the plugin": (
        checks.RECIPE, _replace('        - ${{ stdlib("c") }}\n', "", after=PLUGIN),
        {"check_every_compiler_has_stdlib_in_the_same_output", *MATRIX_FOLLOWS_STDLIB}),
    "non-SPDX license": (checks.RECIPE, _replace("\n  license: MIT AND Apache-2.0", "\n  license: MIT AND Apache 2.0"),
                         {"check_license_is_an_spdx_expression"}),
    "license that says License": (
        checks.RECIPE, _replace("\n  license: MIT AND", "\n  license: MIT License AND"),
        {"check_license_is_an_spdx_expression", "check_license_does_not_say_license"}),
    "CPU output requiring a CUDA package": (
        checks.RECIPE,
        _replace("      run_exports:", "      host:\n        - libcublas-dev\n      run_exports:", after=CPP),
        {"check_cpu_outputs_never_require_cuda"}),
    # a stale CUDA version list: the plugin never builds, the CUDA jobs build nothing, the matrix shrinks
    "plugin skipped everywhere": (
        checks.RECIPE, _replace('- cuda_compiler_version == "None"', '- cuda_compiler_version not in ["12.8", "13.1"]'),
        {"check_no_output_is_skipped_everywhere", "check_every_config_builds_an_output",
         "check_skip_rules_match_the_generator", "check_ci_support_names_follow_the_split_keys",
         "check_ci_support_files_hold_the_keys_outputs_read"}),
    "duplicate key": (checks.RECIPE, lambda text: re.sub(r"\nbuild:\n(  number: .*\n)", r"\nbuild:\n\1\1", text),
                      {"check_no_duplicate_keys"}),
    "two trailing newlines": (checks.RECIPE, lambda text: text + "\n", {"check_recipe_ends_with_exactly_one_newline"}),
    "comment selector": (checks.RECIPE, _replace("        - ninja\n", "        - ninja  # [unix]\n"),
                         {"check_no_comment_selectors"}),
    "host before build": (
        checks.RECIPE, _replace("    requirements:\n", "    requirements:\n      host:\n        - zlib\n", after=CPP),
        {"check_requirements_are_in_build_host_run_order"}),
    "python pinned in run": (
        checks.RECIPE,
        _replace("      run:\n        - python\n", "      run:\n        - python >=3.11\n", after="name: onnxruntime\n"),
        {"check_python_in_host_is_in_run_unpinned"}),
    "pin_compatible on an output of this recipe": (
        checks.RECIPE, _replace("pin_subpackage(", "pin_compatible("),
        {"check_own_outputs_are_pinned_with_pin_subpackage"}),
    "no top-level license files": (
        checks.RECIPE, lambda text: re.sub(r"\n  license_file:\n(    - .*\n)+", "\n", text),
        {"check_about_has_homepage_license_summary_and_license_files"}),
    "no maintainers": (
        checks.RECIPE, lambda text: re.sub(r"recipe-maintainers:\n(    - .*\n)+", "recipe-maintainers: []\n", text),
        {"check_recipe_maintainers_are_listed"}),
    # only the bot schema, registered offline, knows what `bot:` may hold
    "bot setting of the wrong type": (checks.CONDA_FORGE_YML, lambda text: _set_bot_automerge(text, "'yes'"),
                                      {"check_conda_forge_yml_matches_schema"}),
}


@pytest.mark.parametrize("case", BROKEN)
def test_a_broken_copy_fails_exactly_the_checks_written_for_it(case: str, tmp_path: Path) -> None:
    path, edit, expected = BROKEN[case]
    shared = SHARED if SHARED.is_dir() else None
    if shared is None:  # the other checks still run; the schema checks need ../shared
        if expected and expected <= checks.NEEDS_SHARED:
            pytest.skip(f"{SHARED} is not here: only the schema checks catch this")
        expected = expected - checks.NEEDS_SHARED
    for name in ("recipe", ".ci_support", "config"):
        shutil.copytree(REPO / name, tmp_path / name)
    shutil.copy2(REPO / checks.CONDA_FORGE_YML, tmp_path / checks.CONDA_FORGE_YML)
    original = (tmp_path / path).read_text()
    (tmp_path / path).write_text(edit(original))
    assert case == "unchanged" or (tmp_path / path).read_text() != original, "the edit changed nothing"
    failing = {name: problems for name, problems in run_checks(Feedstock(tmp_path, shared)).items() if problems}
    assert set(failing) == expected, failing


# The real tools, where this machine has them.

# Keys rattler-build reports for every output, which conda-smithy keeps in every file regardless.
ALWAYS_THERE = {"target_platform", "build_platform", "host_platform", "channel_sources", "channel_targets",
                "MACOSX_DEPLOYMENT_TARGET", "MACOSX_SDK_VERSION", "macos_machine", "docker_image"}


def _variant_key(variant: dict[str, str], keys: set[str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, str(variant[k])) for k in keys - ALWAYS_THERE))


def _rattler_build_renders(real: Feedstock, ci_name: str, tmp_path: Path) -> list[tuple[str, str, dict[str, str]]]:
    """(package, build string, variant) of every output rattler-build builds for one .ci_support file.

    The `rattler-build` command where this machine has it, else the same engine through its Python
    bindings (py-rattler-build, installed with the test requirements)."""
    config = real.ci_support[ci_name]
    platform = config["target_platform"][0]
    if shutil.which("rattler-build") is None:
        return [(r.name, r.build_string, r.used_variant) for r in rattler_render.render(
            REPO / "recipe" / "recipe.yaml", config, platform, real.build_platform(platform))]
    result = subprocess.run(
        ["rattler-build", "build", "--render-only", "-m", f".ci_support/{ci_name}.yaml", "--recipe", "recipe",
         "--target-platform", platform, "--build-platform", real.build_platform(platform),
         "--output-dir", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    rendered = []
    for item in json.loads(result.stdout):
        skip = item["recipe"].get("build", {}).get("skip")
        if skip is True or (isinstance(skip, list) and any(skip)):
            continue
        rendered.append((item["recipe"]["package"]["name"], item["recipe"]["build"]["string"],
                         item["build_configuration"]["variant"]))
    return rendered


@pytest.mark.parametrize("ci_name", CI_NAMES)
def test_rattler_build_renders_what_the_helper_evaluates(ci_name: str, real: Feedstock, tmp_path: Path) -> None:
    config = real.ci_support[ci_name]
    theirs = {(name, re.sub(r"h[0-9a-f]{7}", f"h{HASH}", string), _variant_key(variant, set(variant) & set(config)))
              for name, string, variant in _rattler_build_renders(real, ci_name, tmp_path)}
    ours = {(o.name, o.build_string, _variant_key(r.variant, set(o.used_keys) & set(config)))
            for r, o in real.built() if r.source == ci_name}
    assert theirs == ours


def test_file_names_follow_from_what_rattler_build_says_each_output_reads(real: Feedstock) -> None:
    """conda-smithy's collapse, fed by rattler-build's own render of every variant the pinning offers."""
    names = set()
    for platform in real.platforms:
        pinning = real.pinning(platform)
        lists = {k: v for k, v in pinning.items() if isinstance(v, list) and k != "zip_keys"}
        groups = [[k for k in group if k in lists] for group in pinning["zip_keys"]]
        variants = {**lists, "zip_keys": [g for g in groups if len(g) > 1]}
        rendered = rattler_render.render(REPO / "recipe" / "recipe.yaml", variants, platform,
                                         real.build_platform(platform))
        loop_keys = {k for k, values in lists.items() if len(values) > 1}
        split = set.intersection(*(set(r.used_variant) & loop_keys for r in rendered))
        for r in rendered:
            key = "".join(k + r.used_variant[k] for k in sorted(split))
            name = platform.replace("-", "_") + "_" + key.replace("*", "_").replace(" ", "_")
            names.add(re.sub(r'[<>:?*,"/|\\]', "", name))
    assert names == set(CI_NAMES)


@pytest.mark.skipif(shutil.which("conda-smithy") is None, reason="conda-smithy is not on PATH")
def test_conda_smithy_recipe_lint_passes() -> None:
    # recipe-lint takes the recipe directory and reads conda-forge.yml beside it; --conda-forge would ask
    # GitHub whether the maintainers exist
    result = subprocess.run(["conda-smithy", "recipe-lint", "recipe"], cwd=REPO, capture_output=True, text=True,
                            timeout=300, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stdout + result.stderr

