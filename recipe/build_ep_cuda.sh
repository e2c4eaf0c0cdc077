#!/usr/bin/env bash
# onnxruntime-ep-cuda: ONNX Runtime's CUDA execution provider as a standalone plugin library, which any
# core from ORT_MIN_CORE_VERSION up loads. The only nvcc work in this feedstock. Builds one target and
# copies it (a full `cmake --install` would need every target of the tree).
set -euxo pipefail

# --- environment
cd "${SRC_DIR}"
# shellcheck source=SCRIPTDIR/cmake_common.sh
source "${RECIPE_DIR}/cmake_common.sh"

case "${target_platform}" in
    linux-64) cuda_target=x86_64-linux ;;
    linux-aarch64) cuda_target=sbsa-linux ;;
    *) echo "ERROR: no CUDA target directory is known for ${target_platform}" >&2; exit 1 ;;
esac
# where cuda-cudart-dev, libcublas-dev and libcufft-dev put the target's CUDA headers and libraries
cuda_root="${PREFIX}/targets/${cuda_target}"

# --- guard: a GPU architecture list CMake can use. An empty one would silently build for CMake's default
# (recipe/recipe.yaml has none for a CUDA version the config neither lists nor derives one for)
if [[ ! "${CUDA_ARCHITECTURES:-}" =~ ^[0-9]+(-real|-virtual)?(\;[0-9]+(-real|-virtual)?)*$ ]]; then
    echo "ERROR: CUDA_ARCHITECTURES='${CUDA_ARCHITECTURES:-}' is not a list like 75-real;80-real;121, so the" \
        "recipe has no GPU architecture list for CUDA ${CUDA_COMPILER_VERSION:-}: add" \
        "cuda.versions.\"${CUDA_COMPILER_VERSION:-}\" to config/feedstock.yaml and re-render" >&2
    exit 1
fi

# --- guard: the floor in the recipe must be upstream's
min_version_file="plugin-ep-cuda/MIN_ONNXRUNTIME_VERSION"
if [[ ! -f "${min_version_file}" ]]; then
    echo "ERROR: ${SRC_DIR}/${min_version_file} is missing, so the recipe's min_core_version" \
        "${ORT_MIN_CORE_VERSION} cannot be checked against upstream's floor" >&2
    exit 1
fi
source_min_version="$(head -n 1 "${min_version_file}" | tr -d '[:space:]')"
if [[ "${source_min_version}" != "${ORT_MIN_CORE_VERSION}" ]]; then
    echo "ERROR: upstream's ${min_version_file} says '${source_min_version}' but the recipe's" \
        "min_core_version is '${ORT_MIN_CORE_VERSION}': set min_core_version in config/feedstock.yaml" \
        "to upstream's value and re-render" >&2
    exit 1
fi

# the plugin exports CreateEpFactories and ReleaseEpFactory alone: ONNX Runtime's static libraries,
# libstdc++'s templates and cuFFT's stubs would otherwise add their symbols (plugin_exports.map says why).
# -z nodelete: once loaded, the library stays loaded until the process ends. The 1.30.0 core registers a
# plugin by loading it, unloading it and loading it again; where something else in the process keeps the
# CUDA runtime loaded (torch imported first), every kernel of the reloaded plugin then failed or hung
# (docs/gpu-runs/2026-12-01-fourth-run.md).
export LDFLAGS="${LDFLAGS:-} -Wl,--version-script=${RECIPE_DIR}/plugin_exports.map -Wl,-z,nodelete"

# how many compiles at once: the recipe's cap, the runner's cores, and what its memory holds at
# NVCC_GB_PER_THREAD for each of the NVCC_THREADS threads of a compile (config/feedstock.yaml says why)
build_jobs="${CUDA_BUILD_JOBS}"
memory_jobs="$(awk -v per_job="$(( NVCC_THREADS * NVCC_GB_PER_THREAD ))" \
    '/^MemAvailable:/ {print int($2 / 1048576 / per_job)}' /proc/meminfo)"
if [[ -z "${memory_jobs}" ]]; then
    echo "ERROR: /proc/meminfo has no MemAvailable, so the number of parallel nvcc compiles cannot be sized" >&2
    exit 1
fi
for limit in "${CPU_COUNT:-${build_jobs}}" "${memory_jobs}"; do
    if (( limit < build_jobs )); then
        build_jobs="${limit}"
    fi
done
if (( build_jobs < 1 )); then
    build_jobs=1
fi

