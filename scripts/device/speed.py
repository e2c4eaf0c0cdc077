#!/usr/bin/env python3
"""The plugin's speed against another build of ONNX Runtime's CUDA EP, model by model, on the GPU machine.

    python3 speed.py export DIR
    python3 speed.py measure --python PY --label LABEL --models DIR --out FILE [--path P] [--preload] [--ep EP]
                             [--library LIB] [--batches 1 8] [--warmup N] [--runs N] [--profile | --cuda-graph]
    python3 speed.py table --plugin FILE [FILE ...] --other FILE [FILE ...] [--profiles FILE FILE]
    python3 speed.py hot SAMPLES RESULT

`export` writes the models with the machine's torch and transformers: a BERT-style encoder
(transformers' BertModel at bert-base's size, random weights, sequences of 128) and a ResNet-50
(torchvision, random weights), each in fp32 and fp16, with a batch dimension left open; and, with onnx
alone, a chain of CHAIN_NODES Adds on 64 floats a row, whose time is the EP's cost of running a node
rather than any kernel's. `measure` runs every model at each
batch size in a fresh process of the interpreter PY (with `--path` put on its PYTHONPATH, for a wheel
unpacked beside the environment; `--preload`: that build loads the CUDA libraries of the interpreter's
NVIDIA wheels first, with its `preload_dlls`, as onnxruntime-gpu's users do; `--library`: the plugin library
registered under EP where the core has not registered it already, as a core without this feedstock's hook
needs): the session's creation time,
then WARMUP runs, then RUNS timed runs (median and p90), the operators of the optimized graph's nodes each EP
took (`domain:op_type`, with their count), and the process's peak GPU memory as nvidia-smi reports it (none
where there is no nvidia-smi). Both sides get the same session options: the defaults, with `providers=[EP]`
and the CPU EP's fallback left on, so that a node an EP does not take shows in its count instead of failing
the session. `table` compares the plugin's result files with the other build's
(each side's rounds merged: the median of each case's medians) and writes Markdown with the ratio of
each median, then the operators each model ran on the plugin's EP. `measure --profile` also records, from
ONNX Runtime's own profiler, the mean time of each operator's nodes on the EP over the timed runs (the
profiler's own cost included, so its times are not the unprofiled ones); `table --profiles` takes one
such file of each side and lists them, operator by operator. `measure --cuda-graph` runs each model with the
EP's CUDA graphs (`enable_cuda_graph`), its inputs and outputs bound once in the EP's device memory, as a graph
needs; its cases are named `<model> with CUDA graphs`, so that `table` puts them beside the others. `hot` reads
py-spy's samples of a `measure` of the chain (`py-spy record --native --format raw`) and writes Markdown of where
the host's time inside the session's runs went: by library, by function and by the native frames below the run,
each as a share of those samples and, with the chain's median from RESULT (a `measure` without the sampler, whose
pauses slow the runs it samples), as microseconds a node. Exit 0 when every run of `measure` succeeded.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

BERT_SEQUENCE = 128
# the most one model at one batch size may take, process start and session creation included (a case takes
# seconds on the GPU machine; the pipeline stops a side's whole measurement at 600 s)
CASE_SECONDS = 60
IMAGE = 224
CHAIN_NODES = 500
# the file export writes the chain to
CHAIN_FILE = f"add-chain-{CHAIN_NODES}.onnx"


def chain(path: Path) -> Path:
    """CHAIN_NODES Adds one after the other on a [batch, 64] float tensor: the same tiny kernel each time, so
    that a run's time is what the EP spends on each node (dispatch, launch) times the nodes."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper, save

    names = ["x", *(f"t{i}" for i in range(1, CHAIN_NODES)), "y"]
    nodes = [helper.make_node("Add", [before, "one"], [after])
             for before, after in zip(names, names[1:], strict=False)]  # each name with the next
    graph = helper.make_graph(nodes, "add-chain",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 64])],
                              [numpy_helper.from_array(np.ones(64, np.float32), "one")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    save(model, str(path))
    return path


def export(folder: Path) -> list[Path]:
    """The four models: each exported in fp32 by torch, the batch dimension named `batch`, and converted to
    fp16 by ONNX Runtime's own converter (onnxruntime.transformers.float16, which keeps in fp32 the
    operators that have no fp16 kernel), as fp16 ONNX models are usually made. torch's fp16 export is not
    used: its BERT binds LayerNormalization to float and float16 at once, which no core loads."""
    import onnx
    import onnxruntime
    import torch
    import torchvision
    from onnxruntime.transformers.float16 import convert_float_to_float16
    from transformers import BertConfig, BertModel

    class Encoder(torch.nn.Module):
        """BertModel called by keyword, as transformers 5's forward takes its other arguments by keyword
        (positional tracing gives `got multiple values for argument 'use_cache'`): its last hidden state."""

        def __init__(self) -> None:
            super().__init__()
            self.bert = BertModel(BertConfig())

        def forward(self, input_ids, attention_mask):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    folder.mkdir(parents=True, exist_ok=True)
    ids = torch.randint(0, BertConfig().vocab_size, (1, BERT_SEQUENCE))
    written = []
    for name, model, inputs, names in (("bert", Encoder(), (ids, torch.ones_like(ids)),
                                        ["input_ids", "attention_mask"]),
                                       ("resnet50", torchvision.models.resnet50(), (torch.rand(1, 3, IMAGE, IMAGE),),
                                        ["image"])):
        path = folder / f"{name}-fp32.onnx"
        with torch.no_grad():
            torch.onnx.export(model.eval(), inputs, str(path), input_names=names, output_names=["out"],
                              opset_version=17, dynamic_axes={n: {0: "batch"} for n in names}, dynamo=False)
        half = folder / f"{name}-fp16.onnx"
        onnx.save(convert_float_to_float16(onnx.load(str(path)), keep_io_types=False), str(half))
        written += [path, half]
    written.append(chain(folder / CHAIN_FILE))
    print(f"torch {torch.__version__}, fp16 by onnxruntime {onnxruntime.__version__}'s converter", flush=True)
    for path in written:
        print(f"exported {path} ({path.stat().st_size} bytes)", flush=True)
    return written


def feeds(session, batch: int) -> dict:
    """Inputs of the session's types, with the open batch dimension set to `batch` and token ids in range."""
    import numpy as np

    types = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(int64)": np.int64,
             "tensor(int32)": np.int32}
    rng = np.random.default_rng(0)
    made = {}
    for item in session.get_inputs():
        shape = [batch if not isinstance(d, int) else d for d in item.shape]
        kind = types[item.type]
        values = rng.integers(0, 1000, shape) if np.issubdtype(kind, np.integer) else rng.random(shape)
        made[item.name] = values.astype(kind)
    return made


