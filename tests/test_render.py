"""The generator: determinism, --check, the bot's edits, hand edits, bad input, its bootstrap, what it runs."""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import bootstrap
import pytest

from conftest import CONFIG, FLOOR_CORE_VERSION, OSX_CPU_JOB, REPO
from feedstock.architectures import NVCC_ARCHITECTURES
from feedstock.builds import what_each_job_builds
from feedstock.ci_support import load_jobs
from feedstock.cuda_targets import ort_cuda_architectures
from feedstock.files import TEMPORARY_SUFFIX
from feedstock.inputs import build_platforms, load_config
from feedstock.reader import parse_yaml, version_tuple
from rattler_render import render as rattler_render
from standins.sources import MIRROR_VARIABLE
from support.config_edits import drop_cuda_version, drop_win_64
from support.tree import snapshot
from support.yaml_files import read_yaml

RECIPE = "recipe/recipe.yaml"


def release(root: Path) -> tuple[str, str, int]:
    """The version, sha256 and build number a tree's recipe holds, where the bot edits them."""
    recipe = parse_yaml((root / RECIPE).read_text(), RECIPE)
    return recipe["context"]["version"], recipe["source"]["sha256"], recipe["build"]["number"]


def next_release(root: Path) -> tuple[str, str]:
    """A version after the committed one and a made-up sha256 for it: what a bot bump brings."""
    major, minor, _ = release(root)[0].split(".")
    version = f"{major}.{int(minor) + 1}.0"
    return version, hashlib.sha256(f"onnxruntime-{version}.tar.gz".encode()).hexdigest()


def render(root: Path, *args: str, python: tuple[str, ...] = (sys.executable,),
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*python, str(root / "scripts" / "render.py"), *args],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120, env=env)


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


def test_render_restores_deleted_generated_files_byte_for_byte(feedstock: Path) -> None:
    shutil.rmtree(feedstock / "recipe" / "ep-plugins")
    (feedstock / "recipe" / "variants.yaml").unlink()
    assert render(feedstock).returncode == 0
    for path, digest in snapshot(feedstock).items():
        assert hashlib.sha256((REPO / path).read_bytes()).hexdigest() == digest, path


def test_check_flags_an_edited_variant_file_and_writes_nothing(feedstock: Path) -> None:
    target = feedstock / "recipe" / "variants.yaml"
    target.write_text(target.read_text().replace("16cpu", "8cpu"))
    before = snapshot(feedstock)
    result = render(feedstock, "--check")
    assert result.returncode == 1
    assert "a/recipe/variants.yaml" in result.stdout and "-    then: namespace-profile-8cpu" in result.stdout
    assert "+    then: namespace-profile-16cpu" in result.stdout
    assert snapshot(feedstock) == before


@pytest.mark.parametrize("args", [(), ("--check",)])
def test_a_deleted_recipe_is_an_error_not_a_reseed(feedstock: Path, args: tuple[str, ...]) -> None:
    (feedstock / RECIPE).unlink()
    before = snapshot(feedstock)
    result = render(feedstock, *args)
    assert (result.returncode, result.stdout, result.stderr) == (2, "", (
        "recipe/recipe.yaml: (file): not found; it holds context.version, source.sha256 and build.number, which a "
        "render keeps: restore it with `git checkout -- recipe/recipe.yaml`\n"))
    assert snapshot(feedstock) == before


def test_a_job_conda_smithy_adds_shows_up_in_the_readme_matrix(feedstock: Path) -> None:
    cpu_job = feedstock / OSX_CPU_JOB
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
    version, sha256 = next_release(REPO)
    bot_bump(feedstock / RECIPE, version, sha256)
    before = snapshot(feedstock)
    result = render(feedstock)
    assert (result.returncode, result.stdout) == (0, "")
    assert release(feedstock) == (version, sha256, 0)
    assert snapshot(feedstock) == before


def test_a_bot_version_bump_leaves_check_green(feedstock: Path) -> None:
    """conda-forge's CI never runs a render: nothing generated may depend on what the bot changes."""
    bot_bump(feedstock / RECIPE, *next_release(REPO))
    result = render(feedstock, "--check")
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_a_bot_bump_beside_a_config_change_is_not_taken_for_a_hand_edit(feedstock: Path) -> None:
    version, sha256 = next_release(REPO)
    bot_bump(feedstock / RECIPE, version, sha256)
    config = feedstock / "config" / "feedstock.yaml"
    config.write_text(re.sub(r"(?m)^  as: \w+$", "  as: constraint", config.read_text()))
    result = render(feedstock)
    assert result.returncode == 0, result.stderr
    assert "wrote recipe/recipe.yaml" in result.stdout.splitlines()
    assert release(feedstock) == (version, sha256, 0)


def test_a_hand_edited_build_number_is_kept_and_check_stays_green(feedstock: Path) -> None:
    version, sha256, number = release(REPO)
    recipe = feedstock / RECIPE
    recipe.write_text(re.sub(r"(?m)^  number: \d+$", f"  number: {number + 3}", recipe.read_text(), count=1))
    assert render(feedstock, "--check").returncode == 0
    assert render(feedstock).returncode == 0
    assert release(feedstock) == (version, sha256, number + 3)


def add_host_dependency(recipe: Path) -> str:
    """Add a dependency to the plugin's host requirements by hand; answer its dotted key."""
    text = recipe.read_text()
    assert text.count("\n        - libcufft-dev\n") == 1
    recipe.write_text(text.replace("\n        - libcufft-dev\n", "\n        - libcufft-dev\n        - libcurand-dev\n"))
    outputs = parse_yaml(text, RECIPE)["outputs"]
    index = next(i for i, output in enumerate(outputs) if "libcufft-dev" in output["requirements"]["host"])
    return f"outputs[{index}].requirements.host[{outputs[index]['requirements']['host'].index('libcufft-dev') + 1}]"


