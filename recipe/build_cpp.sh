#!/usr/bin/env bash
# onnxruntime-cpp: ONNX Runtime's C/C++ shared library, headers and CMake package, with the CPU
# execution provider only (CUDA comes from the onnxruntime-ep-cuda plugin).
set -euxo pipefail

# --- environment
cd "${SRC_DIR}"
# shellcheck source=SCRIPTDIR/cmake_common.sh
source "${RECIPE_DIR}/cmake_common.sh"

# the unit tests have to run on the build machine
if [[ "${CONDA_BUILD_CROSS_COMPILATION:-0}" == 1 ]]; then
    unit_tests=OFF
else
    unit_tests=ON
fi

# --- configure
# Nothing here touches the version: ORT reads it from VERSION_NUMBER, and the CUDA plugin needs a
# core whose version string is plain X.Y.Z.
# in the recipe's build folder, ORT_BUILD_DIR: the recipe lists the licence files of what ORT fetches there
# shellcheck disable=SC2086  # CMAKE_ARGS is conda-forge's space-separated list of toolchain flags
cmake -S cmake -B "${ORT_BUILD_DIR}" -G Ninja ${CMAKE_ARGS} \
    "${ort_common_cmake_args[@]}" \
    -Donnxruntime_BUILD_SHARED_LIB=ON \
    -Donnxruntime_ENABLE_PYTHON=OFF \
    -Donnxruntime_BUILD_UNIT_TESTS="${unit_tests}"

# --- build
build_targets=(all)
stop_here_if_rehearsed "${build_targets[@]}"
cmake --build "${ORT_BUILD_DIR}" --target "${build_targets[@]}"

# --- test
if [[ "${unit_tests}" == ON ]]; then
    # RegexFullMatch.NonUtf8Pattern writes invalid UTF-8 to stderr, which breaks rattler-build's log output
    GTEST_FILTER="-RegexFullMatch.NonUtf8Pattern" \
        ctest --test-dir "${ORT_BUILD_DIR}" --output-on-failure
fi

# --- install
cmake --install "${ORT_BUILD_DIR}" --prefix "${PREFIX}"
# ORT installs its model-test runner whenever the unit tests are built: a test tool, not the library
rm -f "${PREFIX}/bin/onnx_test_runner"
# the source tree's header layout as well, which conda-forge's earlier onnxruntime-cpp builds shipped:
# code written for them includes <onnxruntime/core/session/onnxruntime_cxx_api.h>
mkdir -p "${PREFIX}/include"
cp -R include/onnxruntime "${PREFIX}/include/"