def operator_times(profile: Path, ep: str, warmup: int) -> dict[str, float]:
    """From an ONNX Runtime profile: the mean microseconds of each operator's nodes on `ep`, in the runs after
    the first `warmup`."""
    events = json.loads(profile.read_text())
    runs = sorted(e["ts"] for e in events if e.get("name") == "model_run")
    if len(runs) <= warmup:
        raise ValueError(f"{profile}: {len(runs)} runs recorded, none after the {warmup} of warm-up")
    timed: dict[str, list[int]] = {}
    for event in events:
        details = event.get("args", {})
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time") and details.get("provider") == ep \
                and event["ts"] >= runs[warmup]:
            timed.setdefault(details["op_name"], []).append(event["dur"])
    return {name: round(statistics.mean(times), 1) for name, times in sorted(timed.items())}


def bound(session, model: Path, ep: str, inputs: dict):
    """The session's run on `inputs` and outputs bound once in `ep`'s device memory (the CPU's for the CPU EP), as
    CUDA graphs need: a graph replays into the buffers it was captured with. The outputs are sized by a run of a
    plain session of the model. Returns the run and the outputs' shapes."""
    import onnxruntime as ort

    device = "cpu" if ep == "CPUExecutionProvider" else "cuda"
    results = ort.InferenceSession(str(model), providers=[ep]).run(None, inputs)
    binding = session.io_binding()
    values = [ort.OrtValue.ortvalue_from_numpy(value, device, 0) for value in inputs.values()]
    outputs = [ort.OrtValue.ortvalue_from_shape_and_type(list(result.shape), result.dtype, device, 0)
               for result in results]
    for name, value in zip(inputs, values, strict=True):
        binding.bind_ortvalue_input(name, value)
    for meta, value in zip(session.get_outputs(), outputs, strict=True):
        binding.bind_ortvalue_output(meta.name, value)

    def run() -> list:
        session.run_with_iobinding(binding)
        return [*values, *outputs]  # the bound OrtValues live as long as the run does

    return run, {meta.name: list(result.shape) for meta, result in zip(session.get_outputs(), results, strict=True)}


