"""The ONNX Runtime cores the plugin and the Python package are tested against, besides the floor
(`min_core_version` in config/feedstock.yaml): the tests and the GPU run (scripts/device/) read it here."""

# The newest onnxruntime on PyPI when this was written (`pip index versions onnxruntime`); bump on purpose.
NEWEST_CORE = "1.32.0"
