#!/usr/bin/env bash
# Loads a plugin EP library into the onnxruntime core of this test environment:
#     bash run_plugin_load_test.sh LIBRARY EP_NAME
# With the NVIDIA driver present it uses the driver, and requires a device when nvidia-smi lists a GPU.
# Without one it preloads NVIDIA's stub libcuda.so (cuda-driver-dev, SONAME libcuda.so.1), so the
# library loads and reports no devices.
set -euxo pipefail

library="$1"
ep_name="$2"
load_test=(python test_plugin_load.py --library "${library}" --ep-name "${ep_name}")

if python -c "import ctypes; ctypes.CDLL('libcuda.so.1')" 2>/dev/null; then
    gpus="$(nvidia-smi -L 2>/dev/null || true)"
    if [[ "${gpus}" == *"GPU "* ]]; then
        load_test+=(--require-device)
    fi
else
    stub="${PREFIX}/lib/stubs/libcuda.so"
    if [[ ! -f "${stub}" ]]; then
        echo "ERROR: no NVIDIA driver and no stub at ${stub}: is cuda-driver-dev in the test requirements?" >&2
        exit 1
    fi
    export LD_PRELOAD="${stub}"
fi

"${load_test[@]}"
