"""scripts/device/speed.py, the GPU machine's speed comparison, run here with two real ONNX Runtime cores
from PyPI on the CPU EP: what it records of each model and batch size, and how its table compares them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import speed
from conftest import FLOOR_CORE_VERSION, REPO
from cores import NEWEST_CORE
from feedstock.inputs import load_bot_fields
from support.pyenvs import core_env, run
from support.wheels import GGML, linux_library

SPEED = REPO / "scripts" / "device" / "speed.py"

# y = Relu(MatMul(x, w)) with x's first dimension left open, as the exported models' batch is
MODEL = """
import sys
import numpy as np
from onnx import TensorProto, helper, numpy_helper, save
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 64])
w = numpy_helper.from_array(np.eye(64, dtype=np.float32), "w")
graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["p"]), helper.make_node("Relu", ["p"], ["y"])],
                          "speed", [x], [y], [w])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
save(model, sys.argv[1])
"""

pytestmark = [pytest.mark.network, pytest.mark.skipif(sys.platform != "linux", reason="the cores' linux wheels")]


@pytest.fixture(scope="module")
def cores() -> dict[str, Path]:
    return {"floor": core_env(FLOOR_CORE_VERSION), "newest": core_env(NEWEST_CORE)}


def measure(python: Path, label: str, models: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SPEED), "measure", "--python", str(python), "--label", label,
                           "--models", str(models), "--out", str(out), "--warmup", "2", "--runs", "5", *extra],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600)


def test_each_model_runs_at_each_batch_in_its_own_core_and_the_table_gives_the_ratio(
        cores: dict[str, Path], tmp_path: Path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    made = run(cores["newest"], "-c", MODEL, str(models / "tiny.onnx"))
    assert made.returncode == 0, made.stderr
    results = {}
    for label, python in cores.items():
        # --preload, as the GPU machine measures onnxruntime-gpu: a CPU core loads no CUDA library and runs on
        preload = ["--preload"] if label == "newest" else []
        done = measure(python, label, models, tmp_path / f"{label}.json", "--ep", "CPUExecutionProvider", *preload)
        assert done.returncode == 0, done.stdout + done.stderr
        results[label] = json.loads((tmp_path / f"{label}.json").read_text())
    expected_core = {"floor": FLOOR_CORE_VERSION, "newest": NEWEST_CORE}
    for label, result in results.items():
        assert [(c["model"], c["batch"]) for c in result["cases"]] == [("tiny", 1), ("tiny", 8)]
        for case in result["cases"]:
            assert case["core"] == expected_core[label]
            assert case["preloaded"] == (label == "newest")
            assert case["operators"] == {"CPUExecutionProvider": {"MatMul": 1, "Relu": 1}}
            assert 0 < case["median_ms"] <= case["p90_ms"] and case["create_s"] > 0
            assert case["peak_gpu_mib"] is None  # no nvidia-smi here
    table = subprocess.run([sys.executable, str(SPEED), "table", "--plugin", str(tmp_path / "floor.json"),
                            "--other", str(tmp_path / "newest.json")],
                           capture_output=True, text=True, check=True).stdout
    for floor, newest in zip(results["floor"]["cases"], results["newest"]["cases"], strict=True):
        ratio = f"{newest['median_ms'] / floor['median_ms']:.3f}"
        assert f"| tiny | {floor['batch']} | {floor['median_ms']} / {floor['p90_ms']} | " \
               f"{newest['median_ms']} / {newest['p90_ms']} | {ratio} |" in table, table
        assert "| 2 of 2 / 2 of 2 |" in table
    assert "- tiny: MatMul ×1, Relu ×1; newest: the same at every batch size" in table, table


def test_an_ep_the_core_lacks_fails_the_measurement_and_says_why(cores: dict[str, Path], tmp_path: Path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    assert run(cores["newest"], "-c", MODEL, str(models / "tiny.onnx")).returncode == 0
    done = measure(cores["newest"], "newest", models, tmp_path / "out.json", "--ep", "CUDAExecutionProvider",
                   "--batches", "1")
    assert done.returncode == 1
    (case,) = json.loads((tmp_path / "out.json").read_text())["cases"]
    assert case["error"].startswith("exit 1:") and "CUDAExecutionProvider" in case["error"], case


def test_a_plugin_the_core_has_not_registered_is_registered_from_library(tmp_path: Path) -> None:
    """measure --library, as the GPU machine measures the plugin in PyPI's core of the recipe's version, which has
    no hook that registers it: here the real ggml plugin EP from PyPI, which runs on the CPU, in that core."""
    models, version = tmp_path / "models", load_bot_fields(REPO).version
    core = core_env(version)
    models.mkdir()
    assert run(core, "-c", MODEL, str(models / "tiny.onnx")).returncode == 0
    unregistered = measure(core, "ggml", models, tmp_path / "none.json", "--ep", GGML.ep_name,
                           "--batches", "1")
    assert unregistered.returncode == 1 and "this core has no such EP" in unregistered.stdout
    done = measure(core, "ggml", models, tmp_path / "ggml.json", "--ep", GGML.ep_name, "--batches", "1",
                   "--library", str(linux_library(GGML)))
    assert done.returncode == 0, done.stdout + done.stderr
    (case,) = json.loads((tmp_path / "ggml.json").read_text())["cases"]
    assert case["core"] == version and case["providers"][0] == GGML.ep_name, case
    assert GGML.ep_name in case["operators"], case


def test_the_table_takes_each_cases_median_over_a_sides_rounds(cores: dict[str, Path], tmp_path: Path) -> None:
    """The GPU machine measures each side several times in alternation; the table compares each case's median
    over a side's rounds, and its largest peak memory."""
    models = tmp_path / "models"
    models.mkdir()
    assert run(cores["newest"], "-c", MODEL, str(models / "tiny.onnx")).returncode == 0
    rounds = []
    for number in range(3):
        out = tmp_path / f"newest-{number}.json"
        done = measure(cores["newest"], "newest", models, out, "--ep", "CPUExecutionProvider", "--batches", "1")
        assert done.returncode == 0, done.stderr
        rounds.append(json.loads(out.read_text())["cases"][0])
    plugin = [str(tmp_path / f"newest-{n}.json") for n in range(3)]
    table = subprocess.run([sys.executable, str(SPEED), "table", "--plugin", *plugin,
                            "--other", str(tmp_path / "newest-0.json")],
                           capture_output=True, text=True, check=True).stdout
    median = sorted(r["median_ms"] for r in rounds)[1]
    p90 = sorted(r["p90_ms"] for r in rounds)[1]
    first = rounds[0]
    assert f"| tiny | 1 | {median} / {p90} | {first['median_ms']} / {first['p90_ms']} | " \
           f"{first['median_ms'] / median:.3f} |" in table, table


