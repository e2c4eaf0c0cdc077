#!/usr/bin/env bash
# The plugin built by the recipe's build_ep_cuda.sh and tested on a GPU, on a machine with 16 cores, an
# NVIDIA GPU, the CUDA 13.0 toolkit in /usr/local/cuda-13.0, Python 3.12 with torch, onnx, pytest,
# pytest-xdist and pytest-timeout, and no network. Its inputs come in the bundles scripts/device/pack.py
# writes, one per call:
#   run.sh stage BUNDLE   copy a carried bundle into the machine's staging folder
#   run.sh start          run the pipeline detached (it outlives the call); it waits for its inputs,
#                         builds the plugin, then runs every test step under its own time limit (for a
#                         cost run, plan.json's purpose "cost": measures a sample of nvcc units instead)
#   run.sh wait SECONDS   print progress until the pipeline ends or SECONDS pass, then copy
#                         report.md, logs.tar.gz and a cost run's measurements.json into $OUT
#   run.sh step NAME SECONDS COMMAND...   one test step as the pipeline runs it (used by the tests)
# README.md ("Building and testing the plugin on a GPU") gives the calls. GPU_RUN_DIR (default
# /tmp/gpu-run) holds the staging folder, the work tree and the results.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "${here}/../.." && pwd)"
top="${GPU_RUN_DIR:-/tmp/gpu-run}"
stage="${top}/stage"
work="${top}/work"
results="${top}/results"
plan="${stage}/plan.json"
cuda_home=/usr/local/cuda-13.0
cuda_runtime="${cuda_home}/targets/x86_64-linux/lib"

usage() {
    echo "usage: $0 stage BUNDLE | start | wait SECONDS | step NAME SECONDS COMMAND..." >&2
    exit 2
}

note() {
    echo "$(date -u +%H:%M:%S) $*" | tee -a "${results}/progress.txt"
}

plan_get() {
    python3 -c 'import json, sys
value = json.load(open(sys.argv[1]))
for key in sys.argv[2:]:
    value = value[key]
print("\n".join(value) if isinstance(value, list) else value)' "${plan}" "$@"
}

# the entries of the plan's list KEY (build_inputs or test_inputs) not staged yet
missing() {
    local entry
    while read -r entry; do
        [[ -e "${stage}/${entry}" ]] || echo "${entry}"
    done < <(plan_get "$1")
}

wait_for_inputs() {
    local key="$1" deadline=$(( $(date +%s) + 1200 ))
    while [[ -n "$(missing "${key}")" ]]; do
        if (( $(date +%s) > deadline )); then
            note "ERROR: ${key} still missing after 20 minutes: $(missing "${key}" | tr '\n' ' ')"
            return 1
        fi
        sleep 5
    done
}

# One test step: COMMAND in a session of its own, its output in results/NAME.log, each line stamped
# with the seconds since the step started (`+12s `), so a log shows where a slow step spent its time.
# Past SECONDS the native stacks of its processes are dumped (cuda-gdb) and it gets SIGABRT, which
# Python's faulthandler answers with every thread's Python stack; then SIGKILL. One line per step in
# results/steps.tsv: name, exit status (124: timed out), seconds.
run_step() {
    local name="$1" limit="$2"
    shift 2
    local log="${results}/${name}.log" start status pid
    start="$(date +%s)"
    note "${name}: started, limit ${limit} s"
    # The stamping loop ignores SIGABRT, so it still writes the stacks the command prints when it gets one.
    # shellcheck disable=SC2016  # expanded by the step's own shell
    PYTHONFAULTHANDLER=1 PYTHONUNBUFFERED=1 setsid bash -c 'set -o pipefail
        "$@" 2>&1 | { trap "" ABRT; while IFS= read -r line || [[ -n "${line}" ]]; do
            printf "+%ds %s\n" "${SECONDS}" "${line}"; done; }' step "$@" >"${log}" 2>&1 </dev/null &
    pid=$!
    while kill -0 "${pid}" 2>/dev/null && (( $(date +%s) - start < limit )); do
        sleep 1
    done
    if kill -0 "${pid}" 2>/dev/null; then
        dump_native_stacks "${pid}" >>"${log}" 2>&1
        pkill -ABRT -s "${pid}" || true
        sleep 10
        pkill -KILL -s "${pid}" || true
        wait "${pid}" || true
        status=124
        echo "${name}: timed out after ${limit} s" >>"${log}"
    else
        wait "${pid}" && status=0 || status=$?
    fi
    printf '%s\t%s\t%s\n' "${name}" "${status}" "$(( $(date +%s) - start ))" >>"${results}/steps.tsv"
    note "${name}: exit ${status} after $(( $(date +%s) - start )) s"
}

