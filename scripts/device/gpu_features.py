"""What a user who moves from a CUDA build of onnxruntime to the plugin keeps on the GPU: IOBinding with device
memory and CUDA graphs, run with the environment's own interpreter (package.py).

    python gpu_features.py --library LIB [--ep NAME] [--torch-path DIR] [--runs N]

The plugin is registered from LIB under NAME unless `import onnxruntime` has registered it already (this
feedstock's core does). Each check prints one line, `ok` or `FAILED` with the reason, and the others go on:

- iobinding-output: the input bound from numpy, the output bound to "cuda": it is on the GPU and matches
  the CPU EP;
- iobinding-ortvalue: OrtValues made on "cuda" from numpy, bound as the inputs, read back unchanged;
- iobinding-torch: torch's CUDA tensors bound by their data_ptr(), as input and as a preallocated output,
  with no copy (the machine's torch, from DIR);
- cuda-graph: a session with enable_cuda_graph=1 on device buffers bound once: the first run captures the
  graph, later runs replay it, and a replay after the input buffer is refilled matches the CPU EP;
- graph-speed: a chain of 500 Adds at batch 1, the median of RUNS runs bound to device buffers, without and
  with CUDA graphs, as µs a node.

Exit 1 when any check failed. The models and their inputs are the load test's (recipe/test_plugin_load.py)
and speed.py's chain.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnxruntime as ort
# the load test's session and comparison: package.py runs this with the recipe's folder on PYTHONPATH
import test_plugin_load as load_test

import speed

WARMUP = 100


def iobinding_output(devices: list) -> str:
    model, inputs = load_test.small_model(), load_test.model_inputs()
    run = load_test.ep_only_session(model, devices)
    binding = run.io_binding()
    for name, value in inputs.items():
        binding.bind_cpu_input(name, value)
    binding.bind_output("y", "cuda", 0)
    run.run_with_iobinding(binding)
    (output,) = binding.get_outputs()
    if output.device_name() != "cuda":
        raise AssertionError(f"the output is on {output.device_name()}, not cuda")
    load_test.matching_cpu(output.numpy(), load_test.cpu_reference(model, inputs), devices[0].ep_name)
    return "output on cuda, equal to the CPU EP's"


def iobinding_ortvalue(devices: list) -> str:
    model, inputs = load_test.small_model(), load_test.model_inputs()
    run = load_test.ep_only_session(model, devices)
    binding = run.io_binding()
    values = {name: ort.OrtValue.ortvalue_from_numpy(value, "cuda", 0) for name, value in inputs.items()}
    for name, value in values.items():
        binding.bind_ortvalue_input(name, value)
    binding.bind_output("y", "cuda", 0)
    run.run_with_iobinding(binding)
    for name, value in values.items():
        if not np.array_equal(value.numpy(), inputs[name]):
            raise AssertionError(f"input {name} read back from the GPU differs")
    load_test.matching_cpu(binding.get_outputs()[0].numpy(), load_test.cpu_reference(model, inputs), devices[0].ep_name)
    return "inputs made on cuda read back unchanged, output equal to the CPU EP's"


def iobinding_torch(devices: list) -> str:
    import torch  # the machine's, from --torch-path

    model, inputs = load_test.small_model(), load_test.model_inputs()
    run = load_test.ep_only_session(model, devices)
    binding = run.io_binding()
    tensors = {name: torch.from_numpy(value).cuda() for name, value in inputs.items()}
    result = torch.empty((4, 4), dtype=torch.float32, device="cuda")
    for name, tensor in tensors.items():
        binding.bind_input(name, "cuda", 0, np.float32, list(tensor.shape), tensor.data_ptr())
    binding.bind_output("y", "cuda", 0, np.float32, list(result.shape), result.data_ptr())
    run.run_with_iobinding(binding)
    torch.cuda.synchronize()
    load_test.matching_cpu(result.cpu().numpy(), load_test.cpu_reference(model, inputs), devices[0].ep_name)
    return f"torch {torch.__version__} tensors bound by data_ptr(), output written in place"


def graph_session(model: bytes | str, devices: list, inputs: dict[str, np.ndarray], graphs: bool):
    """A session on device buffers bound once, as CUDA graphs need: (session, binding, input values, output)."""
    run = load_test.ep_only_session(model, devices, {"enable_cuda_graph": "1"} if graphs else {})
    binding = run.io_binding()
    values = {name: ort.OrtValue.ortvalue_from_numpy(value, "cuda", 0) for name, value in inputs.items()}
    for name, value in values.items():
        binding.bind_ortvalue_input(name, value)
    shape = next(iter(inputs.values())).shape
    output = ort.OrtValue.ortvalue_from_shape_and_type(list(shape), np.float32, "cuda", 0)
    binding.bind_ortvalue_output(run.get_outputs()[0].name, output)
    return run, binding, values, output


def cuda_graph(devices: list) -> str:
    model, inputs = load_test.small_model(), load_test.model_inputs()
    run, binding, values, output = graph_session(model, devices, inputs, graphs=True)
    for _ in range(3):  # the first captures, the others replay
        run.run_with_iobinding(binding)
    load_test.matching_cpu(output.numpy(), load_test.cpu_reference(model, inputs), devices[0].ep_name)
    refilled = {name: value[::-1].copy() for name, value in inputs.items()}
    for name, value in values.items():
        value.update_inplace(refilled[name])
    run.run_with_iobinding(binding)
    load_test.matching_cpu(output.numpy(), load_test.cpu_reference(model, refilled), devices[0].ep_name)
    return "captured, replayed, and a replay on refilled inputs equal to the CPU EP's"


def graph_speed(devices: list, runs: int) -> str:
    model = str(speed.chain(Path(tempfile.mkdtemp()) / "chain.onnx"))
    inputs = {"x": np.ones((1, 64), np.float32)}
    said = []
    for graphs in (False, True):
        run, binding, _, _ = graph_session(model, devices, inputs, graphs)
        for _ in range(WARMUP):
            run.run_with_iobinding(binding)
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            run.run_with_iobinding(binding)
            times.append(time.perf_counter() - started)
        median = statistics.median(times)
        said.append(f"{'with' if graphs else 'without'} CUDA graphs {median * 1e3:.3f} ms, "
                    f"{median * 1e6 / speed.CHAIN_NODES:.3f} µs a node")
    return f"{speed.CHAIN_NODES}-Add chain, batch 1, median of {runs} runs: " + "; ".join(said)


def main(arguments: argparse.Namespace) -> int:
    load_test.step("core", f"onnxruntime {ort.__version__} from {Path(ort.__file__).parent}")
    if not load_test.ep_devices(arguments.ep):
        ort.register_execution_provider_library(arguments.ep, str(arguments.library.absolute()))
        load_test.step("register", f"{arguments.ep} <- {arguments.library}")
    devices = load_test.ep_devices(arguments.ep)
    load_test.step("devices", ", ".join(load_test.describe(d) for d in devices) or "none")
    if arguments.torch_path:
        sys.path.append(str(arguments.torch_path))
    checks: dict[str, Callable[[], str]] = {
        "iobinding-output": lambda: iobinding_output(devices),
        "iobinding-ortvalue": lambda: iobinding_ortvalue(devices),
        "iobinding-torch": lambda: iobinding_torch(devices),
        "cuda-graph": lambda: cuda_graph(devices),
        "graph-speed": lambda: graph_speed(devices, arguments.runs),
    }
    failed = 0
    for name, check in checks.items():
        try:
            print(f"{name:<20} ok: {check()}", flush=True)
        except Exception as error:  # noqa: BLE001 - each check is reported and the next one runs
            failed += 1
            print(f"{name:<20} FAILED: {type(error).__name__}: {' '.join(str(error).split())[:600]}", flush=True)
    return 1 if failed or not devices else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--library", type=Path, required=True, help="the plugin library, registered if need be")
    parser.add_argument("--ep", default="CUDAExecutionProvider", help="the EP name the library registers")
    parser.add_argument("--torch-path", type=Path, help="a site-packages folder holding torch")
    parser.add_argument("--runs", type=int, default=1000, help="timed runs of each side of graph-speed")
    sys.exit(main(parser.parse_args()))
