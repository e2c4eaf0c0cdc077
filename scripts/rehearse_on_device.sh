#!/usr/bin/env bash
# The full build rehearsal, on a machine with 16 cores, a CUDA 13.0 toolkit in /usr/local/cuda-13.0 and
# no network: onnxruntime-cpp built completely by the recipe's build_cpp.sh (unit tests included) and
# then checked by its recipe tests, then as much of the plugin (build_ep_cuda.sh) as the time allows.
# The sources do not fit in one transfer to such a machine, so the steps are separate calls:
#   rehearse_on_device.sh pack SHARED DEST   (here) lay the sources out in DEST/sources and DEST/mirror
#   rehearse_on_device.sh stage DIR   (there) copy a carried folder of sources to the machine's /tmp
#   rehearse_on_device.sh start       run the rehearsal detached (it outlives the call that starts it)
#   rehearse_on_device.sh report      copy what it has written so far into $OUT
set -euxo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
top=/tmp/rehearsal
stage="${top}/stage"
results="${top}/results"

stage_folder() {
    mkdir -p "${stage}"
    rm -rf "${stage:?}/$(basename "$1")"
    cp -r "$1" "${stage}/"
}

# rattler-build's build environment for one output: the variables the recipe's scripts read
build_env() {
    local output_dir="$1"
    export SRC_DIR="${output_dir}/src" RECIPE_DIR="${repo}/recipe"
    export PREFIX="${output_dir}/prefix" BUILD_PREFIX="${output_dir}/build_prefix"
    export PKG_VERSION CPU_COUNT target_platform=linux-64 build_platform=linux-64
    PKG_VERSION="$(python3 -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["context"]["version"])' "${RECIPE_DIR}/recipe.yaml")"
    CPU_COUNT="$(nproc)"
    mkdir -p "${PREFIX}" "${BUILD_PREFIX}/bin"
    rm -rf "${SRC_DIR}"
    mkdir -p "${SRC_DIR}"
    zstd -dc "${stage}"/sources/onnxruntime-*-src.tar.zst | tar -x -C "${SRC_DIR}" --strip-components=1
    # protoc 3.21 for the build machine, as conda-forge's libprotobuf 3.21 brings it
    mkdir -p "${BUILD_PREFIX}/debian"
    for deb in "${stage}"/sources/debs/*.deb; do
        dpkg -x "${deb}" "${BUILD_PREFIX}/debian"
    done
    printf '#!/bin/sh\nLD_LIBRARY_PATH="%s" exec "%s" "$@"\n' \
        "${BUILD_PREFIX}/debian/usr/lib/x86_64-linux-gnu" "${BUILD_PREFIX}/debian/usr/bin/protoc" \
        >"${BUILD_PREFIX}/bin/protoc"
    chmod +x "${BUILD_PREFIX}/bin/protoc"
    # conda-forge's toolchain arguments, with the dependency archives read from ORT's offline mirror and
    # never from the system (the machine's own packages must not stand in for ORT's pinned sources)
    export CMAKE_ARGS="-DCMAKE_INSTALL_PREFIX=${PREFIX} -DCMAKE_INSTALL_LIBDIR=lib -DCMAKE_PROGRAM_PATH=${BUILD_PREFIX}/bin;${PREFIX}/bin -Donnxruntime_CMAKE_DEPS_MIRROR_DIR=${stage}/mirror -DFETCHCONTENT_TRY_FIND_PACKAGE_MODE=NEVER"
    export PATH="${BUILD_PREFIX}/bin:${PATH}"
}

# the test cases SOURCES.yaml names as loading test models that the stored source lacks
model_test_exclusions() {
    python3 - "${stage}/sources/SOURCES.yaml" <<'EOF'
import sys, yaml
cases = yaml.safe_load(open(sys.argv[1]))["onnxruntime"]["unit_tests_that_need_them"]
print(":".join(case for program in cases.values() for case in program))
EOF
}

# the package_contents entries of onnxruntime-cpp's recipe tests, resolved for linux-64
check_package_contents() {
    python3 - "${RECIPE_DIR}/recipe.yaml" "${PREFIX}" <<'EOF'
import os, sys, yaml
recipe, prefix = yaml.safe_load(open(sys.argv[1])), sys.argv[2]
selectors = {"unix": True, "linux": True, "win": False, "osx": False}
def items(entries):
    for entry in entries if isinstance(entries, list) else [entries]:
        if isinstance(entry, dict):
            yield from items(entry["then"] if selectors[entry["if"]] else entry.get("else", []))
        else:
            yield entry
output = next(o for o in recipe["outputs"] if o["package"]["name"] == "onnxruntime-cpp")
missing = 0
for test in output["tests"]:
    contents = test.get("package_contents")
    for section, paths in (contents or {}).items():
        for path in items(paths):
            wanted = {"include": [f"include/{path}"], "lib": [f"lib/lib{path}.so"], "files": [path]}[section]
            found = all(os.path.exists(os.path.join(prefix, p)) for p in wanted)
            missing += not found
            print(f"package_contents {section}: {path}: {'found' if found else 'MISSING'}")
sys.exit(1 if missing else 0)
EOF
}

rehearse_cpp() {
    build_env "${top}/cpp"
    local start
    start="$(date +%s)"
    echo "model_test_exclusions: $(model_test_exclusions)" >"${results}/cpp-summary.txt"
    (
        cd "${SRC_DIR}"
        ORT_EXTRA_GTEST_EXCLUSIONS="$(model_test_exclusions)" bash -x "${RECIPE_DIR}/build_cpp.sh"
    ) >"${results}/cpp-build.log" 2>&1 && status=0 || status=$?
    {
        echo "build_cpp.sh: rc ${status}, $(( $(date +%s) - start )) s on $(nproc) cores"
        grep -E "tests passed|tests failed out of" "${results}/cpp-build.log" || echo "ctest: no summary line"
    } >>"${results}/cpp-summary.txt"
    [[ "${status}" == 0 ]] || return 0
    (check_package_contents && cd "${RECIPE_DIR}" && bash test_cpp/run.sh) \
        >"${results}/cpp-recipe-tests.log" 2>&1 && status=0 || status=$?
    echo "recipe tests (package_contents, test_cpp/run.sh): rc ${status}" >>"${results}/cpp-summary.txt"
}

rehearse_plugin() {
    build_env "${top}/plugin"
    local cuda=/usr/local/cuda-13.0 target_dir="${PREFIX}/targets/x86_64-linux"
    # the toolkit in the layout conda's cuda-* packages give: nvcc and its tools in BUILD_PREFIX, the
    # target's headers and libraries (the driver stub included) under PREFIX/targets/<arch>
    for entry in "${cuda}"/*; do
        [[ "$(basename "${entry}")" == bin ]] || ln -sfn "${entry}" "${BUILD_PREFIX}/"
    done
    ln -sf "${cuda}"/bin/* "${BUILD_PREFIX}/bin/"
    mkdir -p "${PREFIX}/targets" "${PREFIX}/include" "${PREFIX}/lib"
    ln -sfn "${cuda}/targets/x86_64-linux" "${target_dir}"
    # cuDNN's headers and libraries, as conda's cudnn lays them out in PREFIX, from the machine's wheel
    cudnn="$(python3 -c 'import nvidia.cudnn; print(list(nvidia.cudnn.__path__)[0])')"
    ln -sf "${cudnn}"/include/* "${PREFIX}/include/"
    ln -sf "${cudnn}"/lib/* "${PREFIX}/lib/"
    mkdir -p "${top}/trees"
    zstd -dc "${stage}/sources/cutlass-cudnn_frontend-trees.tar.zst" | tar -x -C "${top}/trees"
    # a FETCHCONTENT_SOURCE_DIR skips FetchContent's patch step, so ORT's cutlass patch is applied here
    patch -d "${top}/trees/cutlass" -p1 <"${SRC_DIR}/cmake/patches/cutlass/cutlass_4.7.0.patch"
    CMAKE_ARGS="${CMAKE_ARGS} -DFETCHCONTENT_SOURCE_DIR_CUTLASS=${top}/trees/cutlass -DFETCHCONTENT_SOURCE_DIR_CUDNN_FRONTEND=${top}/trees/cudnn_frontend"
    export CUDA_ARCHITECTURES NVCC_THREADS ORT_MIN_CORE_VERSION CUDA_BUILD_JOBS NVCC_GB_PER_THREAD
    eval "$(python3 - "${RECIPE_DIR}/recipe.yaml" <<'EOF'
import re, sys, yaml
recipe = yaml.safe_load(open(sys.argv[1]))
plugin = next(o for o in recipe["outputs"] if o["package"]["name"] == "onnxruntime-ep-cuda")
env = plugin["build"]["script"]["env"]
# the context's list for CUDA 13.0 on linux-64, read from its conditional expression
archs = re.search(r'"([^"]*)" if cuda_compiler_version == "13.0" and target_platform in \[[^]]*"linux-64"', recipe["context"]["cuda_architectures"]).group(1)
print(f"CUDA_ARCHITECTURES='{archs}' ORT_MIN_CORE_VERSION='{recipe['context']['min_core_version']}'")
print(" ".join(f"{k}='{env[k]}'" for k in ("NVCC_THREADS", "NVCC_GB_PER_THREAD", "CUDA_BUILD_JOBS")))
EOF
)"
    local start
    start="$(date +%s)"
    echo "CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES}" >"${results}/plugin-summary.txt"
    (cd "${SRC_DIR}" && bash -x "${RECIPE_DIR}/build_ep_cuda.sh") >"${results}/plugin-build.log" 2>&1 \
        && status=0 || status=$?
    echo "build_ep_cuda.sh: rc ${status}, $(( $(date +%s) - start )) s" >>"${results}/plugin-summary.txt"
}

# compiles of the plugin's graph done so far, out of all it needs (ninja's own list of the target's commands)
plugin_progress() {
    local tree="${top}/plugin/src/build-ep-cuda"
    [[ -f "${tree}/build.ninja" ]] || { echo "plugin: not configured yet"; return 0; }
    local commands
    commands="$(ninja -C "${tree}" -t commands onnxruntime_providers_cuda_plugin)"
    echo "objects on disk: $(find "${tree}" -name '*.o' | wc -l)" \
        "of $(grep -c -- ' -c ' <<<"${commands}") compiles in the plugin's graph"
    echo "nvcc objects on disk: $(find "${tree}" -name '*.cu.o' | wc -l)" \
        "of $(grep -c 'bin/nvcc' <<<"${commands}") nvcc compiles"
    grep -A3 '^FAILED' "${results}/plugin-build.log" || echo "no failed step"
}

# here, before the calls: the sources in two folders that each fit one transfer
pack() {
    local shared="$1" dest="$2"
    mkdir -p "${dest}/sources/debs" "${dest}/mirror"
    cp "${shared}"/upstream/onnxruntime-*-src.tar.zst "${shared}/upstream/cutlass-cudnn_frontend-trees.tar.zst" \
        "${shared}/upstream/SOURCES.yaml" "${dest}/sources/"
    (cd "${dest}/sources/debs" && apt-get download protobuf-compiler libprotoc32 libprotobuf32)
    # that machine has no zstd to unpack the sources with
    mkdir -p "${dest}/sources/tools"
    (cd "${dest}/sources/tools" && apt-get download zstd)
    cp -r "${shared}/upstream/mirror/." "${dest}/mirror/"
}

case "${1:-}" in
    pack) pack "$2" "$3" ;;
    stage) stage_folder "$2" ;;
    start)
        mkdir -p "${results}"
        if ! command -v zstd; then
            dpkg -x "${stage}"/sources/tools/zstd_*.deb "${top}/tools"
            export PATH="${top}/tools/usr/bin:${PATH}"
        fi
        setsid bash -c "source '${BASH_SOURCE[0]}' functions; rehearse_cpp; rehearse_plugin" \
            >"${results}/driver.log" 2>&1 </dev/null &
        ;;
    report)
        cp "${results}"/*summary.txt "${OUT}/" 2>/dev/null || true
        for log in "${results}"/*.log; do
            tail -c 200000 "${log}" >"${OUT}/$(basename "${log}")"
        done
        plugin_progress >"${OUT}/plugin-progress.txt" 2>&1 || true
        cat "${OUT}"/*summary.txt "${OUT}/plugin-progress.txt" || true
        ;;
    functions) ;;
    *) echo "usage: $0 pack SHARED DEST | stage DIR | start | report" >&2; exit 2 ;;
esac
