#!/usr/bin/env python3
"""The packages built by rattler-build, tested by rattler-build, installed by rattler, and used.

    python3 package.py --stage STAGE --work WORK [--toolkit DIR] [--results DIR]

Run on the GPU machine by run.sh, from the bundles pack.py wrote (STAGE: their contents), as plan.json
(plan.py) says: its `purpose` picks one of the functions below, each made of steps.py's steps.

1. Every purpose: the stand-in channel (scripts/standins/channel.py) for the plan's `jobs`, built by
   rattler-build from standins.yaml with this machine's files as the packages' contents: its CUDA toolkit
   (DIR, default /usr/local/cuda-13.0), cuDNN, compilers, binutils and Python, and the wheels in
   STAGE/wheels. The jobs' CUDA and Python are this machine's (printed).
2. The device's copy of the recipe: recipe/ as rendered, with the plan's `overrides` (each with its reason)
   put in, printed as a diff, the source the mirror's tree, as the machine has no network; then
   `rattler-build build` of each of the plan's `outputs` from it (none: the plan's `package`, an earlier
   run's plugin, instead). `cost` stops here, each build script at its build step (run.sh measures).
3. Each package's own tests, run by rattler-build one by one (not for `speed`, whose plugin differs from
   the package run's in its GPU code alone).
4. A fresh environment solved and installed by rattler (py-rattler) from the packages' channels and the
   stand-ins, used with its interpreter alone (no PYTHONPATH or LD_LIBRARY_PATH), then gpu_features.py:
   - package: `onnxruntime onnxruntime-ep-cuda onnx` (onnxruntime a stand-in); the plugin named by the
     package's manifest, registered by hand, runs a model on the GPU, without and with torch imported
     first. Then upstream's operator suite (the plan's `operator_suite`, from the source tarball), once per
     run the plan names: a core each, this feedstock's own where the plan carries it, and once with cuDNN
     hidden;
   - cpu, with the plan's `package` from an earlier run: the plan's CPU packages (`onnxruntime onnxruntime-cpp`,
     or their -novec twins) with `onnxruntime-ep-cuda onnx`, all this feedstock's; `import onnxruntime`
     registers the plugin and `providers=["CUDAExecutionProvider"]` runs the model on the GPU (user_check.py),
     and a C++ program built against the CPU C++ package's CMake package registers it from its manifest and
     runs it too (consumer/);
   - speed, with the plugin built here or the plan's `package`, and the plan's `core` (this feedstock's
     onnxruntime or onnxruntime-novec) from an earlier run, or else the stand-in core of the recipe's version (the
     plan's newest core, PyPI's wheel): that core, `onnxruntime-ep-cuda onnx`, user_check.py as above with this
     feedstock's core alone (PyPI's has no hook that registers the plugin, so speed.py registers it), then
     speed.py's models measured in that environment and with the compared wheel (the plan's `compare`, carried in
     pieces) beside the machine's Python: a round of both, then each at batch 1 with CUDA
     graphs and with ONNX Runtime's profiler, its chain of Adds in nsys (where the machine has it) and sampled by
     py-spy (the host's time by native frame), then more rounds, in alternation, up to SPEED_ROUNDS while the step
     has time, and the table of the two.

RESULTS (default WORK/results)/package.json says what each step did; report.py makes report.md of it.
Exit 0 when every step passed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath


from feedstock.shipped_manifest import manifest_path
from pieces import join
from speed import CHAIN_FILE
from plan import Plan, SuiteRun, load, package_name
from steps import (HERE, PLUGIN, Run, build_outputs, gpu_features, installed, log_tail, machine_facts,
                   plugin_manifest, plugin_package, run_in, run_tests, stand_in_channel, toolkit_version, unpack,
                   user_check, user_environment)

# the stand-in channel's PyPI cores (the plan's `cores`), under conda-forge's name, standins.yaml's key
STAND_IN_CORE = "onnxruntime"
# how many times the speed run measures each side (the table takes each case's median over them): one
# process's median of a launch-bound case differs from the next process's by up to a half
# (docs/gpu-runs/2026-12-03-speed-sass.md)
SPEED_ROUNDS = 5
# the profiled runs of each side, at batch size 1 (a profile of more runs takes long to read)
PROFILED = ["--batches", "1", "--runs", "200", "--profile"]
# the most one speed.py or nsys command of the speed run may take (less where the step has less left)
SPEED_COMMAND_LIMIT = 600
# a side's chain sampled by py-spy: some 5 s of runs, slowed by the sampler's pauses; past this it is left out
SAMPLED_LIMIT = 180
# Upstream's operator suite: a case still running after SUITE_CASE_LIMIT s (the slowest seen took 77 s) gets its
# stacks written to its case log and its worker ended (case_log.py), and the suite goes on; a run ends after
# SUITE_LIMIT s, as its runs did before the package run took them over (docs/gpu-runs/2026-12-01-fourth-run.md)
SUITE_CASE_LIMIT = 120
SUITE_LIMIT = 420
# what is kept of the package step's time (run.sh's STEP_DEADLINE) for writing up, once the suites or the speed
# rounds have taken theirs
WRITE_UP_S = 60


def seconds_left() -> float:
    """The package step's time left before run.sh stops it, less WRITE_UP_S (no limit outside run.sh)."""
    deadline = os.environ.get("STEP_DEADLINE")
    return float("inf") if deadline is None else int(deadline) - time.time() - WRITE_UP_S


