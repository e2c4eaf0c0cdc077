"""What users of conda-forge's earlier onnxruntime builds and of upstream's wheels keep, read from the
recipe as each `.ci_support` variant evaluates it: upstream's Python requirements, the console script,
the CoreML EP's SDK, and the licences of what the arm64 and macOS builds add."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from conftest import REPO
from support.fake_tools import FakeTools
from support.recipe_checks import Built, Feedstock
from support import upstream_source
from support.yaml_files import read_yaml

CONFIG = read_yaml(REPO / "config" / "feedstock.yaml")
PYTHON_PACKAGE = CONFIG["outputs"]["python"]["name"]
CPU_OUTPUTS = (CONFIG["outputs"]["cpp"]["name"], PYTHON_PACKAGE)
# conda-forge's name for a PyPI distribution where the two differ (python-flatbuffers is what
# conda-forge/onnxruntime-feedstock recipe/recipe.yaml @ 0ff2535 lists for ONNX Runtime's flatbuffers)
CONDA_NAME = {"flatbuffers": "python-flatbuffers"}


@pytest.fixture(scope="module")
def evaluated() -> Feedstock:
    return Feedstock(REPO)


def built(feedstock: Feedstock, name: str, platform: str | None = None) -> list[Built]:
    """What rattler-build renders of one output, in every .ci_support config (or one platform's)."""
    found = [b for b in feedstock.built if b.name == name and platform in (None, b.platform)]
    assert found, f"{name} is built in no variant{f' for {platform}' if platform else ''}"
    return found


def specs_by_name(specs: list[str]) -> dict[str, SpecifierSet]:
    """`numpy >=1.21.6` -> {"numpy": SpecifierSet(">=1.21.6")}"""
    parsed = {}
    for spec in specs:
        name, _, constraint = spec.partition(" ")
        parsed[name] = SpecifierSet(constraint.replace(" ", ""))
    return parsed


def script_lines(tests: list) -> list[str]:
    # rattler-build renders a one-line script as a string
    scripts = [test["script"] for test in tests if "script" in test]
    return [line for script in scripts for line in ([script] if isinstance(script, str) else script)]


# rattler-build fills a test script's ${{ }} expressions in when the test runs, with the variant's variables
TEST_TIME_TEMPLATES = jinja2.Environment(variable_start_string="${{", variable_end_string="}}",
                                         undefined=jinja2.StrictUndefined)


def run_script_tests(directory: Path, package: Built, *programs: str) -> FakeTools:
    """The package's script tests run by bash, with stand-ins for `programs` that record their calls."""
    tools = FakeTools(directory, *programs)
    for line in script_lines(package.recipe["tests"]):
        command = TEST_TIME_TEMPLATES.from_string(line).render(target_platform=package.platform)
        done = subprocess.run(["bash", "-c", command], env=tools.env(), cwd=directory, capture_output=True,
                              text=True, stdin=subprocess.DEVNULL, timeout=60)
        assert done.returncode == 0, (package.source, command, done.stderr)
    return tools


# --- upstream's Python requirements


def test_python_run_requirements_are_upstreams_requirements_txt(evaluated: Feedstock) -> None:
    upstream = {}
    for line in upstream_source.read("requirements.txt").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            requirement = Requirement(line)
            upstream[CONDA_NAME.get(requirement.name, requirement.name)] = requirement.specifier
    for package in built(evaluated, PYTHON_PACKAGE):
        run = specs_by_name(package.requirements["run"])
        run.pop("python")
        assert run == upstream, package.source


def test_python_run_requirements_are_the_configs(evaluated: Feedstock) -> None:
    for package in built(evaluated, PYTHON_PACKAGE):
        assert package.requirements["run"] == ["python", *CONFIG["python"]["requirements"]], package.source


def test_python_host_has_every_package_setup_py_imports(evaluated: Feedstock) -> None:
    tree = ast.parse(upstream_source.read("setup.py"))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module and node.level == 0}
    # setup.py also imports a helper of the source tree (onnxruntime/python/onnxruntime_collect_build_info.py)
    in_tree = {name for name in imported if upstream_source.exists(f"onnxruntime/python/{name}.py")}
    third_party = imported - set(sys.stdlib_module_names) - in_tree
    assert third_party, "setup.py imports no third-party package: the parse found nothing to check"
    for package in built(evaluated, PYTHON_PACKAGE):
        host = set(specs_by_name(package.requirements["host"]))
        assert third_party <= host, (package.source, sorted(third_party - host))


# --- the console script


def console_scripts(feedstock: Feedstock) -> list[str]:
    """The console scripts the Python package declares (build.python.entry_points)."""
    (recipe_output,) = [o for o in feedstock.recipe["outputs"] if o["package"]["name"] == PYTHON_PACKAGE]
    return [entry.split("=")[0].strip() for entry in recipe_output["build"]["python"]["entry_points"]]


