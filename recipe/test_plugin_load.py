"""Load a plugin execution provider library into the installed ONNX Runtime core and use it.

    python test_plugin_load.py --library LIBRARY --ep-name NAME [--require-device]
                               [--time-limit SECONDS]

Registers the library, lists the EP's devices and, when there is one (or --require-device), runs a
small model on the EP alone and compares the result with the CPU EP's; then unregisters. Exit 0 with
the reason when there is no device and none is required; exit 1 with the core's message when
registration, session creation, the run or the comparison fails, and exit 1 with every thread's
stack when the whole check takes longer than --time-limit. Needs onnxruntime, numpy and onnx.
"""

from __future__ import annotations

import argparse
import faulthandler
import inspect
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper
from onnxruntime.capi import onnxruntime_pybind11_state

# Every error the core raises (Fail, InvalidArgument, EPFail, ...) is defined in this module.
CORE_ERRORS = tuple(
    member for member in vars(onnxruntime_pybind11_state).values()
    if inspect.isclass(member) and issubclass(member, Exception)
)
# Old enough for every core since the plugin API appeared (1.23), so the model never limits a test.
MODEL_OPSET = 17
MODEL_IR_VERSION = 8
# A check that hangs would hold a GPU runner until its job times out, hours later, and say nothing.
# The limit leaves room for the slowest run seen, whose time was the driver compiling PTX at the first
# session.run on a GPU the library had no SASS for (docs/gpu-runs/ records each run's times).
TIME_LIMIT = 300.0


class PluginCheckFailed(Exception):
    pass


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", required=True, type=Path, help="the plugin EP shared library")
    parser.add_argument("--ep-name", required=True, help="EP name the library's devices report")
    parser.add_argument("--require-device", action="store_true", help="fail instead of passing when no device")
    parser.add_argument("--time-limit", type=float, default=TIME_LIMIT,
                        help=f"seconds before the check gives up (default {TIME_LIMIT:.0f})")
    return parser.parse_args(argv)


def step(label: str, message: str) -> None:
    print(f"{label:<10} {message}", flush=True)