dump_native_stacks() {
    local session="$1" pid
    echo "=== native stacks of the Python processes of session ${session} at its time limit"
    if ! command -v cuda-gdb >/dev/null; then
        echo "no cuda-gdb on this machine: no native stacks"
        return 0
    fi
    for pid in $(pgrep -s "${session}" python); do
        echo "--- $(tr '\0' ' ' <"/proc/${pid}/cmdline" 2>/dev/null | cut -c1-200)"
        timeout 60 cuda-gdb -q -batch -p "${pid}" -ex 'thread apply all bt 25' 2>&1 | grep -E '^(#|Thread)' | head -400
    done
}

# rattler-build's environment for build_ep_cuda.sh: SRC_DIR with the recipe's patches applied, PREFIX
# and BUILD_PREFIX laid out as conda's packages would lay them out, the script's env from the recipe,
# then the device's overrides from the plan, each printed
prepare_build() {
    export SRC_DIR="${work}/src" RECIPE_DIR="${repo}/recipe" PREFIX="${work}/prefix"
    export BUILD_PREFIX="${work}/build_prefix" target_platform=linux-64 build_platform=linux-64
    export PKG_VERSION CPU_COUNT
    PKG_VERSION="$(plan_get version)"
    CPU_COUNT="$(nproc)"
    rm -rf "${work}"
    mkdir -p "${SRC_DIR}" "${PREFIX}/lib" "${PREFIX}/include" "${PREFIX}/targets" "${BUILD_PREFIX}/bin" "${work}/tools"
    if ! command -v zstd >/dev/null; then
        dpkg -x "${stage}"/debs/zstd_*.deb "${work}/tools"
        export PATH="${work}/tools/usr/bin:${PATH}"
    fi
    zstd -dc "${stage}"/sources/onnxruntime-*-src.tar.zst | tar -x -C "${SRC_DIR}" --strip-components=1
    local patch_file
    while read -r patch_file; do
        patch -d "${SRC_DIR}" -p1 <"${RECIPE_DIR}/${patch_file}"
    done < <(plan_get patches)
    # protoc 3.21 for the build machine, as conda-forge's libprotobuf 3.21 brings it
    for deb in "${stage}"/debs/{protobuf-compiler,libprotoc32,libprotobuf32}_*.deb; do
        dpkg -x "${deb}" "${BUILD_PREFIX}/debian"
    done
    printf '#!/bin/sh\nLD_LIBRARY_PATH="%s" exec "%s" "$@"\n' \
        "${BUILD_PREFIX}/debian/usr/lib/x86_64-linux-gnu" "${BUILD_PREFIX}/debian/usr/bin/protoc" \
        >"${BUILD_PREFIX}/bin/protoc"
    chmod +x "${BUILD_PREFIX}/bin/protoc"
    # the toolkit as conda's cuda-* packages lay it out: nvcc and its tools in BUILD_PREFIX, the
    # target's headers and libraries (the driver stub included) in PREFIX/targets/x86_64-linux
    local entry
    for entry in "${cuda_home}"/*; do
        [[ "$(basename "${entry}")" == bin ]] || ln -sfn "${entry}" "${BUILD_PREFIX}/"
    done
    ln -sf "${cuda_home}"/bin/* "${BUILD_PREFIX}/bin/"
    ln -sfn "${cuda_home}/targets/x86_64-linux" "${PREFIX}/targets/x86_64-linux"
    # cuDNN's headers and libraries as conda's cudnn puts them in PREFIX, from the machine's wheel
    ln -sf "$(cudnn_dir)"/include/* "${PREFIX}/include/"
    ln -sf "$(cudnn_dir)"/lib/* "${PREFIX}/lib/"
    # cutlass and cudnn_frontend are stored as trees; a FETCHCONTENT_SOURCE_DIR skips FetchContent's
    # patch step, so ORT's cutlass patch is applied here
    zstd -dc "${stage}/sources/cutlass-cudnn_frontend-trees.tar.zst" | tar -x -C "${work}"
    patch -d "${work}/cutlass" -p1 <"${SRC_DIR}/cmake/patches/cutlass/cutlass_4.7.0.patch"
    # conda-forge's toolchain arguments; the dependency archives come from ORT's offline mirror and
    # never from the machine's own packages
    local toolchain=(
        -DCMAKE_INSTALL_PREFIX="${PREFIX}" -DCMAKE_INSTALL_LIBDIR=lib
        -DCMAKE_PROGRAM_PATH="${BUILD_PREFIX}/bin;${PREFIX}/bin"
        -Donnxruntime_CMAKE_DEPS_MIRROR_DIR="${stage}/mirror" -DFETCHCONTENT_TRY_FIND_PACKAGE_MODE=NEVER
        -DFETCHCONTENT_SOURCE_DIR_CUTLASS="${work}/cutlass"
        -DFETCHCONTENT_SOURCE_DIR_CUDNN_FRONTEND="${work}/cudnn_frontend"
    )
    export CMAKE_ARGS="${toolchain[*]}"
    export PATH="${BUILD_PREFIX}/bin:${PATH}"
    eval "$(python3 - "${plan}" <<'EOF'
import json, shlex, sys
plan = json.load(open(sys.argv[1]))
for key, value in plan["script_env"].items():
    print(f"export {key}={shlex.quote(value)}")
for key, (value, _) in plan["overrides"]["env"].items():
    print(f"export {key}={shlex.quote(value)}")
extra = " ".join(arg for arg, _ in plan["overrides"]["cmake_args"])
print(f'export CMAKE_ARGS="$CMAKE_ARGS "{shlex.quote(extra)}')
EOF
)"
}

cudnn_dir() {
    python3 -c 'import nvidia.cudnn; print(list(nvidia.cudnn.__path__)[0])'
}

build() {
    prepare_build
    note "build: MemAvailable $(awk '/^MemAvailable:/ {print int($2 / 1048576)}' /proc/meminfo) GiB, $(nproc) cores"
    # shellcheck disable=SC2016  # expanded by the step's own shell
    run_step build 1800 bash -c 'cd "${SRC_DIR}" && exec bash "${RECIPE_DIR}/build_ep_cuda.sh"'
    if [[ -f "$(built_library)" ]]; then
        note "build: $(built_library) is $(stat -c %s "$(built_library)") bytes"
    fi
}

built_library() {
    echo "${work}/prefix/$(plan_get script_env PLUGIN_INSTALL_PATH)"
}

site_of() {
    echo "${work}/core-$1/lib/$(python3 -c 'import sys; print("python%d.%d" % sys.version_info[:2])')/site-packages"
}

library_of() {
    echo "${work}/core-$1/lib/$(basename "$(plan_get script_env PLUGIN_INSTALL_PATH)")"
}

# One conda-like prefix per core: the wheel in lib/pythonX.Y/site-packages with this feedstock's
# auto-registration added as the onnxruntime build script adds it, and the plugin package's files
# (library and manifest) beside it
core_prefix() {
    local version="$1" prefix="${work}/core-$1" site
    site="$(site_of "$1")"
    python3 -m pip install -q --no-index --no-deps --no-compile --target "${site}" \
        "${stage}"/wheels/onnxruntime-"${version}"-*.whl
    python3 "${RECIPE_DIR}/python/install_autoregistration.py" "${site}"
    mkdir -p "${prefix}/lib" "${prefix}/share/onnxruntime/ep-plugins"
    cp "$(built_library)" "${prefix}/lib/"
    cp "${work}/prefix/share/onnxruntime/ep-plugins/$(plan_get script_env PLUGIN_MANIFEST)" \
        "${prefix}/share/onnxruntime/ep-plugins/"
}

# the steps one core gets: the recipe's load test, which cuDNN libraries a session loads, upstream's
# packaging test (auto-registration off, as upstream runs it) and the auto-registration path
core_steps() {
    local version="$1" site library cudnn
    site="$(site_of "${version}")" library="$(library_of "${version}")" cudnn="$(cudnn_dir)/lib"
    # the core's packages and the test tools; the toolkit's libraries, with cuDNN as the plugin
    # package's run dependency brings it, or without it
    local paths=(PYTHONPATH="${site}:${work}/test-site")
    local with_cudnn=(env "${paths[@]}" LD_LIBRARY_PATH="${cuda_runtime}:${cudnn}:${LD_LIBRARY_PATH:-}")
    local without_cudnn=(env "${paths[@]}" LD_LIBRARY_PATH="${cuda_runtime}:${LD_LIBRARY_PATH:-}")
    local load_test=(env PATH="${work}/bin:${PATH}" bash run_plugin_load_test.sh "${library}" CUDAExecutionProvider)
    ( cd "${RECIPE_DIR}" && run_step "load-${version}" 300 "${with_cudnn[@]}" "${load_test[@]}" )
    ( cd "${RECIPE_DIR}" && run_step "cudnn-loaded-${version}" 300 "${without_cudnn[@]}" \
        python3 "${here}/checks.py" cudnn-loaded "${library}" )
    # the load test again in a process that imported torch first, as the operator suite's processes do: on
    # the 1.30.0 core the load test passed while every suite case that ran one of the plugin's own kernels
    # failed or hung (2026-12-01, third run)
    ( cd "${RECIPE_DIR}" && run_step "load-after-torch-${version}" 150 "${with_cudnn[@]}" \
        PYTHONPATH="${work}/torch-first:${site}:${work}/test-site" "${load_test[@]}" )
    if [[ "${version}" == "$(plan_get cores newest)" ]]; then
        # the load test once more with the driver's kernel cache off: as slow as the first when its time
        # goes to compiling the library's PTX for this GPU, as fast as the second when it goes elsewhere
        ( cd "${RECIPE_DIR}" && run_step "load-without-jit-cache-${version}" 300 env CUDA_CACHE_DISABLE=1 \
            "${with_cudnn[@]}" "${load_test[@]}" )
    fi
    run_step "packaging-${version}" 300 env ONNXRUNTIME_DISABLE_EP_AUTOREGISTRATION=1 "${with_cudnn[@]}" \
        python3 "${SRC_DIR}/plugin-ep-cuda/python/test/test_cuda_plugin_ep.py"
    run_step "autoregistration-${version}" 300 "${with_cudnn[@]}" python3 "${here}/checks.py" autoregistration
}

# upstream's operator suite, in WORKERS pytest-xdist workers: cuDNN comes with torch, which the suite imports
# first. One worker runs the cases in the suite's order; the source core's suite gets four, since its cases
# hung and each hang holds a worker for 120 s (the 1.30.0 core reloading the plugin in a torch process,
# docs/gpu-runs/2026-12-01-fourth-run.md; more workers do not cause the hangs). case_log.py writes each case's
# outcome and failure to results/NAME.cases as it ends, and a case still running after 120 s (the slowest seen
# took 77 s) gets its Python and native stacks written there and its worker ended; xdist records it as failed
# and goes on with the next case in a new worker. The suite stamps most models with the newest opset its onnx
# knows, which a core older than that onnx refuses at load unless ALLOW_RELEASED_ONNX_OPSET_ONLY=0
# (onnxruntime/core/graph/model_load_utils.h). The step's limit leaves the 30 minutes of device time room for
# the build (about 1100 s) and the machine's start.
operator_suite() {
    local name="$1" version="$2" workers="$3"
    shift 3
    run_step "${name}" 420 env -C "${SRC_DIR}/onnxruntime/test/python/transformers" "$@" \
        ORT_TEST_CUDA_PLUGIN_EP=1 ORT_CUDA_PLUGIN_PATH="$(library_of "${version}")" ALLOW_RELEASED_ONNX_OPSET_ONLY=0 \
        ONNXRUNTIME_DISABLE_EP_AUTOREGISTRATION=1 PYTHONPATH="$(site_of "${version}"):${work}/test-site:${here}" \
        LD_LIBRARY_PATH="${cuda_runtime}:${LD_LIBRARY_PATH:-}" CASE_LOG="${results}/${name}.cases" \
        python3 -m pytest -v -p no:cacheprovider -p case_log -n "${workers}" --max-worker-restart=100 --timeout=120 \
        --durations=10 test_cuda_plugin_ep.py
}

run_tests() {
    mkdir -p "${work}/bin"
    # `python` as the recipe's test scripts call it: the image's python3 (a symlink would lose its venv)
    printf '#!/bin/sh\nexec python3 "$@"\n' >"${work}/bin/python"
    chmod +x "${work}/bin/python"
    python3 -m pip install -q --no-index --no-deps --no-compile --target "${work}/test-site" \
        "${stage}"/wheels/pyelftools-*.whl "${stage}"/wheels/pefile-*.whl "${stage}"/wheels/onnx-*.whl
    mkdir -p "${work}/torch-first"
    echo "import torch" >"${work}/torch-first/sitecustomize.py"
    # JIT-compiled PTX is kept across the test processes
    export CUDA_CACHE_PATH="${work}/nvcache" CUDA_CACHE_MAXSIZE=4294967296
    run_step binary 120 env PYTHONPATH="${work}/test-site" python3 "${RECIPE_DIR}/check_plugin_binary.py" \
        "$(built_library)"
    local floor source newest version
    floor="$(plan_get cores floor)" source="$(plan_get cores source)" newest="$(plan_get cores newest)"
    for version in $(printf '%s\n' "${floor}" "${source}" "${newest}" | sort -u); do
        core_prefix "${version}"
    done
    local lanes=()
    operator_suite "operators-${source}" "${source}" 4 & lanes+=($!)
    operator_suite "operators-${newest}" "${newest}" 1 & lanes+=($!)
    operator_suite "operators-without-cudnn-${newest}" "${newest}" 1 ORT_TEST_CUDA_PLUGIN_NO_CUDNN=1 & lanes+=($!)
    operator_suite "operators-${floor}" "${floor}" 1 & lanes+=($!)
    for version in $(printf '%s\n' "${floor}" "${source}" "${newest}" | sort -u); do
        core_steps "${version}" & lanes+=($!)
    done
    wait "${lanes[@]}" || true
    note "nvcache: $(du -sm "${CUDA_CACHE_PATH}" 2>/dev/null | cut -f1) MiB of JIT-compiled kernels"
}

# A cost run (pack.py --cost): build_ep_cuda.sh configures the plugin with the recipe's own settings and
# stops before its build step, as in a rehearsal; buildcost.py then compiles a sample of the graph's nvcc
# units, one piece per GPU target and one compile per core, until COST_END_S after the pipeline started.
# Past that, the machine's 30 minutes leave room only for the measurement file's way back (README.md,
# "What a release costs").
COST_END_S=1400

measure_cost() {
    local started="$1" targets="${work}/build_targets.txt"
    prepare_build
    # shellcheck disable=SC2016  # expanded by the step's own shell
    run_step configure 600 env REHEARSAL_TARGETS_FILE="${targets}" \
        bash -c 'cd "${SRC_DIR}" && exec bash "${RECIPE_DIR}/build_ep_cuda.sh"'
    if [[ ! -f "${targets}" ]]; then
        note "pipeline: the configure step named no build targets, so nothing is measured (configure.log)"
        return 0
    fi
    local seconds=$(( started + COST_END_S - $(date +%s) )) target_args=()
    if (( seconds <= 0 )); then
        note "pipeline: ${COST_END_S} s after the start have passed, so nothing is measured"
        return 0
    fi
    while read -r target; do target_args+=(--target "${target}"); done <"${targets}"
    run_step measure $(( seconds + 300 )) python3 "${top}/repo/scripts/buildcost.py" measure \
        --build "${SRC_DIR}/$(plan_get script_env ORT_BUILD_DIR)" --source "${SRC_DIR}" "${target_args[@]}" \
        --out "${results}/measurements.json" --seconds "${seconds}" --jobs "$(nproc)"
}

pipeline() {
    local started
    started="$(date +%s)"
    note "pipeline: waiting for the build's inputs"
    wait_for_inputs build_inputs
    if [[ "$(plan_get purpose)" == cost ]]; then
        measure_cost "${started}"
        return 0
    fi
    build
    if [[ ! -f "$(built_library)" ]]; then
        note "pipeline: no library built, so no test runs"
        return 0
    fi
    note "pipeline: waiting for the tests' inputs"
    wait_for_inputs test_inputs
    run_tests
}

# whatever stopped the pipeline, the report is written and `wait` stops waiting
finish() {
    python3 "${here}/checks.py" report "${top}" >/dev/null || note "report: checks.py failed"
    touch "${results}/done"
    note "pipeline: done"
}

wait_for_pipeline() {
    local seconds="$1" start
    start="$(date +%s)"
    while [[ ! -f "${results}/done" ]] && (( $(date +%s) - start < seconds )); do
        sleep 20
        local built=""
        [[ -f "${results}/build.log" ]] \
            && built="$(grep -o '^+[0-9]*s \[[0-9]*/[0-9]*\]' "${results}/build.log" | tail -1 || true)"
        echo "$(date -u +%H:%M:%S) ninja ${built:-(not started)}; $(tail -n 1 "${results}/progress.txt")"
    done
    python3 "${here}/checks.py" report "${top}"
    cp "${results}/report.md" "${OUT}/"
    [[ ! -f "${results}/measurements.json" ]] || cp "${results}/measurements.json" "${OUT}/"
    tar -czf "${OUT}/logs.tar.gz" -C "${top}" results
}