def test_python_package_runs_every_console_script_it_declares(evaluated: Feedstock, tmp_path: Path) -> None:
    scripts = console_scripts(evaluated)
    assert scripts
    for package in built(evaluated, PYTHON_PACKAGE):
        tools = run_script_tests(tmp_path / package.source / package.build_string, package, "python", *scripts)
        for script in scripts:
            assert [call["args"] for call in tools.calls(script)] == [["--help"]], (package.source, script)


# --- the CoreML EP on osx-arm64


def test_osx_arm64_builds_against_a_newer_sdk_than_its_deployment_target(evaluated: Feedstock) -> None:
    configs = [c for c in evaluated.ci_support.values() if c["target_platform"] == ["osx-arm64"]]
    assert configs
    for config in configs:
        assert config["MACOSX_SDK_VERSION"] == [CONFIG["platforms"]["osx-arm64"]["macos_sdk"]]
        # the deployment target stays conda-forge's, which is also the macOS stdlib version it pins
        assert config["MACOSX_DEPLOYMENT_TARGET"] == config["c_stdlib_version"]
        assert Version(config["MACOSX_SDK_VERSION"][0]) > Version(config["MACOSX_DEPLOYMENT_TARGET"][0])


def test_python_test_script_is_told_the_platform_it_checks(evaluated: Feedstock, tmp_path: Path) -> None:
    for package in built(evaluated, PYTHON_PACKAGE):
        tools = run_script_tests(tmp_path / package.source / package.build_string, package, "python",
                                 *console_scripts(evaluated))
        runs = [call["args"] for call in tools.calls("python")]
        assert ["test_python_cpu.py", package.platform] in runs, package.source


def test_cpp_package_tests_for_the_coreml_header_on_osx_arm64(evaluated: Feedstock) -> None:
    for package in built(evaluated, CPU_OUTPUTS[0], "osx-arm64"):
        (contents,) = [test["package_contents"] for test in package.recipe["tests"] if "package_contents" in test]
        assert "onnxruntime/coreml_provider_factory.h" in contents["include"], package.source


# --- licences of what the arm64 and macOS CPU builds link


@pytest.mark.parametrize(("platform", "deps"), [
    ("linux-aarch64", {"kleidiai"}),
    ("osx-arm64", {"kleidiai", "coremltools", "fp16", "psimd", "nlohmann_json"}),
])
def test_cpu_outputs_ship_the_licences_of_what_their_platform_adds(evaluated: Feedstock, platform, deps) -> None:
    for output in CPU_OUTPUTS:
        for package in built(evaluated, output, platform):
            shipped = {Path(path).parts[2].removesuffix("-src") for path in package.recipe["about"]["license_file"]
                       if "/_deps/" in path}
            assert deps <= shipped, (package.source, output, sorted(deps - shipped))


def test_cpu_outputs_on_x86_64_ship_no_arm64_or_macos_licences(evaluated: Feedstock) -> None:
    for output in CPU_OUTPUTS:
        for package in built(evaluated, output, "linux-64"):
            shipped = " ".join(package.recipe["about"]["license_file"])
            for dep in ("kleidiai", "coremltools", "fp16", "psimd"):
                assert f"/{dep}-src/" not in shipped, (package.source, output, dep)


# --- bad values of the keys above


def render_with_config(root: Path, edit) -> subprocess.CompletedProcess[str]:
    config = root / "config" / "feedstock.yaml"
    config.write_text(edit(config.read_text()))
    return subprocess.run([sys.executable, str(root / "scripts" / "render.py")], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=60)


@pytest.mark.parametrize(("edit", "message"), [
    (lambda t: t.replace("  linux-aarch64:\n", '  linux-aarch64:\n    macos_sdk: "13.3"\n'),
     "platforms.linux-aarch64.macos_sdk: only macOS platforms have a macOS SDK"),
    (lambda t: t.replace('macos_sdk: "13.3"', "macos_sdk: 13.3"),
     "platforms.osx-arm64.macos_sdk: expected a quoted string, got a decimal number 13.3"),
    (lambda t: t.replace("    - numpy >=1.21.6\n", "    - numpy>=1.21.6\n"),
     "python.requirements[1]: 'numpy>=1.21.6' is not a conda package spec like numpy >=1.21"),
], ids=["sdk-off-macos", "sdk-unquoted", "spec-without-space"])
def test_bad_macos_sdk_or_python_requirement_gets_one_clear_message_and_nothing_written(
        feedstock: Path, edit, message) -> None:
    written = [feedstock / "recipe" / "recipe.yaml", feedstock / "recipe" / "variants.yaml"]
    before = [path.read_bytes() for path in written]

    result = render_with_config(feedstock, edit)

    assert (result.returncode, result.stderr) == (2, f"config/feedstock.yaml: {message}\n")
    assert [path.read_bytes() for path in written] == before