def one(model: Path, batch: int, ep: str, warmup: int, runs: int, preload: bool, profile: bool,
        graph: bool = False, library: str = "") -> dict:
    """One model at one batch size in this process: what `measure` records."""
    import tempfile

    import onnxruntime as ort

    if preload:
        ort.preload_dlls()
    if library and not any(device.ep_name == ep for device in ort.get_ep_devices()):
        ort.register_execution_provider_library(ep, library)
    options = ort.SessionOptions()
    options.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    if profile:
        options.enable_profiling = True
        options.profile_file_prefix = str(Path(tempfile.mkdtemp()) / "profile")
    started = time.perf_counter()
    session = ort.InferenceSession(str(model), sess_options=options,
                                   providers=[(ep, {"enable_cuda_graph": "1"}) if graph else ep])
    created = time.perf_counter() - started
    if ep not in session.get_providers():
        # a core that lacks the EP runs the session on the CPU EP with no more than a warning
        sys.exit(f"{ep} is not among the session's providers {session.get_providers()}: this core has no such EP")
    operators: dict[str, dict[str, int]] = {}
    for assignment in session.get_provider_graph_assignment_info():
        counts = operators.setdefault(assignment.ep_name, {})
        for node in assignment.get_nodes():
            name = f"{node.domain}:{node.op_type}" if node.domain else node.op_type
            counts[name] = counts.get(name, 0) + 1
    inputs = feeds(session, batch)
    # with CUDA graphs, the first run captures the graph and the others replay it
    run, shapes = bound(session, model, ep, inputs) if graph else ((lambda: session.run(None, inputs)), None)
    for _ in range(warmup):
        run()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        run()
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return {"core": ort.__version__, "preloaded": preload, "providers": session.get_providers(), "operators": operators,
            **({"bound_outputs": shapes} if graph else {}),
            "create_s": round(created, 3), "median_ms": round(statistics.median(times), 3),
            "p90_ms": round(times[math.ceil(0.9 * len(times)) - 1], 3), "runs": runs, "warmup": warmup,
            **({"operator_us": operator_times(Path(session.end_profiling()), ep, warmup)} if profile else {})}