def test_merging_rounds_keeps_a_failed_round_and_the_largest_peak(tmp_path: Path) -> None:
    """A case that failed in any round is that failure, not a median of the rounds that ran; the peak
    memory is the largest any round saw, where some rounds saw none."""
    def case(batch: int, median: float, peak: int | None, error: str = "") -> dict:
        made = {"model": "m", "batch": batch, "peak_gpu_mib": peak}
        return made | ({"error": error} if error else {"median_ms": median, "p90_ms": median * 2, "create_s": 0.5})

    rounds = [{"label": "x", "ep": "E", "cases": [case(1, 3.0, None), case(8, 9.0, 100)]},
              {"label": "x", "ep": "E", "cases": [case(1, 1.0, 700), case(8, 0, None, "exit 1: out of memory")]},
              {"label": "x", "ep": "E", "cases": [case(1, 2.0, 500), case(8, 7.0, 300)]}]
    one, eight = speed.merged(rounds)["cases"]
    assert (one["median_ms"], one["p90_ms"], one["peak_gpu_mib"], one["rounds"]) == (2.0, 4.0, 700, 3)
    assert eight["error"] == "exit 1: out of memory" and "median_ms" not in eight


def test_the_table_says_when_the_other_build_ran_other_operators_on_the_ep() -> None:
    """A side whose optimized graph differs (another fusion, say) is named, model by model."""
    def result(label: str, operators: list[dict]) -> dict:
        return {"label": label, "ep": "E", "cases": [
            {"model": "m", "batch": batch, "median_ms": 1.0, "p90_ms": 1.0, "create_s": 0.1, "peak_gpu_mib": None,
             "operators": {"E": ops, "CPUExecutionProvider": {"Shape": 2}}}
            for batch, ops in zip((1, 8), operators, strict=True)]}

    fused = {"com.microsoft:SkipLayerNormalization": 2, "MatMul": 4}
    plugin = result("plugin", [fused, fused])
    table = speed.table(plugin, result("other", [fused, {"Add": 2, "LayerNormalization": 2, "MatMul": 4}]))
    assert "- m: MatMul ×4, com.microsoft:SkipLayerNormalization ×2; other: not the same at every batch size" in table
    assert "| 6 of 8 / 6 of 8 |" in table and "| 6 of 8 / 8 of 10 |" in table, table
    assert "other: the same at every batch size" in speed.table(plugin, result("other", [fused, fused]))


