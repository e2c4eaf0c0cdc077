#!/usr/bin/env bash
# The plugin package on a GPU, on a machine with 16 cores, an NVIDIA GPU, the CUDA 13.0 toolkit in
# /usr/local/cuda-13.0, Python 3.12 with numpy, onnx, torch and cuDNN's wheel, and no network. Its inputs
# come in the bundles scripts/device/pack.py writes, one per call:
#   run.sh stage BUNDLE   copy a carried bundle into the machine's staging folder
#   run.sh start          run the pipeline detached (it outlives the call); it waits for its inputs, then
#                         package.py does what plan.json (plan.py) says: builds the stand-in channel and the
#                         plugin package with rattler-build, runs the package's tests, installs it for a user
#                         and runs upstream's operator suite with it (plan.json's purpose "cpu": the CPU
#                         packages instead, installed with a plugin package an earlier run built; "speed": the
#                         plugin, untested, measured against another build of the CUDA EP; "cost": measures a
#                         sample of nvcc units instead)
#   run.sh wait SECONDS   print progress until the pipeline ends or SECONDS pass, then copy report.md (report.py),
#                         package.json, the built package in 15 MiB pieces (pieces.py), logs.tar.gz and a cost
#                         run's measurements.json into $OUT
#   run.sh step NAME SECONDS COMMAND...   one step as the pipeline runs it (used by the tests)
# docs/gpu-machine.md ("Building the plugin package on a GPU") gives the calls. GPU_RUN_DIR (default
# /tmp/gpu-run) holds the staging folder, the work tree and the results.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "${here}/../.." && pwd)"
top="${GPU_RUN_DIR:-/tmp/gpu-run}"
stage="${top}/stage"
work="${top}/work"
results="${top}/results"
plan="${stage}/plan.json"

usage() {
    echo "usage: $0 stage BUNDLE | start | wait SECONDS | step NAME SECONDS COMMAND..." >&2
    exit 2
}

note() {
    echo "$(date -u +%H:%M:%S) $*" | tee -a "${results}/progress.txt"
}

# what the plan says (plan.py's command line): its inputs, its purpose, the plugin's build folder, the outputs built
plan_says() {
    python3 "${here}/plan.py" "${plan}" "$1"
}

# the plan's inputs not staged yet
missing() {
    local entry
    while read -r entry; do
        [[ -e "${stage}/${entry}" ]] || echo "${entry}"
    done < <(plan_says inputs)
}

