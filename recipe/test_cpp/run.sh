#!/usr/bin/env bash
# Builds the consumer program in this directory against the onnxruntime-cpp package in $PREFIX and runs it.
set -euxo pipefail

source_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build_dir="$(mktemp -d)"

cmake -S "${source_dir}" -B "${build_dir}" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="${PREFIX}"
cmake --build "${build_dir}"
"${build_dir}/list_providers"