def small_model() -> bytes:
    """y = Relu(MatMul(a, b) + a) * b: a GEMM and element-wise ops that any compute EP implements."""
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [4, 4])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, [4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])
    nodes = [
        helper.make_node("MatMul", ["a", "b"], ["product"], name="matmul"),
        helper.make_node("Add", ["product", "a"], ["sum"], name="add"),
        helper.make_node("Relu", ["sum"], ["rectified"], name="relu"),
        helper.make_node("Mul", ["rectified", "b"], ["y"], name="mul"),
    ]
    graph = helper.make_graph(nodes, "plugin_load_check", [a, b], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", MODEL_OPSET)])
    model.ir_version = MODEL_IR_VERSION
    return model.SerializeToString()


def model_inputs() -> dict[str, np.ndarray]:
    # Small integers stay exact under reduced-precision math (TF32, fp16 accumulation), so any
    # difference from the CPU result is a real error.
    a = (np.arange(16, dtype=np.float32).reshape(4, 4) % 5) - 2
    b = (np.arange(16, dtype=np.float32).reshape(4, 4).T % 3) - 1
    return {"a": a, "b": b}


def ep_devices(ep_name: str) -> list[Any]:
    return [device for device in ort.get_ep_devices() if device.ep_name == ep_name]


def describe(device: Any) -> str:
    return f"{device.ep_name} on {device.device.type.name} (vendor {device.ep_vendor})"


def ep_only_session(model: bytes | str, devices: list[Any],
                    ep_options: dict[str, str] | None = None) -> ort.InferenceSession:
    options = ort.SessionOptions()
    # Without this the core quietly runs unsupported nodes, or the whole model, on the CPU EP.
    options.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    options.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    options.add_provider_for_devices(devices, ep_options or {})
    return ort.InferenceSession(model, sess_options=options)


def op_types_per_ep(session: ort.InferenceSession) -> dict[str, list[str]] | None:
    if not hasattr(session, "get_provider_graph_assignment_info"):
        return None
    # One EP can own several separate partitions, so they are merged per EP name.
    op_types: dict[str, list[str]] = {}
    for assignment in session.get_provider_graph_assignment_info():
        op_types.setdefault(assignment.ep_name, []).extend(node.op_type for node in assignment.get_nodes())
    return op_types


def prove_nodes_on_ep(session: ort.InferenceSession, ep_name: str) -> str:
    op_types = op_types_per_ep(session)
    if op_types is None:
        # Cores before 1.24 cannot report assignments; with CPU fallback disabled, the session
        # only exists if the EP took every node, so its presence in the provider list is the proof.
        if ep_name not in session.get_providers():
            raise PluginCheckFailed(f"{ep_name} is not among the session's providers {session.get_providers()}")
        return f"{ep_name} is a session provider with CPU fallback disabled (this core reports no node assignment)"
    if set(op_types) != {ep_name}:
        raise PluginCheckFailed(f"not every node was assigned to {ep_name}: {op_types}")
    return f"all {len(op_types[ep_name])} nodes on {ep_name}: {', '.join(op_types[ep_name])}"


def cpu_reference(model: bytes, inputs: dict[str, np.ndarray]) -> np.ndarray:
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    return session.run(None, inputs)[0]


def matching_cpu(result: np.ndarray, expected: np.ndarray, ep_name: str) -> str:
    """What `result` of `ep_name` is beside the CPU EP's `expected`; PluginCheckFailed when they differ."""
    if not np.allclose(result, expected, rtol=1e-5, atol=1e-6):
        raise PluginCheckFailed(f"{ep_name} computed {result.tolist()}, the CPU EP {expected.tolist()}")
    return f"{result.size} values match the CPU EP (max abs difference {np.max(np.abs(result - expected))})"


def run_on_ep(ep_name: str, devices: list[Any]) -> None:
    model, inputs = small_model(), model_inputs()
    session = ep_only_session(model, devices)
    step("session", prove_nodes_on_ep(session, ep_name))
    step("compare", matching_cpu(session.run(None, inputs)[0], cpu_reference(model, inputs), ep_name))


def exercise_registered(arguments: argparse.Namespace) -> None:
    devices = ep_devices(arguments.ep_name)
    step("devices", ", ".join(describe(device) for device in devices) or "none")
    if devices:
        run_on_ep(arguments.ep_name, devices)
        return
    if arguments.require_device:
        seen = sorted({device.ep_name for device in ort.get_ep_devices()})
        raise PluginCheckFailed(
            f"no device for EP {arguments.ep_name} and --require-device given (EPs with devices: {seen})")
    step("skip", f"no device for EP {arguments.ep_name}, so no model runs; pass --require-device to fail instead")


def check_plugin(arguments: argparse.Namespace) -> None:
    step("core", f"onnxruntime {ort.__version__} from {Path(ort.__file__).parent}")
    ort.register_execution_provider_library(arguments.ep_name, str(arguments.library))
    step("register", f"{arguments.ep_name} <- {arguments.library}")
    exercise_registered(arguments)
    ort.unregister_execution_provider_library(arguments.ep_name)
    step("unregister", arguments.ep_name)


def main(argv: list[str]) -> int:
    arguments = parse_arguments(argv)
    # Past the limit every thread's Python stack goes to stderr and the process exits with status 1.
    faulthandler.dump_traceback_later(arguments.time_limit, exit=True)
    # The core resolves a relative path against its own package directory, not the working directory.
    arguments.library = arguments.library.absolute()
    try:
        check_plugin(arguments)
    except CORE_ERRORS as error:
        print(f"FAILED: {type(error).__module__}.{type(error).__name__}: {error}", file=sys.stderr)
        return 1
    except PluginCheckFailed as error:
        print(f"FAILED: {error}", file=sys.stderr)
        return 1
    finally:
        faulthandler.cancel_dump_traceback_later()
    step("ok", f"{arguments.ep_name} plugin checked")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