def test_the_chain_model_is_one_add_per_node_and_the_profiles_give_each_operators_time(
        cores: dict[str, Path], tmp_path: Path) -> None:
    """export's dispatch probe (CHAIN_NODES Adds), made with onnx alone, runs every Add on the EP; `measure
    --profile` records each operator's mean node time from ONNX Runtime's profiler, and `table --profiles`
    lists the two sides' times and what the difference comes to in one run."""
    models = tmp_path / "models"
    models.mkdir()
    made = run(cores["newest"], "-c", f"import sys; sys.path.insert(0, {str(SPEED.parent)!r}); import speed; "
                                      f"speed.chain(speed.Path(sys.argv[1]))", str(models / "chain.onnx"))
    assert made.returncode == 0, made.stderr
    assert run(cores["newest"], "-c", MODEL, str(models / "tiny.onnx")).returncode == 0
    for label, python in cores.items():
        done = measure(python, label, models, tmp_path / f"{label}.json", "--ep", "CPUExecutionProvider",
                       "--batches", "1", "--profile")
        assert done.returncode == 0, done.stdout + done.stderr
    results = {label: {c["model"]: c for c in json.loads((tmp_path / f"{label}.json").read_text())["cases"]}
               for label in cores}
    for cases in results.values():
        assert cases["chain"]["operators"] == {"CPUExecutionProvider": {"Add": speed.CHAIN_NODES}}
        assert set(cases["chain"]["operator_us"]) == {"Add"} and cases["chain"]["operator_us"]["Add"] > 0
        assert set(cases["tiny"]["operator_us"]) == {"MatMul", "Relu"}
    table = subprocess.run([sys.executable, str(SPEED), "table", "--plugin", str(tmp_path / "floor.json"), "--other",
                            str(tmp_path / "newest.json"), "--profiles", str(tmp_path / "floor.json"),
                            str(tmp_path / "newest.json")], capture_output=True, text=True, check=True).stdout
    mine, theirs = results["floor"]["chain"]["operator_us"]["Add"], results["newest"]["chain"]["operator_us"]["Add"]
    extra = (theirs - mine) * speed.CHAIN_NODES
    assert f"| chain | 1 | Add | {speed.CHAIN_NODES} | {mine} | {theirs} | {extra:.0f} |" in table, table


def test_cuda_graph_cases_run_on_outputs_bound_once_and_sit_beside_the_plain_ones_in_the_table(
        cores: dict[str, Path], tmp_path: Path) -> None:
    """`measure --cuda-graph` runs each model on inputs and outputs bound once in the EP's memory (the CPU's here,
    which has no graphs: the option is the CUDA EP's) and names its cases apart, so that `table` lists them
    beside the same side's plain cases."""
    models = tmp_path / "models"
    models.mkdir()
    assert run(cores["newest"], "-c", MODEL, str(models / "tiny.onnx")).returncode == 0
    files = {}
    for graph in ([], ["--cuda-graph"]):
        files[bool(graph)] = tmp_path / f"newest{len(graph)}.json"
        done = measure(cores["newest"], "newest", models, files[bool(graph)], "--ep", "CPUExecutionProvider",
                       "--batches", "1", "3", *graph)
        assert done.returncode == 0, done.stdout + done.stderr
    cases = json.loads(files[True].read_text())["cases"]
    assert [(c["model"], c["batch"], c["bound_outputs"]) for c in cases] == [
        ("tiny with CUDA graphs", 1, {"y": [1, 64]}), ("tiny with CUDA graphs", 3, {"y": [3, 64]})]
    assert all(c["median_ms"] > 0 for c in cases)
    table = subprocess.run([sys.executable, str(SPEED), "table", "--plugin", str(files[False]), str(files[True]),
                            "--other", str(files[False]), str(files[True])], capture_output=True, text=True,
                           check=True).stdout
    rows = [tuple(row.split(" | ")[:2]) for row in table.splitlines() if row.startswith("| tiny")]
    assert rows == [("| tiny", "1"), ("| tiny", "3"), ("| tiny with CUDA graphs", "1"),
                    ("| tiny with CUDA graphs", "3")]


