"""Checks the CPU-only onnxruntime Python package in this environment:

    python test_python_cpu.py [TARGET_PLATFORM]

Its version is plain X.Y.Z and the core's own; a small model runs on the CPU execution provider and
matches numpy; the execution providers built in for TARGET_PLATFORM (a conda subdir such as osx-arm64)
are available; IOBinding names NVIDIA's devices for "cuda", as a CUDA plugin's allocator is found by;
and when no EP plugin manifest is installed, `import onnxruntime` is silent and no CUDA provider is
built in. Needs numpy and onnx next to onnxruntime.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

# Opset and IR version that every core this package could be (>= 1.24.4) accepts.
MODEL_OPSET = 17
MODEL_IR_VERSION = 8

# PCI vendor id of NVIDIA, which a plugin EP's device memory is registered under (OrtDevice::VendorIds)
NVIDIA = 0x10DE

# Execution providers the recipe builds into the core on a platform, beside the CPU one.
BUILT_IN_PROVIDERS = {"osx-arm64": ["CoreMLExecutionProvider"]}


def plugin_manifests() -> list[Path]:
    """The EP plugin manifests conda packages installed in this environment, where the package's own
    manifest reader looks: its file beside this script (the recipe's test files), as a PyPI core has none."""
    path = Path(__file__).resolve().parent / "python" / "onnxruntime_ep_cuda" / "_manifest.py"
    spec = importlib.util.spec_from_file_location("_manifest", path)
    manifest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(manifest)
    return [Path(p) for p in manifest.manifest_paths(sys.prefix)]


def check_version() -> None:
    version = ort.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), f"onnxruntime.__version__ is {version!r}, not plain X.Y.Z"
    core = ort.get_version_string()
    assert version == core, f"onnxruntime.__version__ is {version} but the core says {core}"
    print(f"version    {version}, the core's own")


def linear_relu_model() -> bytes:
    """y = Relu(x @ w + b)"""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])
    w = helper.make_tensor_value_info("w", TensorProto.FLOAT, [4, 2])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["product"]),
        helper.make_node("Add", ["product", "b"], ["sum"]),
        helper.make_node("Relu", ["sum"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "linear_relu", [x, w, b], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", MODEL_OPSET)])
    model.ir_version = MODEL_IR_VERSION
    return model.SerializeToString()


def check_model_runs_on_cpu() -> None:
    rng = np.random.default_rng(seed=7)
    x = rng.standard_normal((3, 4), dtype=np.float32)
    w = rng.standard_normal((4, 2), dtype=np.float32)
    b = rng.standard_normal(2, dtype=np.float32)

    session = ort.InferenceSession(linear_relu_model(), providers=["CPUExecutionProvider"])
    assert session.get_providers() == ["CPUExecutionProvider"], f"session providers: {session.get_providers()}"
    (y,) = session.run(["y"], {"x": x, "w": w, "b": b})

    np.testing.assert_allclose(y, np.maximum(x @ w + b, 0.0), rtol=1e-5, atol=1e-6)
    print("model      MatMul+Add+Relu on CPUExecutionProvider matches numpy")


def check_iobinding_names_nvidia_for_cuda() -> None:
    """A core without a built-in CUDA EP finds a plugin's device memory only by vendor: an IOBinding of
    "cuda" that leaves NVIDIA's id out fails on the GPU with "Failed to find allocator for device
    ...VendorId:0". The devices the Python layer hands the core are read here, where no GPU is needed."""
    devices = []

    class Recorder:
        def bind_input(self, _name: str, device: object, *_rest: object) -> None:
            devices.append(device)

        def bind_output(self, _name: str, device: object, *_rest: object) -> None:
            devices.append(device)

    binding = ort.InferenceSession(linear_relu_model(), providers=["CPUExecutionProvider"]).io_binding()
    binding._iobinding = Recorder()
    binding.bind_input("x", "cuda", 0, np.float32, [3, 4], 0)
    binding.bind_output("y", "cuda", 0)
    binding.bind_output("y", "cuda", 0, np.float32, [3, 2], 0)
    vendors = [device.vendor_id() for device in devices]
    assert vendors == [NVIDIA] * 3, (
        f"IOBinding gives \"cuda\" the vendor ids {[hex(v) for v in vendors]}, not NVIDIA's {NVIDIA:#x} "
        "(bind_input, bind_output, bind_output with a buffer)"
    )
    print(f"iobinding  \"cuda\" is NVIDIA's ({NVIDIA:#x}) in bind_input and bind_output")


def check_built_in_providers(target_platform: str) -> None:
    providers = ort.get_available_providers()
    for provider in BUILT_IN_PROVIDERS.get(target_platform, []):
        assert provider in providers, (f"{provider} is not among the available providers on {target_platform}: "
                                       f"{providers}")
    print(f"built in   {', '.join(BUILT_IN_PROVIDERS.get(target_platform, [])) or 'nothing beyond the CPU EP'}"
          f" for {target_platform}")


def check_import_is_silent() -> None:
    # in a child that prints every warning `import onnxruntime` emits: under `-W error` the EP auto-registration
    # would swallow its own (a broken install must not break the import), so stderr is what is checked
    child = subprocess.run(
        [sys.executable, "-W", "always", "-c", "import onnxruntime"], capture_output=True, text=True,
    )
    assert child.returncode == 0 and not child.stderr.strip(), (
        f"`python -W always -c 'import onnxruntime'` exited {child.returncode} with:\n{child.stderr}"
    )
    print("import     silent, with -W always")


def check_no_cuda_built_in() -> None:
    providers = ort.get_available_providers()
    assert "CPUExecutionProvider" in providers, f"available providers: {providers}"
    assert "CUDAExecutionProvider" not in providers, f"a CPU-only build lists CUDAExecutionProvider: {providers}"
    print(f"providers  {', '.join(providers)}")


def main(argv: list[str]) -> int:
    check_version()
    check_model_runs_on_cpu()
    check_iobinding_names_nvidia_for_cuda()
    if argv:
        check_built_in_providers(argv[0])
    manifests = plugin_manifests()
    if manifests:
        print(f"skipped    the checks for an environment without EP plugins: {', '.join(map(str, manifests))}")
    else:
        check_import_is_silent()
        check_no_cuda_built_in()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