class PeakMemory:
    """The largest GPU memory nvidia-smi reports for one process while it runs, in MiB (None without nvidia-smi)."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self.stop = pid, None, threading.Event()
        self.thread = threading.Thread(target=self.poll, daemon=True)
        if shutil.which("nvidia-smi"):
            self.thread.start()

    def poll(self) -> None:
        while not self.stop.is_set():
            query = ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]
            said = subprocess.run(query, capture_output=True, text=True).stdout
            for line in said.splitlines():
                pid, _, used = line.partition(",")
                if pid.strip() == str(self.pid) and used.strip().isdigit():
                    self.peak = max(self.peak or 0, int(used))
            self.stop.wait(0.1)

    def done(self) -> int | None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join()
        return self.peak


def measure(args: argparse.Namespace) -> int:
    results = {"label": args.label, "python": args.python, "ep": args.ep, "cases": []}
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if args.path:
        environment["PYTHONPATH"] = args.path
    failed = 0
    for model in sorted(args.models.glob("*.onnx")):
        for batch in args.batches:
            command = [args.python, __file__, "one", str(model), str(batch), args.ep, str(args.warmup), str(args.runs),
                       str(int(args.preload)), str(int(args.profile)), str(int(args.cuda_graph)), args.library]
            child = subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
            memory = PeakMemory(child.pid)
            try:
                out, err = child.communicate(timeout=CASE_SECONDS)
            except subprocess.TimeoutExpired:
                child.kill()
                out, err = child.communicate()
                err += f"\n(stopped after {CASE_SECONDS} s)"
            case = {"model": f"{model.stem} with CUDA graphs" if args.cuda_graph else model.stem, "batch": batch,
                    "peak_gpu_mib": memory.done()}
            if child.returncode == 0:
                case |= json.loads(out.strip().splitlines()[-1])
            else:
                failed += 1
                case["error"] = f"exit {child.returncode}: {err.strip()[-1500:]}"
            results["cases"].append(case)
            print(json.dumps(case), flush=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    return 1 if failed else 0


def merged(rounds: list[dict]) -> dict:
    """One side's rounds (`measure` run again, in alternation with the other side) as one result: each case's
    median over the rounds of its median, p90 and session time, and its largest peak memory. A case that
    failed in any round is that round's failure."""
    seen: dict[tuple[str, int], list[dict]] = {}
    for result in rounds:
        for case in result["cases"]:
            seen.setdefault((case["model"], case["batch"]), []).append(case)
    cases = []
    for runs in seen.values():
        failed = [case for case in runs if "error" in case]
        if failed:
            cases.append(failed[0])
            continue
        peaks = [case["peak_gpu_mib"] for case in runs if case["peak_gpu_mib"] is not None]
        cases.append(runs[0] | {key: round(statistics.median(case[key] for case in runs), 3)
                                for key in ("median_ms", "p90_ms", "create_s")}
                     | {"peak_gpu_mib": max(peaks, default=None), "rounds": len(runs)})
    return rounds[0] | {"cases": cases}


def table(plugin: dict, other: dict) -> str:
    """Markdown: each case side by side, with the other build's median over the plugin's; then, model by model,
    the operators the plugin's EP ran, and whether the other build's EP ran the same."""
    rows = [f"| model | batch | {plugin['label']}: median / p90 ms | {other['label']}: median / p90 ms | "
            f"{other['label']} ÷ {plugin['label']} | session s | peak GPU MiB | nodes on {plugin['ep']} |",
            "|---|---|---|---|---|---|---|---|"]
    theirs = {(c["model"], c["batch"]): c for c in other["cases"]}

    def on_ep(case: dict) -> str:
        return f"{sum(case['operators'].get(plugin['ep'], {}).values())} of " \
               f"{sum(n for counts in case['operators'].values() for n in counts.values())}"

    # each model's operators on the plugin's EP at its first batch size, and whether the other EP ran the same at each
    ran: dict[str, tuple[dict[str, int], bool]] = {}
    for mine in plugin["cases"]:
        them = theirs.get((mine["model"], mine["batch"]), {})
        if "median_ms" not in mine or "median_ms" not in them:
            rows.append(f"| {mine['model']} | {mine['batch']} | {mine.get('error', '')[:80]} "
                        f"| {them.get('error', '')[:80]} | | | | |")
            continue
        rows.append(f"| {mine['model']} | {mine['batch']} | {mine['median_ms']} / {mine['p90_ms']} | "
                    f"{them['median_ms']} / {them['p90_ms']} | {them['median_ms'] / mine['median_ms']:.3f} | "
                    f"{mine['create_s']} / {them['create_s']} | {mine['peak_gpu_mib']} / {them['peak_gpu_mib']} | "
                    f"{on_ep(mine)} / {on_ep(them)} |")
        mine_ran, them_ran = (case["operators"].get(plugin["ep"], {}) for case in (mine, them))
        first, same = ran.get(mine["model"], (mine_ran, True))
        ran[mine["model"]] = (first, same and mine_ran == them_ran)
    rows += ["", f"The operators each model ran on {plugin['ep']}, with their count:", ""]
    rows += [f"- {model}: {', '.join(f'{op} ×{n}' for op, n in sorted(ops.items()))}; {other['label']}: "
             f"{'the same' if same else 'not the same'} at every batch size" for model, (ops, same) in ran.items()]
    return "\n".join(rows) + "\n"