def test_py_spy_samples_of_the_chain_are_summed_where_a_run_spends_the_hosts_time(
        cores: dict[str, Path], tmp_path: Path) -> None:
    """What the speed step does with each side's chain (package.py's chain_samples), with the real py-spy and the CPU
    EP: the samples inside the session's runs, by the library that was running, whose shares make the whole run
    and whose microseconds a node make the unsampled median's; most of them in ONNX Runtime's own library."""
    models = tmp_path / "models"
    models.mkdir()
    made = run(cores["newest"], "-c", f"import sys; sys.path.insert(0, {str(SPEED.parent)!r}); import speed; "
                                      f"speed.chain(speed.Path(sys.argv[1]))", str(models / speed.CHAIN_FILE))
    assert made.returncode == 0, made.stderr
    unsampled = measure(cores["newest"], "newest", models, tmp_path / "unsampled.json", "--ep", "CPUExecutionProvider",
                        "--batches", "1")
    assert unsampled.returncode == 0, unsampled.stdout + unsampled.stderr
    samples = tmp_path / "samples.txt"
    sampled = subprocess.run(
        [str(Path(sys.executable).with_name("py-spy")), "record", "--native", "--subprocesses", "--idle",
         "--rate", "1000", "--format", "raw", "--output", str(samples), "--", sys.executable, str(SPEED), "measure",
         "--python", str(cores["newest"]), "--label", "newest", "--models", str(models),
         "--out", str(tmp_path / "sampled.json"), "--ep", "CPUExecutionProvider", "--batches", "1",
         "--warmup", "20", "--runs", "2000"],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300)
    refused = ("permission denied", "no python processes found")
    if sampled.returncode != 0 and any(reason in sampled.stderr.lower() for reason in refused):
        pytest.skip(f"py-spy may not trace a child process here: {sampled.stderr.strip()[-300:]}")
    assert sampled.returncode == 0, sampled.stdout + sampled.stderr
    summary = subprocess.run([sys.executable, str(SPEED), "hot", str(samples), str(tmp_path / "unsampled.json")],
                             capture_output=True, text=True, check=True).stdout
    median = json.loads((tmp_path / "unsampled.json").read_text())["cases"][0]["median_ms"]
    per_node = median * 1000 / speed.CHAIN_NODES
    assert f"whose median was {median} ms ({per_node:.3f} µs a node) unsampled" in summary, summary
    libraries = summary.split("| library running |")[1].split("\n\n")[0].splitlines()[2:]
    rows = [[cell.strip() for cell in row.strip("|").split("|")] for row in libraries]
    shares = [float(share.rstrip(" %")) for _, share, _ in rows]
    assert 99 <= sum(shares) <= 101, summary
    assert abs(sum(float(micro) for _, _, micro in rows) - per_node) <= 0.01 * per_node + 0.002 * len(rows), summary
    # the CPU EP's Adds run in onnxruntime's own library, whichever does most of each run
    assert rows[0][0].startswith("onnxruntime_pybind11_state") and shares[0] > 40, summary


def test_hot_names_the_plugins_frames_of_the_gpu_machines_samples_in_short(tmp_path: Path) -> None:
    """py-spy's samples of the plugin's chain on the GPU machine (docs/gpu-runs/2026-12-05-speed-profile/): `hot`
    names the adapter's frames, with their template and parameter lists emptied, so that no row runs to the
    thousands of characters of the C++ names the samples carry."""
    import gzip

    run_files = REPO / "docs" / "gpu-runs" / "2026-12-05-speed-profile"
    samples = tmp_path / "samples.txt"
    samples.write_bytes(gzip.decompress((run_files / "speed-plugin-chain-samples.txt.gz").read_bytes()))
    assert max(len(line) for line in samples.read_text().splitlines()) > 2000  # what there is to shorten
    summary = speed.hot(samples, json.loads((run_files / "speed-plugin-1.json").read_text()))
    assert max(len(line) for line in summary.splitlines()) <= speed.FRAME_CHARACTERS + 60, summary
    assert "| `onnxruntime::PluginEpOpKernel::Compute (onnxruntime/capi/onnxruntime_pybind11_state.so)` | 88.2 % | " \
           "5.870 |" in summary, summary
    assert "| `onnxruntime::ep::adapter::OpKernelContext::Input<…> (libonnxruntime_providers_cuda.so)` |" in summary
    assert "| `[no symbol] (libcuda.so.580.159.04)` | 41.9 % | 2.792 |" in summary
