#!/usr/bin/env bash
# run.sh PREFIX MANIFEST MODEL
# Builds run_plugin against the onnxruntime-cpp package in PREFIX, the way a user's CMake project would,
# and runs it on MODEL with the CUDA plugin's MANIFEST (the one the plugin package installs in PREFIX). Exits
# with the build's status when the build fails, else with the program's (0: the plugin ran the model and
# matched the CPU EP).
set -euo pipefail

if (( $# != 3 )); then
    echo "usage: $0 PREFIX MANIFEST MODEL" >&2
    exit 2
fi
prefix="$1"
manifest="$2"
model="$3"
# refused before the build, which would fail later and less clearly
for input in "${manifest}" "${model}"; do
    if [[ ! -f "${input}" ]]; then
        echo "FAILED: ${input} does not exist" >&2
        exit 1
    fi
done

source_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build_dir="$(mktemp -d)"
trap 'rm -rf "${build_dir}"' EXIT

set -x
cmake -S "${source_dir}" -B "${build_dir}" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="${prefix}"
cmake --build "${build_dir}"
"${build_dir}/run_plugin" "${manifest}" "${model}"