def profiles(plugin: dict, other: dict) -> str:
    """Markdown: each case's operators on the EP, with the mean microseconds of a node of each on either side
    (measure --profile), and what its nodes add up to in one run."""
    rows = [f"| model | batch | operator | nodes | {plugin['label']}: µs a node | {other['label']}: µs a node | "
            f"{other['label']} − {plugin['label']}: µs a run |", "|---|---|---|---|---|---|---|"]
    theirs = {(c["model"], c["batch"]): c for c in other["cases"]}
    for mine in plugin["cases"]:
        them = theirs.get((mine["model"], mine["batch"]), {})
        if "operator_us" not in mine or "operator_us" not in them:
            continue
        counts: dict[str, int] = {}  # by operator type, as the profiler names them (no domain)
        for name, count in mine["operators"].get(plugin["ep"], {}).items():
            kind = name.split(":")[-1]
            counts[kind] = counts.get(kind, 0) + count
        for name in sorted({*mine["operator_us"], *them["operator_us"]}):
            micro, there = mine["operator_us"].get(name), them["operator_us"].get(name)
            gap = "" if None in (micro, there) else f"{(there - micro) * counts.get(name, 0):.0f}"
            rows.append(f"| {mine['model']} | {mine['batch']} | {name} | {counts.get(name, 0)} "
                        f"| {'' if micro is None else micro} | {'' if there is None else there} | {gap} |")
    return "\n".join(rows) + "\n"


# the Python frame of a session's run in py-spy's samples: what lies below it is the run's own time
SESSION_RUN = "Session.run ("
# the longest frame name the summary prints, its template and parameter lists emptied first
FRAME_CHARACTERS = 120


def short(frame: str) -> str:
    """A frame as the summary names it: its function with every `<...>` and `(...)` list emptied, cut to
    FRAME_CHARACTERS, and its library after it."""
    name, _, place = frame.rpartition(" (")
    if not name:
        return frame
    for inner, empty in ((r"<[^<>]*>", "\x01"), (r"\([^()]*\)", "\x02")):
        while re.search(inner, name):
            name = re.sub(inner, empty, name)
    name = name.replace("\x01", "<…>").replace("\x02", "(…)")
    return f"{name[:FRAME_CHARACTERS - 1] + '…' if len(name) > FRAME_CHARACTERS else name} ({place}"