HAND_EDIT_REFUSED = (
    "recipe/recipe.yaml: (file): edited by hand since it was rendered, so nothing was written (the diff shows what "
    "would be lost): make the edit in config/feedstock.yaml or scripts/feedstock/templates/recipe.yaml.j2, or drop "
    "it with `python3 scripts/render.py --force`\n")


def test_a_hand_added_dependency_is_refused_with_the_diff_of_what_would_be_lost(feedstock: Path) -> None:
    key = add_host_dependency(feedstock / RECIPE)
    before = snapshot(feedstock)
    result = render(feedstock)
    assert (result.returncode, result.stderr) == (
        2, f"recipe/recipe.yaml: {key}: edited by hand, and a render would change it\n" + HAND_EDIT_REFUSED)
    assert "\n-        - libcurand-dev\n" in result.stdout
    assert snapshot(feedstock) == before


def test_a_hand_edit_is_refused_even_beside_a_config_change(feedstock: Path) -> None:
    add_host_dependency(feedstock / RECIPE)
    config = feedstock / "config" / "feedstock.yaml"
    config.write_text(re.sub(r"(?m)^  as: \w+$", "  as: constraint", config.read_text()))
    before = snapshot(feedstock)
    result = render(feedstock)
    assert result.returncode == 2 and result.stderr.endswith(HAND_EDIT_REFUSED)
    assert snapshot(feedstock) == before


def test_force_overwrites_a_hand_edit(feedstock: Path) -> None:
    add_host_dependency(feedstock / RECIPE)
    assert render(feedstock, "--force").returncode == 0
    assert (feedstock / RECIPE).read_bytes() == (REPO / RECIPE).read_bytes()


def test_check_reports_a_hand_edit_as_stale(feedstock: Path) -> None:
    add_host_dependency(feedstock / RECIPE)
    result = render(feedstock, "--check")
    assert result.returncode == 1 and "\n-        - libcurand-dev\n" in result.stdout


CONFIG_ERROR = "config/feedstock.yaml: "
# the newest CUDA version the config lists, whose list the cases below edit
CUDA = max(CONFIG.cuda.versions, key=version_tuple)
ACCEPTED = ", ".join(map(str, NVCC_ARCHITECTURES[CUDA]))
# every Python the .ci_support jobs list (conda-smithy writes the same list into each)
OFFERED = ", ".join(sorted({python for job in load_jobs(REPO) for python in job.pythons}))
# the listed CUDA versions the .ci_support jobs build (the pinning may offer fewer than the config lists)
BUILT_LISTED = sorted({job.cuda_version for job in load_jobs(REPO)} & set(CONFIG.cuda.versions), key=version_tuple)
# the newest CUDA version's linux-64 list, as the config has it today
LINUX_64 = CONFIG.cuda.versions[CUDA].architectures["linux-64"]


def linux_64_list(edit: Callable[[list[str]], list[str]]) -> Callable[[str], str]:
    """A change of the config's text: the newest CUDA version's linux-64 list becomes `edit(list)`."""
    def change(text: str) -> str:
        line = re.compile(rf'(?m)(^    "{re.escape(CUDA)}":\n(?:      .*\n)*?        linux-64: )\[.*\]$')
        entries = ", ".join(f'"{entry}"' if entry.isdigit() else entry for entry in edit(list(LINUX_64)))
        changed, count = line.subn(lambda match: f"{match.group(1)}[{entries}]", text)
        assert count == 1, f"the config has no linux-64 list under CUDA {CUDA}"
        return changed
    return change


def arch_error(index: int, entry: str, problem: str) -> str:
    return f'cuda.versions."{CUDA}".architectures.linux-64[{index}]: \'{entry}\'{problem}'


# the vendored library that the config builds on one platform alone (win-64)
WIL = next(i for i, entry in enumerate(CONFIG.license.vendored) if list(entry.platforms or ()) == ["win-64"])