def time_for(most: int) -> int:
    """A command's time limit: `most` s, or what the package step has left where that is less."""
    return max(0, int(min(most, seconds_left())))


def plugin(run: Run) -> None:
    """`package`: the plugin, built or an earlier run's, tested, installed and used; then upstream's suite."""
    package, channel = plugin_package(run)
    run_tests(run, package, [channel.as_uri(), run.channel.as_uri()])

    def uses(prefix: Path, manifest: dict) -> dict[str, int]:
        # the library the manifest names, under the registration name it gives, as README.md has users do
        python = str(prefix / "bin" / "python")
        load_test = ["test_plugin_load.py", "--library", str(prefix / manifest["library"]),
                     "--ep-name", manifest["registration_name"], "--require-device"]
        torch_first = ["-c", "import sys; sys.path.append(sys.argv[1]); import torch; "
                       "print('torch', torch.__version__, torch.cuda.is_available()); sys.argv = sys.argv[2:]; "
                       "import runpy; runpy.run_path('test_plugin_load.py', run_name='__main__')",
                       sysconfig.get_paths()["purelib"], *load_test]
        return {"user-run": run_in(prefix, [python, *load_test], run.results_dir / "user-run.log"),
                "user-run-after-torch": run_in(prefix, [python, *torch_first],
                                               run.results_dir / "user-run-after-torch.log")}

    installed(run, [channel], [STAND_IN_CORE], uses)
    if run.plan.operator_suite is not None:
        operator_suites(run, channel)


def cost(run: Run) -> None:
    """`cost`: the plugin's build configured with the recipe's own settings, which run.sh's buildcost.py
    compiles a sample of; nothing is built, tested or installed."""
    build_outputs(run, configure_only=True)


def cpu(run: Run) -> None:
    """`cpu`: the CPU packages built and tested; with the plan's `package`, installed with that plugin."""
    for package in build_outputs(run):
        run_tests(run, package, [run.output.as_uri(), run.channel.as_uri()])
    if run.plan.package is None:
        return

    def uses(prefix: Path, _manifest: dict) -> dict[str, int]:
        status = user_check(prefix, run.results_dir)
        # built with the machine's compiler, CMake and ninja against the environment's onnxruntime-cpp
        tools = ":".join(str(Path(run.roots[k]).parent) for k in ("cmake", "ninja", "gxx"))
        return {"user-python": status,
                "user-cpp": run_in(prefix, ["bash", str(HERE / "consumer" / "run.sh"), str(prefix),
                                            str(prefix / manifest_path(PLUGIN, "unix")),
                                            str(run.results_dir / "model.onnx")],
                                   run.results_dir / "user-cpp.log", extra_path=tools)}

    installed(run, [run.output, run.earlier("package")], list(run.plan.outputs), uses)


def speed(run: Run) -> None:
    """`speed`: the plugin, untested (the package run tests it), in the environment of this feedstock's
    onnxruntime from an earlier run, or of the stand-in core of the recipe's version, measured against the
    compared wheel."""
    _, channel = plugin_package(run)
    feedstock_core = run.plan.core is not None

    # user_check.py asks `import onnxruntime` to register the plugin, which PyPI's core does not: with that core the
    # speed step registers it by the manifest's library instead
    def uses(prefix: Path, _manifest: dict) -> dict[str, int]:
        return {"user-python": user_check(prefix, run.results_dir)} if feedstock_core else {}

    if feedstock_core:
        channels, core = [channel, run.earlier("core")], package_name(run.plan.core)
    else:
        channels, core = [channel], f"{STAND_IN_CORE} =={run.plan.cores.newest}"
    prefix = installed(run, channels, [core], uses)
    with run.step("speed") as record:
        record |= compare_speed(prefix, run)