def hot(samples: Path, result: dict, top: int = 15) -> str:
    """Markdown: the samples taken inside a session's run (`py-spy record --native --format raw`: each line a stack,
    root first, and its count), by the library of the frame that was running, by that frame, and by the native
    frames below the run that a sample passed through; each a share of the samples and, at the chain's median in
    `result`, microseconds a node (none where that case failed). The samples take in the warm-up runs, and the
    tail of the runs as well as their median."""
    stacks: list[tuple[list[str], int]] = []
    for line in samples.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        runs = [i for i, frame in enumerate(frames) if frame.startswith(SESSION_RUN)]
        if runs:
            stacks.append((frames[runs[-1] + 1:] or frames[runs[-1]:], int(count)))
    total = sum(count for _, count in stacks)
    if not total:
        return f"{samples.name}: no sample inside {SESSION_RUN.strip(' (')}\n"
    medians = [c["median_ms"] for c in result["cases"]
               if c["model"] == Path(CHAIN_FILE).stem and c["batch"] == 1 and "median_ms" in c]
    per_node = medians[0] * 1000 / CHAIN_NODES if medians else None

    def where(frame: str) -> str:
        place = frame[frame.rfind("(") + 1:-1]
        return "Python" if ".py:" in place else Path(place).name

    def rows(counts: dict[str, int], label) -> list[str]:
        ranked = sorted(counts.items(), key=lambda item: -item[1])[:top]
        return [f"| {label(name)} | {100 * n / total:.1f} % | "
                f"{'' if per_node is None else f'{per_node * n / total:.3f}'} |" for name, n in ranked]

    libraries: dict[str, int] = {}
    leaves: dict[str, int] = {}
    below: dict[str, int] = {}
    for frames, count in stacks:
        library, leaf = where(frames[-1]), frames[-1]
        libraries[library] = libraries.get(library, 0) + count
        # a library without symbols gives addresses, one per instruction: they count as one frame of it
        leaf = f"[no symbol] ({library})" if leaf.startswith("0x") else leaf
        leaves[leaf] = leaves.get(leaf, 0) + count
        for frame in set(frames):
            if not frame.startswith("0x") and where(frame) != "Python":
                below[frame] = below.get(frame, 0) + count
    head = "| share of the samples | µs a node |\n|---|---|---|"
    median = ("no median: the case failed" if per_node is None
              else f"whose median was {medians[0]} ms ({per_node:.3f} µs a node) unsampled")
    return "\n".join([
        f"{result['label']}: {total} samples in the runs of {CHAIN_FILE} at batch 1, {median}", "",
        f"| library running {head}", *rows(libraries, str), "",
        f"| frame running {head}", *rows(leaves, lambda f: f"`{short(f)}`"), "",
        f"| native frame below the run {head}", *rows(below, lambda f: f"`{short(f)}`")]) + "\n"


def main(argv: list[str]) -> int:
    if argv[:1] == ["one"]:
        model, batch, ep, warmup, runs, preload, profile, graph, library = argv[1:]
        print(json.dumps(one(Path(model), int(batch), ep, int(warmup), int(runs), preload == "1", profile == "1",
                             graph == "1", library)))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    verbs.add_parser("export").add_argument("folder", type=Path)
    run = verbs.add_parser("measure")
    run.add_argument("--python", required=True)
    run.add_argument("--label", required=True)
    run.add_argument("--models", type=Path, required=True)
    run.add_argument("--out", type=Path, required=True)
    run.add_argument("--path", default="")
    run.add_argument("--preload", action="store_true")
    run.add_argument("--ep", default="CUDAExecutionProvider")
    run.add_argument("--library", default="")
    run.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    run.add_argument("--warmup", type=int, default=100)
    run.add_argument("--runs", type=int, default=1000)
    timing = run.add_mutually_exclusive_group()
    timing.add_argument("--profile", action="store_true")
    timing.add_argument("--cuda-graph", action="store_true")
    compare = verbs.add_parser("table")
    compare.add_argument("--plugin", type=Path, nargs="+", required=True)
    compare.add_argument("--other", type=Path, nargs="+", required=True)
    compare.add_argument("--profiles", type=Path, nargs=2, metavar=("PLUGIN", "OTHER"))
    sampled = verbs.add_parser("hot")
    sampled.add_argument("samples", type=Path)
    sampled.add_argument("result", type=Path)
    args = parser.parse_args(argv)
    if args.verb == "export":
        export(args.folder)
        return 0
    if args.verb == "measure":
        return measure(args)
    if args.verb == "hot":
        print(hot(args.samples, json.loads(args.result.read_text())), end="")
        return 0
    print(table(*(merged([json.loads(f.read_text()) for f in files]) for files in (args.plugin, args.other))), end="")
    if args.profiles:
        print("\n" + profiles(*(json.loads(f.read_text()) for f in args.profiles)), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