BAD_CONFIGS: dict[str, tuple[Callable[[str], str], str]] = {
    "unknown key": (
        lambda t: t.replace("maintainers:", "colour: blue\nmaintainers:"),
        "colour: unknown key"),
    "wrong type": (
        lambda t: re.sub(r"(?m)^  nvcc_threads: \d+$", "  nvcc_threads: two", t),
        "cuda.nvcc_threads: Input should be a valid integer, got 'two'"),
    "unknown platform": (
        lambda t: t.replace("\nplatforms:\n", "\nplatforms:\n  linux-s390x:\n", 1),
        "platforms.linux-s390x: as a key: Input should be 'linux-64', 'linux-aarch64', 'linux-ppc64le', 'osx-64', "
        "'osx-arm64' or 'win-64', got 'linux-s390x'"),
    "CUDA version without an arch list": (
        lambda t: re.sub(r"(?m)^        linux-aarch64: \[75-real.*\n", "", t),
        f'cuda.versions."{CUDA}".architectures: no architecture list for CUDA platform linux-aarch64'),
    "python below 3.11": (
        lambda t: t.replace('minimum: "3.11"', 'minimum: "3.10"'),
        "python.minimum: 3.10 is below ONNX Runtime's Python floor 3.11"),
    "float version": (
        lambda t: t.replace(f'min_core_version: "{FLOOR_CORE_VERSION}"', "min_core_version: 1.24"),
        "min_core_version: expected a quoted string, got a decimal number 1.24"),
    "unknown cudnn mode": (
        lambda t: t.replace("  as: run", "  as: maybe"),
        "cudnn.as: Input should be 'run' or 'constraint', got 'maybe'"),
    "unquoted CUDA version": (
        lambda t: t.replace(f'    "{CUDA}":\n', f"    {CUDA}:\n"),
        f'cuda.versions."{CUDA}": as a key: expected a quoted string, got a decimal number {CUDA}'),
    "runner for an OS nothing builds on": (
        lambda t: t.replace("runners:\n", "runners:\n  freebsd: namespace-profile-16cpu-on-linux-64\n"),
        "runners.freebsd: no platform of this feedstock builds on freebsd (they build on linux, osx, win)"),
    "missing required key": (
        lambda t: t.replace("  plugin:\n    name: onnxruntime-ep-cuda\n", "  plugin:\n"),
        "outputs.plugin.name: required key is missing"),
    "invalid YAML": (
        lambda t: t + "\n  - [unbalanced\n",
        "line {appended}: not valid YAML (expected <block end>, but found '-')"),
    "licence file outside the source tree": (
        lambda t: t.replace("files: [LICENSE, ThirdPartyNotices.txt]", "files: [../LICENSE, ThirdPartyNotices.txt]"),
        "license.files[0]: '../LICENSE' is not a path inside the source tree with forward slashes"),
    "absolute licence file": (
        lambda t: t.replace("files: [LICENSE, ThirdPartyNotices.txt]", "files: [/LICENSE, ThirdPartyNotices.txt]"),
        "license.files[0]: '/LICENSE' is not a path inside the source tree with forward slashes"),
    "licence file with backslashes": (
        lambda t: t.replace("files: [LICENSE, ThirdPartyNotices.txt]", "files: [LICENSE, docs\\ThirdPartyNotices.txt]"),
        "license.files[1]: 'docs\\\\ThirdPartyNotices.txt' is not a path inside the source tree with forward slashes"),
    "patch file that does not exist": (
        lambda t: re.sub(r"(?m)^  patches: \[", "  patches: [fix-the-build.patch, ", t),
        "source.patches[0]: recipe/fix-the-build.patch does not exist"),
    "Windows path as the source URL": (
        lambda t: re.sub(r"(?m)^  url: .*$", r"  url: C:\\src\\onnxruntime-{version}.tar.gz", t),
        "source.url: 'C:\\\\src\\\\onnxruntime-{{version}}.tar.gz' is not an https URL with {{version}}, where the "
        "recipe puts its version"),
    "source URL without the version": (
        lambda t: t.replace("tags/v{version}.tar.gz", "tags/v1.30.0.tar.gz"),
        "source.url: 'https://github.com/microsoft/onnxruntime/archive/refs/tags/v1.30.0.tar.gz' is not an https URL "
        "with {{version}}, where the recipe puts its version"),
    "maintainer listed twice": (
        lambda t: t.replace("maintainers:\n", "maintainers:\n  - someone\n  - Someone\n"),
        "maintainers[1]: 'Someone' is listed twice (first as item 0)"),
    "duplicate YAML key": (
        lambda t: re.sub(r"(?m)^(  nvcc_threads: \d+)$", r"\1\n  nvcc_threads: 3", t),
        "cuda.nvcc_threads: given twice (lines {nvcc_threads} and {nvcc_threads_again}); YAML would keep the last "
        "silently"),
    "architectures out of order": (
        linux_64_list(lambda a: [a[1], a[0], *a[2:]]),
        arch_error(1, LINUX_64[0], f" comes after '{LINUX_64[1]}'; list architectures from the lowest up")),
    "an architecture CUDA 13 dropped (Volta)": (
        linux_64_list(lambda a: ["70-real", *a]),
        arch_error(0, "70-real", f": CUDA {CUDA}'s nvcc does not compile for it (it accepts {ACCEPTED})")),
    "a Jetson architecture on linux-64": (
        linux_64_list(lambda a: sorted([*a, "87-real"], key=lambda e: int(e.split("-")[0]))),
        arch_error(sorted([*LINUX_64, "87-real"], key=lambda e: int(e.split("-")[0])).index("87-real"), "87-real",
                   " is a Jetson (arm64) GPU, which no linux-64 package runs on")),
    "an architecture no nvcc knows (20)": (
        linux_64_list(lambda a: ["20-real", *a]),
        arch_error(0, "20-real", f": CUDA {CUDA}'s nvcc does not compile for it (it accepts {ACCEPTED})")),
    "an architecture no GPU has (999)": (
        linux_64_list(lambda a: [*a, "999"]),
        arch_error(len(LINUX_64), "999", f": CUDA {CUDA}'s nvcc does not compile for it (it accepts {ACCEPTED})")),
    "a CUDA version no pinning has": (
        lambda t: t.replace(f'    "{CUDA}":\n', '    "12.7":\n      architectures: {linux-64: [80-real], '
                                                 f'linux-aarch64: [80-real], win-64: [80-real]}}\n    "{CUDA}":\n'),
        "cuda.versions.\"12.7\": '12.7' is not a CUDA release whose nvcc this feedstock knows (known: "
        f"{', '.join(NVCC_ARCHITECTURES)}); a new one needs its row in NVCC_ARCHITECTURES "
        "(scripts/feedstock/architectures.py)"),
    "a Python floor above every Python offered": (
        lambda t: t.replace('minimum: "3.11"', 'minimum: "3.20"'),
        f"python: the range 3.20 to the newest leaves out every Python the .ci_support jobs offer ({OFFERED}), so no "
        "Python package would be built"),
    "a Python ceiling below the floor": (
        lambda t: t.replace('  minimum: "3.11"\n', '  minimum: "3.11"\n  maximum: "3.10"\n'),
        "python.maximum: 3.10 is below python.minimum 3.11"),
    "a build platform, which conda-forge.yml alone says": (
        lambda t: t.replace("  linux-aarch64:\n", "  linux-aarch64:\n    build_platform: linux-64\n"),
        "platforms.linux-aarch64.build_platform: unknown key"),
    "two macOS platforms that set the SDK": (
        lambda t: t.replace("\nplatforms:\n", '\nplatforms:\n  osx-64:\n    cuda: false\n    macos_sdk: "13.3"\n', 1),
        "platforms.osx-arm64.macos_sdk: only one macOS platform may set it: recipe/variants.yaml can select the SDK "
        "by OS (osx) only, so a second one would give MACOSX_SDK_VERSION twice"),
    "a non-UTF-8 byte": (
        lambda t: t + "maintainers:\n  - caf\udce9\n",
        "line {appended_at}: not UTF-8 (byte 0xe9)"),
    "a patch path of 5,000 characters": (
        lambda t: re.sub(r"(?m)^  patches: \[", "  patches: [" + "a" * 5000 + ".patch, ", t),
        "source.patches[0]: recipe/" + "a" * 80 + "... does not exist"),
    "a plugin library that is its folder": (
        lambda t: t.replace("unix: lib/libonnxruntime_providers_cuda.so", "unix: lib/.."),
        "outputs.plugin.library.unix: 'lib/..' is not a file's path under lib/"),
    "a -novec name that another output has": (
        lambda t: t.replace("    novec_name: onnxruntime-novec\n", "    novec_name: onnxruntime-cpp\n"),
        "outputs.python.novec_name: 'onnxruntime-cpp' is also outputs.cpp.name"),
    "an architecture list for a platform without CUDA": (
        lambda t: re.sub(rf'(?ms)^(    "{re.escape(CUDA)}":\n.*?^        win-64: [^\n]*\n)',
                         r"\g<1>        osx-arm64: [80-real]\n", t, count=1),
        f'cuda.versions."{CUDA}".architectures.osx-arm64: not a CUDA platform of this feedstock'),
    "a vendored library on a platform this feedstock does not build": (
        lambda t: t.replace("platforms: [win-64]}", "platforms: [win-64, osx-64]}", 1),
        f"license.vendored[{WIL}].platforms[1]: 'osx-64' is not a platform of this feedstock"),
    "architecture listed twice": (
        lambda t: t.replace("        linux-64: [75-real, 80-real,", "        linux-64: [75-real, 75-real, 80-real,"),
        f'cuda.versions."{CUDA}".architectures.linux-64[1]: \'75-real\' is listed twice (first as item 0)'),
}


