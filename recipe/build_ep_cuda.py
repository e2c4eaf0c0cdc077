"""onnxruntime-ep-cuda: ONNX Runtime's CUDA execution provider as a standalone plugin library, which any
core from ORT_MIN_CORE_VERSION up loads. The only nvcc work in this feedstock. Builds one target and
copies it (a full `cmake --install` would need every target of the tree). One script for unix and
Windows: rattler-build runs it with the build environment's Python.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from cmake_common import configure, fail, is_windows, linker_flags, run, stop_here_if_rehearsed, target_platform

# where cuda-cudart-dev, libcublas-dev and libcufft-dev put a linux target's CUDA headers and libraries
CUDA_TARGETS = {"linux-64": "x86_64-linux", "linux-aarch64": "sbsa-linux"}
# a list CMake can use; an empty one would silently build for CMake's default
ARCHITECTURE_LIST = re.compile(r"[0-9]+(-real|-virtual)?(;[0-9]+(-real|-virtual)?)*")
MIN_VERSION_FILE = "plugin-ep-cuda/MIN_ONNXRUNTIME_VERSION"
PLUGIN_VERSION_FILE = "plugin-ep-cuda/VERSION_NUMBER"
BUILD_TARGET = "onnxruntime_providers_cuda_plugin"
KIB_PER_GB = 1024 * 1024


def first_line(path: str, needed_for: str) -> str:
    if not Path(path).is_file():
        fail(f"{Path.cwd().as_posix()}/{path} is missing, so {needed_for}")
    lines = Path(path).read_text().splitlines()
    return lines[0].strip() if lines else ""


def check_architectures(env: Mapping[str, str]) -> None:
    """recipe/recipe.yaml has no list for a CUDA version the config neither lists nor derives one for."""
    architectures = env.get("CUDA_ARCHITECTURES", "")
    cuda = env.get("CUDA_COMPILER_VERSION", "")
    if not ARCHITECTURE_LIST.fullmatch(architectures):
        fail(f"CUDA_ARCHITECTURES='{architectures}' is not a list like 75-real;80-real;121, so the recipe has no "
             f'GPU architecture list for CUDA {cuda}: add cuda.versions."{cuda}" to config/feedstock.yaml '
             "and re-render")


def check_floor(env: Mapping[str, str]) -> None:
    """The floor in the recipe must be upstream's."""
    floor = env["ORT_MIN_CORE_VERSION"]
    upstream = first_line(MIN_VERSION_FILE, f"the recipe's min_core_version {floor} cannot be checked against "
                                            "upstream's floor")
    if upstream != floor:
        fail(f"upstream's {MIN_VERSION_FILE} says '{upstream}' but the recipe's min_core_version is '{floor}': "
             "set min_core_version in config/feedstock.yaml to upstream's value and re-render")


def free_memory_kib(env: Mapping[str, str]) -> int:
    """What the build machine's memory holds now, in KiB."""
    if is_windows(env):
        # FreePhysicalMemory is in KiB like unix's MemAvailable; Windows PowerShell is on every Windows runner
        query = "(Get-CimInstance Win32_OperatingSystem).FreePhysicalMemory"
        powershell = shutil.which("powershell", path=env.get("PATH"))
        said = "" if powershell is None else subprocess.run(
            [powershell, "-NoProfile", "-Command", query], capture_output=True, text=True, env=dict(env),
            check=False).stdout.strip()
        source = "PowerShell's Win32_OperatingSystem FreePhysicalMemory"
    else:
        meminfo = Path("/proc/meminfo").read_text().splitlines()
        said = next((line.split()[1] for line in meminfo if line.startswith("MemAvailable:")), "")
        source = "/proc/meminfo's MemAvailable"
    if not said.isdigit():
        fail(f"{source} is '{said}', so the number of parallel nvcc compiles cannot be sized")
    return int(said)