case "${1:-}" in
    stage)
        [[ $# == 2 && -d "$2" ]] || usage
        mkdir -p "${stage}" "${results}"
        cp -r "$2"/. "${stage}/"
        note "staged $(find "$2" -type f | wc -l) files from $2"
        ;;
    start)
        [[ $# == 1 ]] || usage
        if [[ ! -f "${plan}" ]]; then
            echo "ERROR: ${plan} is missing: stage bundle-1 first" >&2
            exit 2
        fi
        # the bracket keeps pgrep from matching a command line that merely quotes this pattern
        if pgrep -f "[${top:0:1}]${top:1}/repo/scripts/device/run.sh pipeline" >/dev/null; then
            echo "ERROR: a pipeline is running in ${top} already; wait for it, or stop it first" >&2
            exit 2
        fi
        mkdir -p "${results}"
        # the pipeline runs from a copy: a later call replaces the checkout under it
        rm -rf "${top}/repo"
        mkdir -p "${top}/repo/scripts"
        cp -r "${repo}/recipe" "${top}/repo/"
        cp -r "${here}" "${repo}/scripts/buildcost.py" "${repo}/scripts/ninja_graph.py" "${top}/repo/scripts/"
        setsid bash "${top}/repo/scripts/device/run.sh" pipeline >"${results}/pipeline.log" 2>&1 </dev/null &
        note "pipeline started"
        ;;
    wait)
        [[ $# == 2 && "$2" =~ ^[0-9]+$ ]] || usage
        wait_for_pipeline "$2"
        ;;
    step)
        [[ $# -ge 4 && "$3" =~ ^[0-9]+$ ]] || usage
        mkdir -p "${results}"
        shift
        run_step "$@"
        ;;
    pipeline)
        trap finish EXIT
        pipeline
        ;;
    *) usage ;;
esac