def line_of(text: str, line: str) -> int:
    return text.splitlines().index(line) + 1


def nvcc_threads_line(text: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if re.fullmatch(r"  nvcc_threads: \d+", line))


@pytest.mark.parametrize("case", list(BAD_CONFIGS))
def test_bad_config_gets_one_clear_message_and_an_untouched_tree(feedstock: Path, case: str) -> None:
    edit, message = BAD_CONFIGS[case]
    config = feedstock / "config" / "feedstock.yaml"
    original = config.read_text()
    config.write_bytes(edit(original).encode("utf-8", "surrogateescape"))
    message = message.format(appended=len(original.splitlines()) + 2, appended_at=len(original.splitlines()) + 2,
                             nvcc_threads=nvcc_threads_line(original),
                             nvcc_threads_again=nvcc_threads_line(original) + 1)
    (feedstock / "recipe" / "variants.yaml").unlink()  # a render would have to restore it
    before = snapshot(feedstock)
    for args in ((), ("--check",)):
        result = render(feedstock, *args)
        assert (result.returncode, result.stdout, result.stderr) == (2, "", CONFIG_ERROR + message + "\n")
    assert snapshot(feedstock) == before


def test_every_problem_of_a_config_is_reported_in_one_run(feedstock: Path) -> None:
    config = feedstock / "config" / "feedstock.yaml"
    text = config.read_text()
    for case in ("wrong type", "unknown cudnn mode", "patch file that does not exist"):
        text = BAD_CONFIGS[case][0](text)
    config.write_text(text)
    result = render(feedstock)
    assert result.returncode == 2
    assert sorted(result.stderr.splitlines()) == sorted(
        CONFIG_ERROR + BAD_CONFIGS[case][1]
        for case in ("wrong type", "unknown cudnn mode", "patch file that does not exist"))


def test_problems_of_the_config_and_of_the_recipe_are_reported_together(feedstock: Path) -> None:
    config = feedstock / "config" / "feedstock.yaml"
    config.write_text(BAD_CONFIGS["unknown cudnn mode"][0](config.read_text()))
    recipe = feedstock / RECIPE
    recipe.write_text(re.sub(r"(?m)^  number: \d+$", "  number: many", recipe.read_text(), count=1))
    result = render(feedstock)
    assert (result.returncode, result.stderr.splitlines()) == (2, [
        CONFIG_ERROR + BAD_CONFIGS["unknown cudnn mode"][1],
        "recipe/recipe.yaml: build.number: Input should be a valid integer, got 'many'"])


def test_bot_fields_that_are_malformed_are_named(feedstock: Path) -> None:
    recipe = feedstock / RECIPE
    recipe.write_text(re.sub(r"(?m)^  sha256: [0-9a-f]{64}$", "  sha256: 12zz", recipe.read_text(), count=1))
    before = snapshot(feedstock)
    result = render(feedstock)
    assert (result.returncode, result.stderr) == (
        2, "recipe/recipe.yaml: source.sha256: '12zz' is not 64 lowercase hex digits\n")
    assert snapshot(feedstock) == before


def test_a_duplicate_key_in_the_recipe_is_an_error(feedstock: Path) -> None:
    recipe = feedstock / RECIPE
    text = recipe.read_text()
    line = line_of(text, "schema_version: 1")
    recipe.write_text(text.replace("schema_version: 1\n", "schema_version: 1\nschema_version: 2\n"))
    before = snapshot(feedstock)
    result = render(feedstock)
    assert (result.returncode, result.stderr) == (
        2, f"recipe/recipe.yaml: schema_version: given twice (lines {line} and {line + 1}); YAML would keep the last "
           "silently\n")
    assert snapshot(feedstock) == before


def test_a_write_failure_leaves_every_file_as_it_was(feedstock: Path) -> None:
    config = feedstock / "config" / "feedstock.yaml"
    config.write_text(re.sub(r"(?m)^  as: \w+$", "  as: constraint", config.read_text()))  # the recipe changes
    manifests = feedstock / "recipe" / "ep-plugins" / "unix"
    shutil.rmtree(manifests)
    manifests.write_text("a file where a folder should be")
    before = snapshot(feedstock)
    result = render(feedstock)
    assert result.returncode == 2 and "nothing was changed" in result.stderr
    assert snapshot(feedstock) == before
    assert not [p for p in feedstock.rglob(".*") if p.is_file() and p.name.startswith(".recipe")]