def build_jobs(env: Mapping[str, str], free_kib: int) -> int:
    """How many compiles at once: the recipe's cap, the runner's cores, and what its memory holds at
    NVCC_GB_PER_THREAD for each of the NVCC_THREADS threads of a compile (config/feedstock.yaml says why);
    at least one, however little is free."""
    cap = int(env["CUDA_BUILD_JOBS"])
    cores = int(env.get("CPU_COUNT") or cap)
    memory = free_kib // KIB_PER_GB // (int(env["NVCC_THREADS"]) * int(env["NVCC_GB_PER_THREAD"]))
    return max(1, min(cap, cores, memory))


def plugin_cmake_args(env: Mapping[str, str]) -> list[str]:
    plugin_version = first_line(PLUGIN_VERSION_FILE, "the plugin's own version cannot be set")
    if is_windows(env):
        # cuda-cudart-dev, libcublas-dev, libcufft-dev and cudnn all install into the host's Library
        cuda_home = cudnn_home = env["LIBRARY_PREFIX"]
        # named the way upstream's tools/ci_build/build.py names it. Its folder already leads PATH:
        # rattler-build activates the host and then the build environment, so
        # conda-forge/onnxruntime-feedstock's PATH prepend (build-ep-cuda.nu @ f928e5bc) is not repeated
        nvcc = env["BUILD_PREFIX"].replace("\\", "/") + "/Library/bin/nvcc.exe"
        platform_args = []
    else:
        if target_platform(env) not in CUDA_TARGETS:
            fail(f"no CUDA target directory is known for {target_platform(env)}")
        cuda_home = f"{env['PREFIX']}/targets/{CUDA_TARGETS[target_platform(env)]}"
        cudnn_home = env["PREFIX"]
        # the build machine's nvcc, also when cross-compiling
        nvcc = f"{env['BUILD_PREFIX']}/bin/nvcc"
        platform_args = [
            # the SM90 TMA units compile SM90_TMA_JOBS at a time, beside the other jobs (the file says why).
            # With MSVC as the host compiler ORT compiles them without their kernels (COMPILE_HOPPER_TMA_GEMMS
            # undefined, cmake/onnxruntime_providers_cuda_plugin.cmake), so Windows needs no such pool.
            f"-DCMAKE_PROJECT_onnxruntime_INCLUDE={env['RECIPE_DIR']}/cmake/sm90_tma_job_pool.cmake",
            f"-DCONDA_FORGE_SM90_TMA_JOBS={env['SM90_TMA_JOBS']}",
            # upstream hides the plugin's C and C++ symbols; its CUDA objects' host stubs are hidden here too
            "-DCMAKE_CUDA_VISIBILITY_PRESET=hidden",
            f"-DCUDAToolkit_ROOT={cuda_home}",
            # nvcc's host compiler in every nvcc command of the graph, not only in the activation's
            # NVCC_PREPEND_FLAGS: without it, an nvcc run outside that environment compiled for the build
            # machine's targets/x86_64-linux (seen in the linux-aarch64 rehearsal's first nvcc units)
            f"-DCMAKE_CUDA_HOST_COMPILER={env['CXX']}",
            # once CUDA is enabled, FindCUDAToolkit locates the toolkit from nvcc (in BUILD_PREFIX) and
            # ignores CUDAToolkit_ROOT; the library headers are in the host prefix
            f"-DCMAKE_CUDA_TOOLKIT_INCLUDE_DIRECTORIES={cuda_home}/include",
        ]
    return [
        "-Donnxruntime_USE_CUDA=ON",
        "-Donnxruntime_BUILD_CUDA_EP_AS_PLUGIN=ON",
        # the plugin alone: no Python bindings, no core library, no tests
        "-Donnxruntime_ENABLE_PYTHON=OFF",
        "-Donnxruntime_BUILD_SHARED_LIB=OFF",
        "-Donnxruntime_BUILD_UNIT_TESTS=OFF",
        # the plugin's own version, as upstream's release builds of it report it (README says why)
        f"-Donnxruntime_PLUGIN_EP_VERSION={plugin_version}",
        # nvcc --threads per compile job: with build_jobs() jobs this bounds the runner's memory use
        f"-Donnxruntime_NVCC_THREADS={env['NVCC_THREADS']}",
        # No FP4 QMoE kernels, which upstream builds by default from CUDA 12.8 on. They serve one operator,
        # QMoE with FP4 (NVFP4) expert weights, on Hopper and Blackwell, and took too large a share of the
        # plugin's nvcc units and of the runner's time for that (docs/build-cost/2026-12-02.md has the cost).
        "-Donnxruntime_USE_FP4_QMOE=OFF",
        # the recipe's list for this CUDA version and platform, overriding the CUDAARCHS nvcc's activation sets
        f"-DCMAKE_CUDA_ARCHITECTURES={env['CUDA_ARCHITECTURES']}",
        f"-Donnxruntime_CUDA_HOME={cuda_home}",
        f"-Donnxruntime_CUDNN_HOME={cudnn_home}",
        f"-DCMAKE_CUDA_COMPILER={nvcc}",
        *platform_args,
    ]