wait_for_inputs() {
    local deadline=$(( $(date +%s) + 1200 )) absent
    absent="$(missing)"
    # said where `wait` shows it: a bundle that was never staged is seen at once, not after 20 minutes
    [[ -z "${absent}" ]] || note "waiting for $(wc -l <<<"${absent}") inputs, the first $(head -n 1 <<<"${absent}")"
    while [[ -n "$(missing)" ]]; do
        if (( $(date +%s) > deadline )); then
            note "ERROR: inputs still missing after 20 minutes: $(missing | tr '\n' ' ')"
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
    # STEP_DEADLINE: when the step is stopped, for a command that shares its time out (package.py's suites)
    STEP_DEADLINE=$(( start + limit )) PYTHONFAULTHANDLER=1 PYTHONUNBUFFERED=1 setsid bash -c 'set -o pipefail
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

# A cost run (pack.py --cost): package.py has rattler-build lay out the build environment from the stand-in
# channel and run build_ep_cuda.py, which configures the plugin with the recipe's own settings and stops
# before its build step (the plan's purpose), as in a rehearsal; buildcost.py then compiles a sample of the graph's nvcc
# units, one piece per GPU target and one compile per core, until COST_END_S after the pipeline started.
# Past that, the machine's 30 minutes leave room only for the measurement file's way back (README.md,
# "What a release costs").
COST_END_S=1400
# The machine is taken back 30 minutes after it starts, and `start` runs in its first call, about 90 s in. The
# package step ends LOAN_END_S after the pipeline started (its suites and speed rounds share out what is left of
# it: package.py's seconds_left), so that its report is written while the last `wait` can still bring it back.
# A loan with less device time than that is started with a smaller one: `LOAN_END_S=900 run.sh start`.
LOAN_END_S="${LOAN_END_S:-1560}"

measure_cost() {
    local started="$1" targets="${work}/build_targets.txt"
    rattler_build_tools
    run_step configure 900 env PYTHONPATH="${top}/site:${repo}/scripts" python3 "${here}/package.py" \
        --stage "${stage}" --work "${work}" --results "${results}"
    if [[ ! -f "${targets}" ]]; then
        note "pipeline: the configure step named no build targets, so nothing is measured (configure.log)"
        return 0
    fi
    local seconds=$(( started + COST_END_S - $(date +%s) )) target_args=() source_dir
    if (( seconds <= 0 )); then
        note "pipeline: ${COST_END_S} s after the start have passed, so nothing is measured"
        return 0
    fi
    while read -r target; do target_args+=(--target "${target}"); done <"${targets}"
    # the source and build tree rattler-build keeps (package.py builds with keep_build), compiled in the build
    # script's environment, which rattler-build leaves beside them: outside it the stand-in nvcc cannot run
    # its host compiler ("Failed to preprocess host compiler properties", docs/gpu-runs/2026-12-03-packages.md)
    # (a cost run builds one output, the plugin; package.py builds with no_build_id, so the folder is named after it)
    source_dir="${work}/output/bld/rattler-build_$(plan_says outputs)/work"
    # shellcheck disable=SC2016  # expanded by the step's own shell
    run_step measure $(( seconds + 300 )) bash -c 'source "$1/build_env.sh" && shift && exec python3 "$@"' measure \
        "${source_dir}" "${top}/repo/scripts/buildcost.py" measure \
        --build "${source_dir}/$(plan_says build-dir)" --source "${source_dir}" "${target_args[@]}" \
        --out "${results}/measurements.json" --seconds "${seconds}" --jobs "$(nproc)"
}

# rattler-build, rattler and what scripts/ read their files with, from the bundles' rattler/ (pack.py's
# RATTLER); zstd from Debian, where the image lacks it
rattler_build_tools() {
    python3 -m pip install -q --no-index --no-deps --no-compile --target "${top}/site" \
        "${stage}"/rattler/*.whl
    if ! command -v zstd >/dev/null; then
        dpkg -x "${stage}"/debs/zstd_*.deb "${top}/zstd"
        export PATH="${top}/zstd/usr/bin:${PATH}"
    fi
}

# The packages (plan.json's purpose "package" and "speed": the plugin; "cpu": the CPU packages): package.py builds the
# stand-in channel from this machine's files, builds the packages with rattler-build from the device's copy
# of the recipe (or takes an earlier run's, which the plan names), runs their tests and installs them for a
# user (package.py says how).
package() {
    local started="$1"
    rattler_build_tools
    # A plugin built with DEVICE_OVERRIDES runs on the H200 from SM 7.5 PTX, which the driver compiles at a
    # process's first model run (docs/gpu-runs/ has how long it takes). One driver cache, large enough for the
    # whole library, serves the package's tests and the user's runs, so that only the first pays for it.
    export CUDA_CACHE_PATH="${top}/cuda-cache" CUDA_CACHE_MAXSIZE=4294967296
    run_step package $(( started + LOAN_END_S - $(date +%s) )) \
        env PYTHONPATH="${top}/site:${repo}/scripts" python3 "${here}/package.py" \
        --stage "${stage}" --work "${work}" --results "${results}"
}

pipeline() {
    local started
    started="$(date +%s)"
    note "pipeline: waiting for its inputs"
    wait_for_inputs
    if [[ "$(plan_says purpose)" == cost ]]; then
        measure_cost "${started}"
        return 0
    fi
    package "${started}"
}

# whatever stopped the pipeline, the report is written and `wait` stops waiting
finish() {
    python3 "${here}/report.py" "${top}" >/dev/null || note "report: report.py failed"
    touch "${results}/done"
    note "pipeline: done"
}

wait_for_pipeline() {
    local seconds="$1" start
    start="$(date +%s)"
    while [[ ! -f "${results}/done" ]] && (( $(date +%s) - start < seconds )); do
        sleep 20
        local built=""
        # ninja's progress in the log of the build script rattler-build runs
        built="$(cat "${work}"/output/bld/*/work/conda_build.log 2>/dev/null | grep -o '^\[[0-9]*/[0-9]*\]' | tail -1 || true)"
        echo "$(date -u +%H:%M:%S) ninja ${built:-(not started)}; $(tail -n 1 "${results}/progress.txt")"
    done
    # what the run left comes back even when the report cannot be made from it
    python3 "${here}/report.py" "${top}" || echo "report.py failed: see logs.tar.gz" >"${results}/report.md"
    cp "${results}/report.md" "${OUT}/"
    local kept
    for kept in measurements.json package.json; do
        [[ ! -f "${results}/${kept}" ]] || cp "${results}/${kept}" "${OUT}/"
    done
    # the built packages, for the next loan: in pieces, as a file comes back from this machine up to 16 MiB
    local built
    for built in "${work}"/output/linux-64/*.conda; do
        [[ ! -f "${built}" ]] || python3 "${here}/pieces.py" cut "${built}" "${OUT}" $(( 15 * 1024 * 1024 )) >/dev/null
    done
    # the logs still grow while the pipeline runs: tar's "file changed as we read it" (exit 1) is no failure
    tar --warning=no-file-changed -czf "${OUT}/logs.tar.gz" -C "${top}" results || (( $? == 1 ))
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
        # a pipeline started again in this folder (packages an earlier one built are kept in work/output)
        rm -f "${results}/done"
        # the pipeline runs from a copy: a later call replaces the checkout under it
        rm -rf "${top}/repo"
        mkdir -p "${top}/repo"
        cp -r "${repo}/recipe" "${repo}/scripts" "${repo}/.ci_support" "${repo}/config" "${repo}/conda-forge.yml" "${top}/repo/"
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