def test_no_package_index_to_bootstrap_from_is_one_sentence_and_exit_2(feedstock: Path) -> None:
    # -S hides the running interpreter's site-packages, so the render has to bootstrap its .venv/
    result = render(feedstock, python=(sys.executable, "-S"), env={**os.environ, "PIP_NO_INDEX": "1"})
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == (
        "bootstrap: cannot install scripts/requirements.txt into .venv/: pip exited 1 (ERROR: Could not find a "
        "version that satisfies the requirement jinja2==3.1.6 (from versions: none)); is the package index reachable?")
    assert not (feedstock / ".venv").exists()


def test_an_interpreter_with_other_versions_than_the_pins_is_not_used(tmp_path: Path) -> None:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("pyyaml==0.0.1\n")
    assert bootstrap.unmet_pins(requirements) == [f"pyyaml==0.0.1 (found {importlib.metadata.version('pyyaml')})"]


# Put on PYTHONPATH, this logs to $AUDIT_LOG every process a render starts and every connection it opens.
AUDIT = """import os, sys
_WATCHED = ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "socket.connect",
            "socket.getaddrinfo")
def _log(event, args):
    if event in _WATCHED:
        with open(os.environ["AUDIT_LOG"], "a") as log:
            print(event, repr(args)[:200], file=log)
sys.addaudithook(_log)
"""


@pytest.mark.parametrize("args", [(), ("--check",)])
def test_a_render_starts_no_process_and_opens_no_connection(feedstock: Path, tmp_path: Path,
                                                             args: tuple[str, ...]) -> None:
    """Without ONNX Runtime's source at hand (which brings CMake in), a render is the Python that reads its
    inputs and asks rattler-build's engine in-process: nothing to install, download or wait for."""
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(AUDIT)
    log = tmp_path / "audit.log"
    # an empty mirror variable says no mirror folder; the copy has no download of the source in its .cache/
    result = render(feedstock, *args, env={**os.environ, MIRROR_VARIABLE: "", "PYTHONPATH": str(hooks),
                                           "AUDIT_LOG": str(log)})
    assert result.returncode == 0, result.stderr
    assert not log.exists() or log.read_text().splitlines() == []


def test_a_readme_without_its_markers_is_named_and_left_alone(feedstock: Path) -> None:
    readme = feedstock / "README.md"
    readme.write_text(readme.read_text().replace("<!-- end of build matrix -->", ""))
    before = snapshot(feedstock)
    result = render(feedstock)
    assert (result.returncode, result.stderr) == (
        2, "README.md: build matrix: its begin and end markers are missing or out of order\n")
    assert snapshot(feedstock) == before


@pytest.mark.parametrize(("mode", "section", "other"), [("run", "run", "run_constraints"),
                                                        ("constraint", "run_constraints", "run")])
def test_the_cudnn_switch_moves_cudnn_between_run_and_run_constraints(
        feedstock: Path, mode: str, section: str, other: str) -> None:
    config = feedstock / "config" / "feedstock.yaml"
    config.write_text(re.sub(r"(?m)^  as: \w+$", f"  as: {mode}", config.read_text()))
    assert render(feedstock).returncode == 0
    recipe = parse_yaml((feedstock / RECIPE).read_text(), RECIPE)
    plugin = recipe["outputs"][0]["requirements"]
    assert "cudnn ${{ cudnn }}.*" in plugin[section]
    assert not [spec for spec in plugin[other] if isinstance(spec, str) and spec.startswith("cudnn")]


def test_a_job_file_without_its_platform_is_named_and_nothing_is_written(feedstock: Path) -> None:
    job = feedstock / OSX_CPU_JOB
    job.write_text(re.sub(r"(?m)^target_platform:\n- osx-arm64\n", "", job.read_text()))
    (feedstock / "recipe" / "variants.yaml").unlink()  # a render would have to restore it
    before = snapshot(feedstock)
    result = render(feedstock)
    assert (result.returncode, result.stderr) == (
        2, f"{OSX_CPU_JOB}: target_platform: required key is missing\n")
    assert snapshot(feedstock) == before


def test_a_job_file_with_two_platforms_is_named_and_nothing_is_written(feedstock: Path) -> None:
    job = feedstock / OSX_CPU_JOB
    job.write_text(job.read_text().replace("target_platform:\n- osx-arm64\n",
                                           "target_platform:\n- osx-arm64\n- osx-64\n"))
    before = snapshot(feedstock)
    result = render(feedstock)
    assert (result.returncode, result.stderr) == (
        2, f"{OSX_CPU_JOB}: target_platform: a job's file holds one value here, not 2\n")
    assert snapshot(feedstock) == before


def test_a_renamed_plugin_package_reaches_the_recipe_the_manifests_and_the_helper(feedstock: Path) -> None:
    config = feedstock / "config" / "feedstock.yaml"
    old = parse_yaml(config.read_text(), "config")["outputs"]["plugin"]["name"]
    new = f"{old}-renamed"
    config.write_text(config.read_text().replace(old, new))
    result = render(feedstock)
    assert result.returncode == 0, result.stderr
    recipe = (feedstock / RECIPE).read_text()
    plugin = parse_yaml(recipe, RECIPE)["outputs"][0]
    assert plugin["package"]["name"] == new and plugin["build"]["script"]["env"]["PLUGIN_MANIFEST"] == f"{new}.json"
    assert old not in recipe.replace(new, "")
    assert sorted(p.name for p in (feedstock / "recipe" / "ep-plugins").rglob("*.json")) == [f"{new}.json"] * 2
    ask = ("import onnxruntime_ep_cuda as ep\n"
           "try:\n    ep.get_ep_name()\nexcept ep.PluginNotInstalledError as e:\n    print(e)")
    helper = subprocess.run([sys.executable, "-c", ask], cwd=feedstock / "recipe" / "python",
                            capture_output=True, text=True, check=True)
    assert helper.stdout.rstrip().endswith(f"install it with `conda install {new}`")