def plugin_linker_flags(env: Mapping[str, str]) -> str:
    flags = linker_flags(env)
    if is_windows(env):
        return flags
    # the plugin exports CreateEpFactories and ReleaseEpFactory alone: ONNX Runtime's static libraries,
    # libstdc++'s templates and cuFFT's stubs would otherwise add their symbols (plugin_exports.map says why).
    # -z nodelete: once loaded, the library stays loaded until the process ends. The 1.30.0 core registers a
    # plugin by loading it, unloading it and loading it again; where something else in the process keeps the
    # CUDA runtime loaded (torch imported first), every kernel of the reloaded plugin then failed or hung
    # (docs/gpu-runs/2026-12-01-fourth-run.md).
    return f"{flags} -Wl,--version-script={env['RECIPE_DIR']}/plugin_exports.map -Wl,-z,nodelete".strip()


def install(env: Mapping[str, str]) -> None:
    windows = is_windows(env)
    built = "onnxruntime_providers_cuda.dll" if windows else "libonnxruntime_providers_cuda.so"
    library = Path(env["ORT_BUILD_DIR"], built)
    if not library.is_file():
        fail(f"the build left no {env['ORT_BUILD_DIR']}/{built}; did upstream change the plugin's OUTPUT_NAME "
             "(cmake/onnxruntime_providers_cuda_plugin.cmake)?")
    installed = Path(env["PREFIX"], env["PLUGIN_INSTALL_PATH"])
    installed.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(library, installed)
    # the manifest through which `import onnxruntime` registers the plugin (rendered by scripts/render.py)
    manifests = Path(env["PREFIX"], env["PLUGIN_MANIFEST_DIR"])
    manifests.mkdir(parents=True, exist_ok=True)
    shutil.copy2(Path(env["RECIPE_DIR"], "ep-plugins", "win" if windows else "unix", env["PLUGIN_MANIFEST"]), manifests)
    # No pause for lingering file handles before packaging on Windows: rattler-build retries removing a locked
    # work directory (os error 5 and 32) since 0.41.0 (prefix-dev/rattler-build#1589, which closed #1431, the
    # reason for conda-forge/onnxruntime-feedstock's 30 s sleep), and conda-forge's CI installs the current
    # rattler-build (conda-smithy pins none)


def main(env: dict[str, str]) -> None:
    # --- environment
    os.chdir(env["SRC_DIR"])
    check_architectures(env)
    check_floor(env)
    jobs = build_jobs(env, free_memory_kib(env))
    env["LDFLAGS"] = plugin_linker_flags(env)
    # --- configure
    configure(env, plugin_cmake_args(env))
    # --- build
    stop_here_if_rehearsed(env, [BUILD_TARGET])
    run(["cmake", "--build", env["ORT_BUILD_DIR"], "--target", BUILD_TARGET, "--parallel", str(jobs)], env)
    # --- install
    install(env)


if __name__ == "__main__":
    main(dict(os.environ))
