"""scripts/cores.py: the onnx that upstream's operator suite makes its models with is one every core reads."""

from __future__ import annotations

import pytest

from conftest import FLOOR_CORE_VERSION
from cores import SUITE_ONNX
from support.pyenvs import python_env, run

# A model as the suite makes most of its own: helper.make_model's defaults, the onnx's IR version and newest opset
ADD_MODEL = """
import numpy as np, onnx, onnxruntime
from onnx import TensorProto, helper
tensor = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, [2])
model = helper.make_model(helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "add",
                                            [tensor("a"), tensor("b")], [tensor("y")]))
session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
(y,) = session.run(None, {"a": np.ones(2, np.float32), "b": np.full(2, 2, np.float32)})
print(onnx.__version__, onnxruntime.__version__, model.ir_version, model.opset_import[0].version, y.tolist())
"""


@pytest.mark.network
def test_the_floor_core_runs_a_model_the_suites_onnx_makes() -> None:
    python = python_env("suite-onnx", [f"onnxruntime=={FLOOR_CORE_VERSION}", f"onnx=={SUITE_ONNX}", "numpy"])
    result = run(python, "-c", ADD_MODEL)
    assert result.returncode == 0, f"onnx {SUITE_ONNX}'s model, on onnxruntime {FLOOR_CORE_VERSION}:\n{result.stderr}"
    onnx, core, *_, y = result.stdout.split(maxsplit=4)
    assert (onnx, core, y.strip()) == (SUITE_ONNX, FLOOR_CORE_VERSION, "[3.0, 3.0]")