def test_the_cpp_build_asks_for_the_configs_python_floor() -> None:
    minimum = CONFIG.python.minimum
    outputs = parse_yaml((REPO / RECIPE).read_text(), RECIPE)["outputs"]
    cpps = [output for output in outputs if output["build"]["script"]["file"] == "build_cpp.py"]
    assert len(cpps) == 2 and all(f"python >={minimum}" in cpp["requirements"]["build"] for cpp in cpps)


def matrix_pythons(readme: str) -> dict[str, str]:
    """The Python cell of each row of the README's build matrix, by job."""
    section = readme.split("<!-- build matrix", 1)[1]
    return dict(re.findall(r"(?m)^\| `([^`]+)` \| [^|]+ \| [^|]+ \| [^|]+ \| ([^|]+) \|$", section))


def test_python_maximum_is_the_newest_python_built_and_the_matrix_says_so(feedstock: Path) -> None:
    """python.maximum reaches the recipe's skip rules: rattler-build builds the Python package for each Python a
    job offers from python.minimum to python.maximum, both included, and the README's matrix lists those."""
    def version(python: str) -> tuple[int, ...]:
        return version_tuple(python.removesuffix("t"))  # 3.14t, the free-threaded 3.14, is a 3.14

    minimum = version_tuple(CONFIG.python.minimum)
    in_range = sorted({p for job in load_jobs(REPO) for p in job.pythons if version(p) >= minimum}, key=version)
    if len(in_range) < 2:
        pytest.skip(f"the jobs offer {', '.join(in_range) or 'no'} Python from the minimum up: no ceiling to lower")
    maximum = in_range[-2]
    config = feedstock / "config" / "feedstock.yaml"
    text = config.read_text()
    floor = f'  minimum: "{CONFIG.python.minimum}"\n'
    assert text.count(floor) == 1
    config.write_text(text.replace(floor, f'{floor}  maximum: "{maximum}"\n'))
    result = render(feedstock)
    assert result.returncode == 0, result.stderr
    jobs = load_jobs(feedstock)
    built = what_each_job_builds(feedstock, (feedstock / RECIPE).read_text(), jobs, build_platforms(feedstock))
    python_package = CONFIG.outputs.python.name
    expected = {job.name: tuple(p for p in job.pythons if p in in_range[:-1])
                for job in jobs if python_package in built[job.name]}
    assert expected and {name: built[name][python_package] for name in expected} == expected
    shown = matrix_pythons((feedstock / "README.md").read_text())
    assert {name: shown[name] for name in expected} == {name: ", ".join(p) for name, p in expected.items()}


def _oldest_listed_cuda(root: Path) -> str:
    """The oldest CUDA version the config lists and the jobs build: once the pinning drops one (12.9, say), the
    bot's rerender leaves it no job while the config still lists it, and dropping it would show nothing."""
    built = {job.cuda_version for job in load_jobs(root)}
    listed = sorted((v for v in CONFIG.cuda.versions if v in built), key=version_tuple)
    if len(listed) < 2:
        pytest.skip(f"the jobs build {len(listed)} of the listed CUDA versions: dropping one would leave no plugin")
    drop_cuda_version(root, listed[0])
    return f"cuda_compiler_version{listed[0]}"


def _win_64(root: Path) -> str:
    drop_win_64(root)
    return "win_64_"


@pytest.mark.parametrize("drop", [_oldest_listed_cuda, _win_64], ids=["a CUDA version", "a platform"])
def test_the_jobs_of_what_the_config_drops_build_nothing_in_the_matrix_until_the_rerender(
        feedstock: Path, drop: Callable[[Path], str]) -> None:
    """Before conda-smithy removes their jobs, the matrix says what rattler-build makes of the recipe with them:
    nothing, and the summary counts only the jobs that build."""
    marker = drop(feedstock)
    assert render(feedstock).returncode == 0
    readme = (feedstock / "README.md").read_text()
    jobs = [job.name for job in load_jobs(feedstock)]
    dropped = [job for job in jobs if marker in job]
    assert dropped and [job for job in dropped if f"| `{job}` | nothing: the recipe skips it" not in readme] == []
    assert f"\n\n{len(jobs) - len(dropped)} jobs. A release costs " in readme


def test_a_config_path_that_is_a_folder_is_one_line_and_exit_2(feedstock: Path) -> None:
    config = feedstock / "config" / "feedstock.yaml"
    config.unlink()
    config.mkdir()
    before = snapshot(feedstock)
    result = render(feedstock)
    assert (result.returncode, result.stderr) == (2, "config/feedstock.yaml: (file): cannot be read (Is a directory)\n")
    assert snapshot(feedstock) == before


def test_a_console_that_cannot_show_a_character_gets_its_escape(feedstock: Path) -> None:
    readme = feedstock / "README.md"
    readme.write_text(readme.read_text().replace(" jobs. A release", " jobs \u2014 A release", 1))
    result = render(feedstock, "--check", env={**os.environ, "PYTHONIOENCODING": "ascii"})
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert "\\u2014" in result.stdout


def _limit_file_size() -> None:
    import resource
    # writes past 8 KiB fail with EFBIG, as they would on a full disk (Python ignores SIGXFSZ)
    resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))


# Put on PYTHONPATH, this makes the disk full (as _limit_file_size does) once a render stages its first file beside
# its target, after the copy of the recipe it has rattler-build read is written.
FULL_ONCE_STAGING = f"""import resource, tempfile
def _mkstemp(*args, _mkstemp=tempfile.mkstemp, **kwargs):
    if kwargs.get("suffix") == "{TEMPORARY_SUFFIX}":
        resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))
    return _mkstemp(*args, **kwargs)
tempfile.mkstemp = _mkstemp
"""


