"""What a user of this feedstock's packages does on a GPU: `import onnxruntime`, then a session with
`providers=["CUDAExecutionProvider"]`, run with the environment's own interpreter (package.py). --ep names
another plugin's EP, in the CUDA plugin's place (the tests run it with one that needs no GPU).

    python user_check.py MODEL [--ep NAME]

Passes when the import registered the plugin (its devices are listed), the session took every node onto
the EP with the CPU EP's fallback off, and the result matches the CPU EP's. The model (the recipe's
load-test model, recipe/test_plugin_load.py) is saved to MODEL for the C++ program (consumer/). Exit 1
with the reason otherwise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import onnxruntime as ort
# the load test's model, inputs and checks: package.py runs this with the recipe's folder on PYTHONPATH
import test_plugin_load as load_test


def main(model_path: Path, ep: str) -> int:
    model, inputs = load_test.small_model(), load_test.model_inputs()
    model_path.write_bytes(model)
    load_test.step("core", f"onnxruntime {ort.__version__} from {Path(ort.__file__).parent}")
    devices = load_test.ep_devices(ep)
    load_test.step("devices", ", ".join(load_test.describe(d) for d in devices) or "none")
    if not devices:
        print(f"FAILED: `import onnxruntime` registered no {ep} device", file=sys.stderr)
        return 1
    options = ort.SessionOptions()
    options.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    options.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    try:
        session = ort.InferenceSession(model, sess_options=options, providers=[ep])
        load_test.step("session", load_test.prove_nodes_on_ep(session, ep))
        compared = load_test.matching_cpu(session.run(None, inputs)[0], load_test.cpu_reference(model, inputs), ep)
    except (load_test.PluginCheckFailed, *load_test.CORE_ERRORS) as error:
        print(f"FAILED: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    load_test.step("compare", compared)
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path, help="where the model is saved, for the C++ program")
    parser.add_argument("--ep", default="CUDAExecutionProvider", help="the EP whose plugin the import registers")
    arguments = parser.parse_args()
    sys.exit(main(arguments.model, arguments.ep))
