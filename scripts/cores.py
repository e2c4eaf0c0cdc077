"""The ONNX Runtime cores the plugin and the Python package are tested against, besides the floor
(`min_core_version` in config/feedstock.yaml): the tests and the GPU run (scripts/device/) read it here."""

# The newest onnxruntime on PyPI when this was written (`pip index versions onnxruntime`); bump on purpose.
NEWEST_CORE = "1.32.0"

# The onnx that upstream's operator suite (scripts/device/) makes its models with, ahead of the environment's own:
# the suite writes each model at its onnx's IR version and newest opset, which a core built against an older onnx
# refuses (1.24.4 and 1.30.0 with onnx 1.23.1: "Unsupported model IR version: 14, max supported IR version: 13",
# docs/gpu-runs/2026-12-05-second-loan.md). The floor core reads the models of this onnx, so every core of the
# suite does (tests/test_cores.py loads one into it); it refuses those of onnx 1.21.0 (opset 26) and newer.
SUITE_ONNX = "1.20.1"