PURPOSES = {"package": plugin, "cost": cost, "cpu": cpu, "speed": speed}


def suite_site(folder: Path, wheels: list[Path], machine_site: str) -> Path:
    """What the operator suite runs with beside the environment: pytest, pytest-xdist and pytest-timeout from
    `wheels`, case_log.py (alone of this folder's modules, none of which may shadow one the suite imports), and a
    sitecustomize.py that puts `machine_site` after the environment's own packages, for the torch the suite
    imports, which the environment lacks."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    shutil.copy(HERE / "case_log.py", folder)
    if wheels:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                        "--target", str(folder), *map(str, wheels)], check=True)
    (folder / "sitecustomize.py").write_text(f"import sys\n\nsys.path.append({machine_site!r})\n")
    return folder


def suite_command(suite: Path, suite_run: SuiteRun, python: Path, library: Path, site: Path, cases: Path,
                  case_limit: int = SUITE_CASE_LIMIT, workers: int = 1) -> tuple[list[str], dict[str, str]]:
    """The command that runs upstream's operator suite as `suite_run` says, with the plugin `library`, and the
    environment it takes (run_in's `env`), with suite_site's `site`. The suite registers the library itself
    (ORT_CUDA_PLUGIN_PATH), so this feedstock's onnxruntime must not register it first; it stamps most models
    with the newest opset its onnx knows, which a core older than that onnx refuses at load unless
    ALLOW_RELEASED_ONNX_OPSET_ONLY=0 (onnxruntime/core/graph/model_load_utils.h). case_log.py writes each case's
    outcome to `cases` as it ends, and ends the worker of a case still running after `case_limit` s; one worker
    runs the cases in the suite's order."""
    env = {"ORT_TEST_CUDA_PLUGIN_EP": "1", "ORT_CUDA_PLUGIN_PATH": str(library), "ALLOW_RELEASED_ONNX_OPSET_ONLY": "0",
           "ONNXRUNTIME_DISABLE_EP_AUTOREGISTRATION": "1", "CASE_LOG": str(cases), "PYTHONPATH": str(site),
           # the suite's own switch: the plugin's sessions with enable_cudnn=0, and the cases that need cuDNN skipped
           **({} if suite_run.cudnn else {"ORT_TEST_CUDA_PLUGIN_NO_CUDNN": "1"})}
    return [str(python), "-m", "pytest", "-v", "-p", "no:cacheprovider", "-p", "case_log", "-n", str(workers),
            "--max-worker-restart=100", f"--timeout={case_limit}", "--durations=10", suite.name], env


def operator_suites(run: Run, plugin_channel: Path) -> None:
    """Upstream's operator suite, from the source tarball, once per run of the plan's `operator_suite`, each in an
    environment with its core and the plugin from `plugin_channel`, the runs side by side. A finding of its own,
    as the GPU features are: a run is ok when its suite ran to its end, whatever its cases' outcomes (an older
    core refuses newer models), which report.py tabulates per run from results/<run>.cases."""
    suite = run.plan.operator_suite
    with run.step("operator suites") as record:
        path = PurePosixPath(suite.path)
        unpack(run.stage, run.work / "suite", str(path.parent))
        site = suite_site(run.work / "suite-site", [run.stage / tool for tool in suite.tools],
                          sysconfig.get_paths()["purelib"])
        prefixes: dict[tuple[str, bool], Path] = {}
        first_runs: dict[tuple[str, bool], str] = {}
        record["environments"] = {}
        for suite_run in suite.runs:
            key = (suite_run.core, suite_run.feedstock_core)
            if key not in prefixes:
                prefix = run.work / f"suite-env-{len(prefixes)}"
                # strict priority: the core comes from the earlier run's channel where that is listed
                channels = [plugin_channel, *([run.earlier("core")] if suite_run.feedstock_core else []), run.channel]
                core = package_name(run.plan.core) if suite_run.feedstock_core else STAND_IN_CORE
                try:
                    record["environments"][suite_run.name] = user_environment(
                        [c.as_uri() for c in channels], [f"{core} =={suite_run.core}", PLUGIN, "onnx"], prefix)
                    prefixes[key] = prefix
                    first_runs[key] = suite_run.name
                # a core that cannot be installed costs its own runs, not the others'
                except Exception as error:  # noqa: BLE001
                    record["environments"][suite_run.name] = [f"not installed: {type(error).__name__}: {error}"]
        # the GPU features with each core, one after another so that their timings do not share the GPU
        record["gpu_features"] = {}
        for key, name in first_runs.items():
            log = run.results_dir / f"{name}-gpu-features.log"
            status = gpu_features(prefixes[key], plugin_manifest(prefixes[key]), log)
            record["gpu_features"][name] = {"exit": status, "log": log_tail(log)}
        commands = {}
        for suite_run in suite.runs:
            prefix = prefixes.get((suite_run.core, suite_run.feedstock_core))
            if prefix is None:
                continue
            library = prefix / plugin_manifest(prefix)["library"]
            commands[suite_run.name] = (prefix, *suite_command(run.work / "suite" / path, suite_run,
                                                               prefix / "bin" / "python", library, site,
                                                               run.results_dir / f"{suite_run.name}.cases"))

        # side by side, so they share one limit: SUITE_LIMIT, or what the package step has left
        limit = time_for(SUITE_LIMIT)

        def one(name: str) -> int:
            prefix, argv, env = commands[name]
            return run_in(prefix, argv, run.results_dir / f"{name}.log", env=env, cwd=run.work / "suite" / path.parent,
                          limit=limit)

        with ThreadPoolExecutor(max(1, len(commands))) as pool:
            record["runs"] = dict(zip(commands, pool.map(one, commands), strict=True))
        # pytest's 1: some cases failed; anything else but 0 is a suite that did not run to its end
        record["ok"] = (len(record["runs"]) == len(suite.runs)
                        and all(status in (0, 1) for status in record["runs"].values()))


def chain_api_calls(run: Run, prefix: Path, sides: dict[str, list[str]], models: Path) -> dict[str, int]:
    """Where the machine has Nsight Systems (`nsys` on PATH or in the toolkit), each side's chain of Adds at batch 1
    recorded by it, and the CUDA API calls summed (results/<side>-chain-api_cuda_api_sum.csv): how many calls of each
    kind a node makes on either side, and how long they take. Each command's exit status by its log's name (none,
    and a line in the log, where the machine has no nsys)."""
    nsys = shutil.which("nsys") or next(map(str, sorted(run.toolkit.glob("**/bin/nsys"))), None)
    if nsys is None:
        print("speed: no nsys on this machine, so no record of each side's CUDA API calls", flush=True)
        return {}
    chain = chain_alone(models)
    statuses = {}
    for name, side in sides.items():
        record = run.work / f"{name}-chain"
        # the CUDA API alone: no CPU sampling or OS runtime tracing of speed.py's nvidia-smi polls
        statuses[f"{name}-chain-nsys"] = run_in(
            prefix, [nsys, "profile", "--trace=cuda", "--sample=none", "--cpuctxsw=none", "--force-overwrite=true",
                     "-o", str(record), sys.executable, str(HERE / "speed.py"), "measure", *side,
                     "--models", str(chain), "--batches", "1", "--warmup", "20", "--runs", "200",
                     "--out", str(run.results_dir / f"{name}-chain.json")],
            run.results_dir / f"{name}-chain-nsys.log", limit=time_for(SPEED_COMMAND_LIMIT))
        statuses[f"{name}-chain-stats"] = run_in(
            prefix, [nsys, "stats", "--report", "cuda_api_sum", "--format", "csv", "--force-export=true",
                     "--output", str(run.results_dir / f"{name}-chain-api"), f"{record}.nsys-rep"],
            run.results_dir / f"{name}-chain-stats.log", limit=time_for(SPEED_COMMAND_LIMIT))
    return statuses


def chain_alone(models: Path) -> Path:
    """A folder of the exported models' chain of Adds alone, for `measure` to run only it."""
    chain = models / "chain-alone"
    chain.mkdir(exist_ok=True)
    shutil.copy(models / CHAIN_FILE, chain)
    return chain


def chain_samples(run: Run, prefix: Path, sides: dict[str, list[str]], models: Path,
                  unsampled: dict[str, str]) -> tuple[dict[str, int], dict[str, str]]:
    """Where the bundles carry py-spy (pack.py's PROFILER), each side's chain of Adds at batch 1 sampled by it, native
    frames included (results/<side>-chain-samples.txt), and speed.py's `hot` of the samples at the side's median in
    its file of `unsampled` (a round's, whose runs no sampler slowed). Each command's exit status by its log's name,
    and each side's `hot` by the side's name."""
    wheels = sorted(run.stage.glob("profiler/py_spy-*.whl"))
    if not wheels:
        print("speed: no py-spy in the bundles, so no samples of where each side's host time goes", flush=True)
        return {}, {}
    sampler = run.work / "py-spy"
    with zipfile.ZipFile(wheels[-1]) as archive:
        (member,) = [name for name in archive.namelist() if name.endswith(".data/scripts/py-spy")]
        sampler.write_bytes(archive.read(member))
    sampler.chmod(0o755)
    chain, speed_py = chain_alone(models), str(HERE / "speed.py")
    statuses, summaries = {}, {}
    for name, side in sides.items():
        if name not in unsampled:
            continue
        samples = run.results_dir / f"{name}-chain-samples.txt"
        sampled = run.results_dir / f"{name}-chain-sampled.json"
        for old in (samples, sampled):
            old.unlink(missing_ok=True)  # an earlier pipeline's, in a results folder used again
        # speed.py's `measure` runs each case in a process of its own: --subprocesses follows it there. --idle keeps
        # a thread's waits (a stream's synchronization), which are the run's time too. Each sample pauses the
        # process, so the rate (250 a second) and the runs are held to what keeps a case inside speed.py's
        # CASE_SECONDS: 4000 runs of onnxruntime-gpu's chain overran it on the H200 of 2026-12-05.
        status = run_in(
            prefix, [str(sampler), "record", "--native", "--subprocesses", "--idle", "--rate", "250", "--format", "raw",
                     "--output", str(samples), "--", sys.executable, speed_py, "measure", *side, "--models", str(chain),
                     "--batches", "1", "--warmup", "20", "--runs", "2000", "--out", str(sampled)],
            run.results_dir / f"{name}-chain-py-spy.log", limit=time_for(SAMPLED_LIMIT))
        # py-spy exits 0 whatever the sampled process did: a case that failed or overran is a finding too
        cases = json.loads(sampled.read_text()).get("cases", []) if sampled.exists() else [{"error": "no result"}]
        failed = any("error" in case for case in cases)
        statuses[f"{name}-chain-py-spy"] = status or int(failed)
        if samples.exists():
            statuses[f"{name}-chain-hot"] = run_in(prefix, [sys.executable, speed_py, "hot", str(samples),
                                                            unsampled[name]],
                                                   run.results_dir / f"{name}-chain-hot.log", limit=time_for(60))
            if statuses[f"{name}-chain-hot"] == 0:
                summaries[name] = (run.results_dir / f"{name}-chain-hot.log").read_text()
    return statuses, summaries


def compare_speed(prefix: Path, run: Run) -> dict:
    """The plugin in the user's environment against the compared wheel's built-in CUDA EP (speed.py): the
    models exported by the machine's torch, each side measured in fresh processes of its own interpreter,
    and the table. The wheel is unpacked beside the machine's Python, which has the CUDA libraries it loads."""
    work, results_dir = run.work, run.results_dir
    (wheel,) = join(run.stage / run.plan.compare.folder, work / "compare")
    site = work / "compare" / "site"
    shutil.rmtree(site, ignore_errors=True)
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    measured, models = [sys.executable, str(HERE / "speed.py")], work / "models"
    sides = {"speed-plugin": ["--python", str(prefix / "bin" / "python"), "--label", PLUGIN,
                              "--library", str(prefix / plugin_manifest(prefix)["library"])],
             "speed-compared": ["--python", sys.executable, "--path", str(site), "--preload",
                                "--label", wheel.name.split("-")[0].replace("_", "-")]}

    runs = {"speed-export": run_in(prefix, [*measured, "export", str(models)], results_dir / "speed-export.log",
                                   limit=time_for(SPEED_COMMAND_LIMIT))}
    # the exit statuses of the CUDA graph and nsys runs, apart: their failure is a finding, not a failed speed run
    findings: dict[str, int] = {}
    files: dict[str, list[str]] = {name: [] for name in sides}
    profiles, graphs, hot = [], [], {}

    def measure(name: str, side: list[str], kind: str, *extra: str) -> tuple[int, Path]:
        """One `measure` of a side, to results/<name>-<kind>.json: its exit status and that file."""
        out = results_dir / f"{name}-{kind}.json"
        return run_in(prefix, [*measured, "measure", *side, "--models", str(models), *extra, "--out", str(out)],
                      results_dir / f"{name}-{kind}.log", limit=time_for(SPEED_COMMAND_LIMIT)), out

    def guarded(name: str, profile):
        """A profile's result; one that raises is a finding (exit -1, its error in results/<name>.log), and the rounds
        and the table go on."""
        try:
            return profile()
        except Exception as error:  # noqa: BLE001 - whatever the profiler's trouble, the table is what the run is for
            (results_dir / f"{name}.log").write_text(f"{type(error).__name__}: {error}\n")
            findings[name] = -1
            return None

    def one_round(number: int) -> None:
        # the sides in alternation, ABBAAB: a drift of the GPU's or the host's state over the minutes weighs on both
        for name, side in (sides.items() if number % 2 else reversed(sides.items())):
            runs[f"{name}-{number}"], out = measure(name, side, str(number))
            if out.exists():
                files[name].append(str(out))

    if not runs["speed-export"]:
        started = time.monotonic()
        one_round(1)
        round_s = time.monotonic() - started
        # while the step has most of its time: each side at batch 1 with CUDA graphs (the table lists those cases
        # beside the plain ones; a model that a graph cannot hold, a node off the GPU, is the table's finding) and
        # with ONNX Runtime's profiler (each operator's time per node), and the chain of Adds in nsys
        for name, side in sides.items():
            findings[f"{name}-graph"], out = measure(name, side, "graph", "--cuda-graph", "--batches", "1")
            graphs.append(out)
            runs[f"{name}-profile"], out = measure(name, side, "profile", *PROFILED)
            profiles.append(str(out))
        findings |= guarded("chain-nsys", lambda: chain_api_calls(run, prefix, sides, models)) or {}
        sampled, hot = guarded("chain-py-spy", lambda: chain_samples(
            run, prefix, sides, models, {name: found[0] for name, found in files.items() if found})) or ({}, {})
        findings |= sampled
        # then the other rounds, each while the step has time for it with half a round to spare
        for number in range(2, SPEED_ROUNDS + 1):
            if seconds_left() < round_s * 1.5:
                print(f"speed: {number - 1} rounds, the step's time being short", flush=True)
                break
            one_round(number)
    # a case that failed in a round shows in the table as that round's error; a round that wrote nothing does not
    if files["speed-plugin"] and files["speed-compared"]:
        profiled = ["--profiles", *profiles] if all(Path(f).exists() for f in profiles) else []
        mine, theirs = ([str(f)] for f in graphs) if all(f.exists() for f in graphs) else ([], [])
        runs["speed-table"] = run_in(prefix, [*measured, "table", "--plugin", *files["speed-plugin"], *mine,
                                              "--other", *files["speed-compared"], *theirs, *profiled],
                                     results_dir / "speed.md", limit=time_for(SPEED_COMMAND_LIMIT))
    table = (results_dir / "speed.md").read_text() if runs.get("speed-table") == 0 else ""
    return {"runs": runs, "findings": findings, "table": table, "hot": hot,
            "ok": not any(runs.values()) and "speed-table" in runs,
            "logs": {name: log_tail(results_dir / f"{name}.log") for name in [*runs, *findings]
                     if name != "speed-table" and not (name.endswith("-chain-hot") and findings[name] == 0)}}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stage", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--toolkit", type=Path, default=Path("/usr/local/cuda-13.0"))
    parser.add_argument("--results", type=Path, help="where package.json goes (default: WORK/results)")
    args = parser.parse_args(argv)
    # what this script was started with stays with it: rattler-build's environments and the user's get none of it
    started_with = {k: os.environ.pop(k, "") for k in ("PYTHONPATH", "LD_LIBRARY_PATH")}
    stage, work = args.stage.resolve(), args.work.resolve()
    results_dir = (args.results or work / "results").resolve()
    results_dir.mkdir(parents=True, exist_ok=True)
    plan: Plan = load(stage / "plan.json")
    run = Run(plan, stage, work, results_dir, args.toolkit, toolkit_version(args.toolkit),
              f"{sys.version_info.major}.{sys.version_info.minor}")
    run.results |= {"cuda": run.cuda, "python": run.python, "started_with": started_with, "machine": machine_facts()}
    try:
        stand_in_channel(run)
        PURPOSES[plan.purpose](run)
    except Exception:  # noqa: BLE001 - every step's outcome goes in the report, the failing one's too
        import traceback

        traceback.print_exc()
        return 1
    finally:
        run.save()
    return 0 if run.ok() else 1


if __name__ == "__main__":
    status = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # no interpreter shutdown: rattler-build's and rattler's worker threads can abort it (PyGILState_Release,
    # once under load), which would turn this exit status into SIGABRT
    os._exit(status)
