#!/usr/bin/env python3
"""The GPU run's own checks and its report (run.sh calls these on the GPU machine).

    python3 checks.py cudnn-loaded LIBRARY    the recipe's load test, then the cuDNN libraries it loaded
    python3 checks.py autoregistration        import onnxruntime; providers=["CUDAExecutionProvider"]
                                              with CPU fallback off runs a model on the GPU
    python3 checks.py report TOP              TOP/results/report.md from what the run left there

The first two need onnxruntime and numpy (and onnx for the first); the report needs only the
standard library.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

RECIPE = Path(__file__).resolve().parents[2] / "recipe"
EP_NAME = "CUDAExecutionProvider"
OPERATOR_SUITE = Path("onnxruntime/test/python/transformers/test_cuda_plugin_ep.py")


def cudnn_loaded(library: str) -> int:
    """The load test in this process, then which cuDNN libraries the plugin loaded for its model, which
    needs none (Gemm, Relu, Mul): whether cuDNN is loaded on demand or whenever a session starts."""
    sys.path.insert(0, str(RECIPE))
    import test_plugin_load  # noqa: PLC0415

    status = test_plugin_load.main(["--library", library, "--ep-name", EP_NAME, "--require-device"])
    with open("/proc/self/maps", encoding="utf-8") as maps:
        loaded = sorted({line.split()[-1] for line in maps if "libcudnn" in line})
    print(f"cuDNN libraries in this process: {loaded or 'none'}")
    return status


def autoregistration() -> int:
    """What a user of `conda install onnxruntime onnxruntime-ep-cuda` does, with CPU fallback off."""
    import numpy as np  # noqa: PLC0415

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import onnxruntime as ort  # noqa: PLC0415
    refused = [w for w in caught if w.category.__name__ == "EpAutoregistrationWarning"]
    for warning in refused:
        print(f"warning at import: {warning.message}")
    from onnx import TensorProto, helper  # noqa: PLC0415

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["y"])], "square", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    options = ort.SessionOptions()
    options.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    session = ort.InferenceSession(model.SerializeToString(), sess_options=options, providers=[EP_NAME])
    value = np.arange(6, dtype=np.float32).reshape(2, 3)
    result = session.run(None, {"x": value})[0]
    print(f"onnxruntime {ort.__version__}: session providers {session.get_providers()}, result {result.tolist()}")
    ok = session.get_providers()[0] == EP_NAME and np.array_equal(result, value * value) and not refused
    return 0 if ok else 1


def contrib_cases(suite: Path) -> set[str]:
    """Test methods of the operator suite that build a com.microsoft node, directly or through a
    module-level helper that does."""
    source = suite.read_text(encoding="utf-8")
    tree = ast.parse(source)
    helpers = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)
               and "com.microsoft" in (ast.get_source_segment(source, node) or "")}
    cases = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            text = ast.get_source_segment(source, node) or ""
            if "com.microsoft" in text or any(re.search(rf"\b{h}\(", text) for h in helpers):
                cases.add(node.name)
    return cases


# a case's line in the log case_log.py writes: `PATH::Class::test: PHASE OUTCOME[: MESSAGE]`
CASE_LINE = re.compile(r"^\S+::(\w+)::(\w+): \S+ (passed|failed|skipped)(?:: (.*))?$")
# and the line it writes before it ends a worker whose case ran past its limit
STUCK_LINE = re.compile(r"^\S+::(\w+)::(\w+) is (still running after \S+ s)")


def case_outcomes(path: Path) -> dict[str, tuple[str, str]]:
    """Class.case -> (outcome, first line of its message); a case that failed in any phase failed."""
    outcomes: dict[str, tuple[str, str]] = {}
    for line in path.read_text(errors="replace").splitlines():
        match = STUCK_LINE.match(line) or CASE_LINE.match(line)
        if not match:
            continue
        name = f"{match[1]}.{match[2]}"
        if match.re is STUCK_LINE:
            outcomes[name] = ("failed", match[3])
        elif outcomes.get(name, ("",))[0] != "failed":
            outcomes[name] = (match[3], (match[4] or "")[:200])
    return outcomes


# run.sh stamps each line of a step's log with the seconds since the step started
STAMP = re.compile(r"^\+\d+s ")


def _log_lines(log: Path) -> list[str]:
    return [STAMP.sub("", line) for line in log.read_text(errors="replace").splitlines()]


# What a step's log says it did: devices found, where the model ran, how it ended.
EVIDENCE = re.compile(r"^(devices |session |compare |Found \d|SKIP|OK: Inference|cuDNN libraries|onnxruntime \d|"
                      r"FAILED|FAIL |ok[: ]|Timeout|.* timed out after|=+ .*(passed|failed|error).* =+$|\d+ (passed|failed))")


def _evidence(log: Path) -> str:
    if not log.exists():
        return "(no log)"
    lines = [line.strip()[:160] for line in _log_lines(log) if EVIDENCE.match(line)]
    return " / ".join(lines[-4:]).replace("|", "/") or "(nothing recognised; see the log)"


def _command(*args: str) -> str:
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "(unavailable)"


def report(top: Path) -> int:
    results, plan = top / "results", json.loads((top / "stage" / "plan.json").read_text())
    # the outputs the plan builds (none: it installs earlier runs' packages)
    built = ", ".join(plan["outputs"]) or "nothing built"
    lines = [f"# GPU run ({plan.get('purpose', 'package')}): {built}, {plan['version']}, linux-64 (CUDA job {plan['cuda']})", "",
             f"- machine: {_command('nvidia-smi', '-L')}; {_command('nproc')} cores",
             f"- driver: {_command('nvidia-smi', '--query-gpu=driver_version', '--format=csv,noheader')}",
             "- the settings in which the build differs from conda-forge's: package.md"]
    lines += ["", "## Steps", "", "| step | exit | seconds | what its log says |", "|---|---|---|---|"]
    steps = results / "steps.tsv"
    ended = [row.split("\t") for row in (steps.read_text().splitlines() if steps.exists() else [])]
    for name, status, seconds in ended:
        lines.append(f"| {name} | {status} | {seconds} | {_evidence(results / f'{name}.log')} |")
    progress = results / "progress.txt"
    started = re.findall(r"^\S+ (\S+): started, limit", progress.read_text(), re.M) if progress.exists() else []
    finished = {row[0] for row in ended}
    for name in [name for name in started if name not in finished]:
        lines.append(f"| {name} | running | | {_evidence(results / f'{name}.log')} |")
    suites = {log.stem: case_outcomes(log) for log in sorted(results.glob("operators-*.cases"))}
    if suites:
        source_tree = top / "work" / "src"
        contrib = contrib_cases(source_tree / OPERATOR_SUITE) if (source_tree / OPERATOR_SUITE).exists() else set()
        lines += ["", "## Operator suite per core", "",
                  "| run | passed | failed | skipped | com.microsoft cases passed |", "|---|---|---|---|---|"]
        for run, outcomes in suites.items():
            counts = {k: sum(1 for o, _ in outcomes.values() if o == k) for k in ("passed", "failed", "skipped")}
            ms = [o for name, (o, _) in outcomes.items() if name.rsplit(".", 1)[-1] in contrib]
            lines.append(f"| {run} | {counts['passed']} | {counts['failed']} | {counts['skipped']} "
                         f"| {ms.count('passed')} of {len(ms)} |")
        names = sorted(set().union(*suites.values()))
        differing = [n for n in names if len({suites[r].get(n, ('absent', ''))[0] for r in suites}) > 1]
        lines += ["", f"Cases whose outcome differs between runs: {len(differing)} of {len(names)}", ""]
        for name in differing:
            lines.append(f"- {name}: " + "; ".join(f"{r}: {suites[r].get(name, ('absent', ''))[0]}" for r in suites))
        failing = sorted({(r, n, m) for r, o in suites.items() for n, (k, m) in o.items() if k == "failed"})
        if failing:
            lines += ["", "Failures:", ""] + [f"- {r}: {n}: {m}" for r, n, m in failing]
    (results / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["cudnn-loaded"] and len(argv) == 2:
        return cudnn_loaded(argv[1])
    if argv == ["autoregistration"]:
        return autoregistration()
    if argv[:1] == ["report"] and len(argv) == 2:
        return report(Path(argv[1]))
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
