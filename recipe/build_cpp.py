"""onnxruntime-cpp: ONNX Runtime's C/C++ shared library, headers and CMake package, with the CPU
execution provider only (CUDA comes from the onnxruntime-ep-cuda plugin). One script for unix and
Windows: rattler-build runs it with the build environment's Python.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from cmake_common import configure, is_windows, linker_flags, run, stop_here_if_rehearsed

BUILD_TARGETS = ["all"]


def main(env: dict[str, str]) -> None:
    # --- environment
    os.chdir(env["SRC_DIR"])
    env["LDFLAGS"] = linker_flags(env)
    # the unit tests have to run on the build machine
    unit_tests = "OFF" if env.get("CONDA_BUILD_CROSS_COMPILATION") == "1" else "ON"
    if is_windows(env):
        install_prefix = Path(env["LIBRARY_PREFIX"])
        test_runner = "onnx_test_runner.exe"
        platform_args = [
            # googletest defaults to the static runtime, everything else here uses the DLL one
            "-Dgtest_force_shared_crt=ON",
            # the core becomes onnxruntime_conda.dll, and the one unit test that loads it as onnxruntime.dll
            # is disabled (the file says why)
            "-DCMAKE_PROJECT_onnxruntime_INCLUDE={}/cmake/rename_core_library.cmake".format(
                env["RECIPE_DIR"].replace("\\", "/")),
        ]
    else:
        install_prefix = Path(env["PREFIX"])
        test_runner = "onnx_test_runner"
        platform_args = []

    # --- configure
    # Nothing here touches the version: ORT reads it from VERSION_NUMBER, and the CUDA plugin needs a
    # core whose version string is plain X.Y.Z.
    configure(env, ["-Donnxruntime_BUILD_SHARED_LIB=ON", "-Donnxruntime_ENABLE_PYTHON=OFF",
                    f"-Donnxruntime_BUILD_UNIT_TESTS={unit_tests}", *platform_args])

    # --- build
    stop_here_if_rehearsed(env, BUILD_TARGETS)
    run(["cmake", "--build", env["ORT_BUILD_DIR"], "--target", *BUILD_TARGETS], env)

    # --- test
    if unit_tests == "ON":
        # RegexFullMatch.NonUtf8Pattern writes invalid UTF-8 to stderr, which breaks rattler-build's log output
        run(["ctest", "--test-dir", env["ORT_BUILD_DIR"], "--output-on-failure"],
            {**env, "GTEST_FILTER": "-RegexFullMatch.NonUtf8Pattern"})

    # --- install
    run(["cmake", "--install", env["ORT_BUILD_DIR"], "--prefix", str(install_prefix)], env)
    # ORT installs its model-test runner whenever the unit tests are built: a test tool, not the library
    (install_prefix / "bin" / test_runner).unlink(missing_ok=True)
    # the source tree's header layout as well, which conda-forge's earlier onnxruntime-cpp builds shipped:
    # code written for them includes <onnxruntime/core/session/onnxruntime_cxx_api.h>
    shutil.copytree(Path("include", "onnxruntime"), install_prefix / "include" / "onnxruntime", dirs_exist_ok=True)


if __name__ == "__main__":
    main(dict(os.environ))
