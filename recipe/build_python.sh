#!/usr/bin/env bash
# onnxruntime (Python), CPU execution provider only: builds the bindings module with ORT linked in
# statically, packs it with upstream's setup.py, installs the wheel, then adds conda-forge's EP plugin
# auto-registration.
set -euxo pipefail

# --- environment
cd "${SRC_DIR}"
# shellcheck source=SCRIPTDIR/cmake_common.sh
source "${RECIPE_DIR}/cmake_common.sh"

# setup.py reads VERSION_NUMBER and the package tree from the build directory, where it runs
bdist_wheel=("${PYTHON}" "${SRC_DIR}/setup.py" bdist_wheel)
if [[ "${CONDA_BUILD_CROSS_COMPILATION:-0}" == 1 ]]; then
    # FindPython has to run an interpreter of the build machine; the target's headers come from
    # cross-python's $PYTHON, which reports the target's paths
    # asked one at a time: inside an array a failing interpreter would go unnoticed (shellcheck SC2312)
    python_include="$("${PYTHON}" -c 'import sysconfig; print(sysconfig.get_path("include"))')"
    numpy_include="$("${PYTHON}" -c 'import numpy; print(numpy.get_include())')"
    python_cmake_args=(
        -DPython_EXECUTABLE="${BUILD_PREFIX}/bin/python"
        -DPython_INCLUDE_DIR="${python_include}"
        -DPython_NumPy_INCLUDE_DIR="${numpy_include}"
    )
    case "${target_platform}" in
        linux-aarch64) bdist_wheel+=(--plat-name linux_aarch64) ;;
        *) echo "ERROR: no wheel platform tag is known for cross-compiling to ${target_platform}" >&2; exit 1 ;;
    esac
else
    python_cmake_args=(-DPython_EXECUTABLE="${PYTHON}")
fi

# --- configure
# in the recipe's build folder, ORT_BUILD_DIR: the recipe lists the licence files of what ORT fetches there
# shellcheck disable=SC2086  # CMAKE_ARGS is conda-forge's space-separated list of toolchain flags
cmake -S cmake -B "${ORT_BUILD_DIR}" -G Ninja ${CMAKE_ARGS} \
    "${ort_common_cmake_args[@]}" \
    -Donnxruntime_ENABLE_PYTHON=ON \
    -Donnxruntime_BUILD_SHARED_LIB=OFF \
    -Donnxruntime_BUILD_UNIT_TESTS=OFF \
    "${python_cmake_args[@]}"

# --- build
# its POST_BUILD steps lay out the Python package in the build folder's onnxruntime/
build_targets=(onnxruntime_pybind11_state)
if [[ "${target_platform}" != osx-* ]]; then
    # onnxruntime_pybind11_state's POST_BUILD step copies this library into the package tree without
    # depending on it (cmake/onnxruntime_python.cmake), so it must exist first; macOS does not build it
    build_targets=(onnxruntime_providers_shared "${build_targets[@]}")
fi
stop_here_if_rehearsed "${build_targets[@]}"
# one target at a time: given both at once, ninja would build them side by side
for target in "${build_targets[@]}"; do
    cmake --build "${ORT_BUILD_DIR}" --target "${target}"
done

# --- install
cd "${ORT_BUILD_DIR}"
"${bdist_wheel[@]}"
"${PYTHON}" -m pip install --no-deps --no-build-isolation dist/*.whl

# conda-forge's auto-registration of the EP plugins installed in this environment: copies
# ep_autoregister.py to onnxruntime/_conda_ep_autoregister.py, appends init_hook.py to
# onnxruntime/__init__.py and adds the upstream-compatible onnxruntime_ep_cuda helper package
"${PYTHON}" "${RECIPE_DIR}/python/install_autoregistration.py" "${SP_DIR}"