@pytest.mark.parametrize(("full_from", "said"), [
    ("staging", "cannot write (File too large); nothing was changed"),
    ("start", "cannot write the copy rattler-build reads (File too large); nothing was changed"),
], ids=["the tree", "the copy rattler-build reads"])
def test_a_write_that_fails_names_the_file_and_leaves_the_tree_and_no_staged_file(
        feedstock: Path, tmp_path: Path, full_from: str, said: str) -> None:
    config = feedstock / "config" / "feedstock.yaml"
    config.write_text(re.sub(r"(?m)^  as: \w+$", "  as: constraint", config.read_text()))  # the recipe changes
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(FULL_ONCE_STAGING)
    before = snapshot(feedstock)
    result = subprocess.run([sys.executable, str(feedstock / "scripts" / "render.py")], capture_output=True,
                            text=True, stdin=subprocess.DEVNULL, timeout=120,
                            **({"env": {**os.environ, "PYTHONPATH": str(hooks)}} if full_from == "staging"
                               else {"preexec_fn": _limit_file_size}))
    assert (result.returncode, result.stderr) == (2, f"recipe/recipe.yaml: (file): {said}\n")
    assert snapshot(feedstock) == before


def test_what_an_interrupted_render_left_is_git_ignored_and_removed_by_the_next(feedstock: Path) -> None:
    # what a render killed between staging and swapping leaves beside its targets
    leftovers = [f"recipe/.recipe.yaml.k3j9x2{TEMPORARY_SUFFIX}", f".README.md.p0q8z1{TEMPORARY_SUFFIX}",
                 f"recipe/ep-plugins/unix/.onnxruntime-ep-cuda.json.a1b2c3{TEMPORARY_SUFFIX}"]
    for name in leftovers:
        (feedstock / name).write_text("half")
    ignored = subprocess.run(["git", "check-ignore", "--no-index", *leftovers], cwd=REPO, capture_output=True,
                             text=True, stdin=subprocess.DEVNULL)
    assert ignored.stdout.splitlines() == leftovers
    assert render(feedstock).returncode == 0
    assert [name for name in leftovers if (feedstock / name).exists()] == []


def test_a_hand_edit_of_the_variant_file_is_refused(feedstock: Path) -> None:
    variants = feedstock / "recipe" / "variants.yaml"
    variants.write_text(variants.read_text() + "\nc_stdlib_version:\n  - '2.28'\n")
    config = feedstock / "config" / "feedstock.yaml"
    config.write_text(config.read_text().replace("16cpu-on-linux", "32cpu-on-linux"))  # a render would rewrite it
    before = snapshot(feedstock)
    result = render(feedstock)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == (
        "recipe/variants.yaml: (file): edited by hand since it was rendered, so nothing was written (the diff shows "
        "what would be lost): make the edit in config/feedstock.yaml or scripts/feedstock/templates/variants.yaml.j2, "
        "or drop it with `python3 scripts/render.py --force`")
    assert "recipe/variants.yaml: c_stdlib_version: edited by hand, and a render would change it" in result.stderr
    assert "-c_stdlib_version:" in result.stdout
    assert snapshot(feedstock) == before


@pytest.mark.parametrize("manifest", ["recipe/python/onnxruntime_ep_cuda/plugin_manifest.json",
                                      "recipe/ep-plugins/win/onnxruntime-ep-cuda.json"])
def test_a_hand_edit_of_a_plugin_manifest_is_refused(feedstock: Path, manifest: str) -> None:
    path = feedstock / manifest
    path.write_text(path.read_text().replace('"manifest_version": 1', '"manifest_version": 2'))
    config = feedstock / "config" / "feedstock.yaml"
    config.write_text(config.read_text().replace("ep_name: CUDAExecutionProvider", "ep_name: CudaEP"))
    before = snapshot(feedstock)
    result = render(feedstock)
    assert result.returncode == 2
    assert f"{manifest}: manifest_version: edited by hand, and a render would change it" in result.stderr
    assert snapshot(feedstock) == before
    assert render(feedstock, "--force").returncode == 0
    assert '"manifest_version": 1' in path.read_text()


# Put on PYTHONPATH, this makes each of a render's renames take a while, so that a signal can be sent
# while the render swaps its files in.
SLOW_RENAMES = """import os, time
_replace = os.replace
def _slow_replace(*args, **kwargs):
    time.sleep(0.3)
    return _replace(*args, **kwargs)
os.replace = _slow_replace
"""


def test_a_render_stopped_while_it_swaps_its_files_in_leaves_the_new_tree(feedstock: Path, tmp_path: Path) -> None:
    config = feedstock / "config" / "feedstock.yaml"
    # a change that every generated file but the README follows
    config.write_text(config.read_text().replace("name: onnxruntime-ep-cuda\n", "name: onnxruntime-ep-cuda-renamed\n"))
    finished = tmp_path / "finished"
    shutil.copytree(feedstock, finished)
    assert render(finished).returncode == 0
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(SLOW_RENAMES)
    recipe = feedstock / RECIPE
    before = recipe.read_bytes()
    process = subprocess.Popen([sys.executable, str(feedstock / "scripts" / "render.py")], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env={**os.environ, "PYTHONPATH": str(hooks)})
    deadline = time.monotonic() + 60
    while recipe.read_bytes() == before and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    process.send_signal(signal.SIGTERM)  # the first file is in; the others follow one every 0.3 s
    # the signal ended the render, after it had swapped every file in
    assert process.wait(timeout=60) == -signal.SIGTERM
    assert snapshot(feedstock) == snapshot(finished)