# --- configure
plugin_cmake_args=(
    -Donnxruntime_USE_CUDA=ON
    -Donnxruntime_BUILD_CUDA_EP_AS_PLUGIN=ON
    # the plugin alone: no Python bindings, no core library, no tests
    -Donnxruntime_ENABLE_PYTHON=OFF
    -Donnxruntime_BUILD_SHARED_LIB=OFF
    -Donnxruntime_BUILD_UNIT_TESTS=OFF
    # the plugin's own version, as upstream's release builds of it report it (README says why)
    -Donnxruntime_PLUGIN_EP_VERSION="$(tr -d '[:space:]' < plugin-ep-cuda/VERSION_NUMBER)"
    # nvcc --threads per compile job: with build_jobs jobs this bounds the runner's memory use
    -Donnxruntime_NVCC_THREADS="${NVCC_THREADS}"
    # No FP4 QMoE kernels, which upstream builds by default from CUDA 12.8 on. They serve one operator,
    # QMoE with FP4 (NVFP4) expert weights, on Hopper and Blackwell, and measured at the CUDA 13.0 linux-64
    # list they are 299 of the plugin's 587 nvcc units, 17 of its 55 nvcc CPU-hours and 67 of its 411 MB:
    # with them the job was predicted at 7.86 h against the runner's 8 (docs/build-cost/2026-12-02.md).
    -Donnxruntime_USE_FP4_QMOE=OFF
    # the SM90 TMA units compile SM90_TMA_JOBS at a time, beside the other jobs (the file says why)
    -DCMAKE_PROJECT_onnxruntime_INCLUDE="${RECIPE_DIR}/cmake/sm90_tma_job_pool.cmake"
    -DCONDA_FORGE_SM90_TMA_JOBS="${SM90_TMA_JOBS}"
    # the recipe's list for this CUDA version and platform, overriding the CUDAARCHS nvcc's activation sets
    -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHITECTURES}"
    # upstream hides the plugin's C and C++ symbols; its CUDA objects' host stubs are hidden here too
    -DCMAKE_CUDA_VISIBILITY_PRESET=hidden
    -Donnxruntime_CUDA_HOME="${cuda_root}"
    -Donnxruntime_CUDNN_HOME="${PREFIX}"
    -DCUDAToolkit_ROOT="${cuda_root}"
    # the build machine's nvcc, also when cross-compiling
    -DCMAKE_CUDA_COMPILER="${BUILD_PREFIX}/bin/nvcc"
    # nvcc's host compiler in every nvcc command of the graph, not only in the activation's
    # NVCC_PREPEND_FLAGS: without it, an nvcc run outside that environment compiled for the build
    # machine's targets/x86_64-linux (seen in the linux-aarch64 rehearsal's first nvcc units)
    -DCMAKE_CUDA_HOST_COMPILER="${CXX}"
    # once CUDA is enabled, FindCUDAToolkit locates the toolkit from nvcc (in BUILD_PREFIX) and ignores
    # CUDAToolkit_ROOT; the library headers are in the host prefix
    -DCMAKE_CUDA_TOOLKIT_INCLUDE_DIRECTORIES="${cuda_root}/include"
)
# in the recipe's build folder, ORT_BUILD_DIR: the recipe lists the licence files of what ORT fetches there
# shellcheck disable=SC2086  # CMAKE_ARGS is conda-forge's space-separated list of toolchain flags
cmake -S cmake -B "${ORT_BUILD_DIR}" -G Ninja ${CMAKE_ARGS} \
    "${ort_common_cmake_args[@]}" \
    "${plugin_cmake_args[@]}"

# --- build
build_targets=(onnxruntime_providers_cuda_plugin)
stop_here_if_rehearsed "${build_targets[@]}"
cmake --build "${ORT_BUILD_DIR}" --target "${build_targets[@]}" --parallel "${build_jobs}"

# --- install
plugin_library="${ORT_BUILD_DIR}/libonnxruntime_providers_cuda.so"
if [[ ! -f "${plugin_library}" ]]; then
    echo "ERROR: the build left no ${plugin_library}; did upstream change the plugin's OUTPUT_NAME" \
        "(cmake/onnxruntime_providers_cuda_plugin.cmake)?" >&2
    exit 1
fi
installed_library="${PREFIX}/${PLUGIN_INSTALL_PATH}"
mkdir -p "$(dirname "${installed_library}")" "${PREFIX}/share/onnxruntime/ep-plugins"
cp "${plugin_library}" "${installed_library}"
# the manifest through which `import onnxruntime` registers the plugin (rendered by scripts/render.py)
cp "${RECIPE_DIR}/ep-plugins/unix/${PLUGIN_MANIFEST}" "${PREFIX}/share/onnxruntime/ep-plugins/"