def test_where_signals_cannot_be_masked_a_render_writes_its_files_and_leaves_no_staged_one(
        feedstock: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import render as generator

    monkeypatch.delattr(signal, "pthread_sigmask")  # as on Windows
    shutil.rmtree(feedstock / "recipe" / "ep-plugins")
    (feedstock / "recipe" / "variants.yaml").unlink()
    assert generator.main(["--root", str(feedstock)]) == 0
    assert "wrote recipe/variants.yaml" in capsys.readouterr().out.splitlines()
    assert list(feedstock.rglob(f"*{TEMPORARY_SUFFIX}")) == []
    for path, digest in snapshot(feedstock).items():
        assert hashlib.sha256((REPO / path).read_bytes()).hexdigest() == digest, path


def test_renders_run_at_once_each_succeed_and_take_nothing_for_a_hand_edit(feedstock: Path) -> None:
    config = feedstock / "config" / "feedstock.yaml"
    original = config.read_text()
    # a change that every generated file but the README follows, so that each render has files to swap in
    renamed = original.replace("name: onnxruntime-ep-cuda\n", "name: onnxruntime-ep-cuda-renamed\n")
    failed = []
    for pair in range(12):
        config.write_text(renamed if pair % 2 == 0 else original)
        renders = [subprocess.Popen([sys.executable, str(feedstock / "scripts" / "render.py")], text=True,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                   for _ in range(2)]
        for process in renders:
            _, stderr = process.communicate(timeout=60)
            if process.returncode != 0:
                failed.append(f"pair {pair}: exit {process.returncode}: {stderr}")
    assert failed == []
    assert render(feedstock, "--check").returncode == 0


def test_the_lock_a_render_takes_is_git_ignored(feedstock: Path) -> None:
    from feedstock.files import LOCK

    assert render(feedstock, "--check").returncode == 0
    assert (feedstock / LOCK).is_file()
    ignored = subprocess.run(["git", "check-ignore", "--no-index", LOCK], cwd=REPO, capture_output=True, text=True,
                             stdin=subprocess.DEVNULL)
    assert ignored.stdout.splitlines() == [LOCK]


def long_lines(root: Path) -> list[str]:
    """`path:line: length` for each line over 120 characters in a file the generator writes whole."""
    import render as generator

    return [f"{f.path}:{number}: {len(line)}" for f in generator.generate(root) if f.path != "README.md"
            for number, line in enumerate(f.text.splitlines(), 1) if len(line) > 120]


def test_no_line_of_a_generated_file_is_longer_than_120_characters() -> None:
    assert long_lines(REPO) == []


def evaluated_architectures(root: Path) -> dict[str, str]:
    """CUDA_ARCHITECTURES as rattler-build evaluates the recipe in each CUDA job of .ci_support/."""
    found = {}
    for job in sorted((root / ".ci_support").glob("*cuda_compiler_version1*.yaml")):
        variants = read_yaml(job)
        platform = variants["target_platform"][0]
        build = build_platforms(root).get(platform, platform)
        (found[job.stem],) = {r.recipe["build"]["script"]["env"]["CUDA_ARCHITECTURES"]
                              for r in rattler_render(root / RECIPE, variants, platform, build)
                              if r.name == CONFIG.outputs.plugin.name}
    return found


def listed_architectures(root: Path) -> dict[str, str]:
    """What the config of `root` lists for each CUDA job of .ci_support/, as ORT's CMAKE_CUDA_ARCHITECTURES."""
    lists = load_config(root).cuda_lists
    found = {}
    for job in sorted((root / ".ci_support").glob("*cuda_compiler_version1*.yaml")):
        variants = read_yaml(job)
        found[job.stem] = ort_cuda_architectures(lists.get(variants["cuda_compiler_version"][0],
                                                            variants["target_platform"][0]))
    return found


def set_list(text: str, version: str, platform: str, architectures: str) -> str:
    """The config's text with CUDA `version`'s list for `platform` replaced by `architectures` (YAML flow)."""
    block = rf'(?ms)^(    "{re.escape(version)}":\n.*?^        {platform}: )\[[^\]]*\]'
    text, count = re.subn(block, rf"\g<1>{architectures}", text, count=1)
    assert count == 1, f'cuda.versions."{version}".architectures.{platform} not found in the config'
    return text


def test_the_longest_architecture_list_a_cuda_allows_still_fits_in_120_characters(feedstock: Path) -> None:
    # every architecture the oldest listed CUDA's nvcc compiles for (the most of any listed one), the newest
    # bare (SASS and PTX), on linux-aarch64
    oldest = min(BUILT_LISTED, key=version_tuple)
    *sass, newest = NVCC_ARCHITECTURES[oldest]
    longest = ", ".join([*(f"{a}-real" for a in sass), f'"{newest}"'])
    config = feedstock / "config" / "feedstock.yaml"
    config.write_text(set_list(config.read_text(), oldest, "linux-aarch64", f"[{longest}]"))
    assert render(feedstock).returncode == 0
    assert long_lines(feedstock) == []
    evaluated = evaluated_architectures(feedstock)
    assert evaluated == listed_architectures(feedstock)
    assert ort_cuda_architectures((*(f"{a}-real" for a in sass), str(newest))) in evaluated.values()


def test_a_list_that_two_cuda_versions_share_is_chosen_in_each_of_their_jobs(feedstock: Path) -> None:
    # the oldest listed CUDA takes, on every platform, the list the newest has on linux-64
    listed = sorted(BUILT_LISTED, key=version_tuple)
    if len(listed) < 2:
        pytest.skip(f"the .ci_support jobs build one listed CUDA version ({', '.join(listed)}): no two to share a list")
    oldest, newest = listed[0], listed[-1]
    shared_list = tuple(CONFIG.cuda.versions[newest].architectures["linux-64"])
    shared = ", ".join(f'"{a}"' for a in shared_list)
    config = feedstock / "config" / "feedstock.yaml"
    text = config.read_text()
    for platform in CONFIG.cuda.versions[oldest].architectures:
        text = set_list(text, oldest, platform, f"[{shared}]")
    config.write_text(text)
    assert render(feedstock).returncode == 0
    assert "    or (" in (feedstock / RECIPE).read_text()
    evaluated = evaluated_architectures(feedstock)
    assert evaluated == listed_architectures(feedstock)
    oldest_jobs = {job: value for job, value in evaluated.items() if f"cuda_compiler_version{oldest}" in job}
    assert oldest_jobs and set(oldest_jobs.values()) == {ort_cuda_architectures(shared_list)}
