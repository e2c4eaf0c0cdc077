#!/usr/bin/env python3
"""The packages built by rattler-build, tested by rattler-build, installed by rattler, and used.

    python3 package.py --stage STAGE --work WORK [--toolkit DIR] [--configure-only] [--package PLUGIN]

Run on the GPU machine by run.sh, from the bundles pack.py wrote (STAGE: their contents). plan.json's
`purpose` says what is built: the plugin (`package`, `cost`, `speed`) or the CPU packages (`cpu`: its
`outputs`); a plan whose `outputs` are empty builds nothing and takes the plugin PLUGIN instead.
In order:

1. The stand-in channel (scripts/standins/channel.py), built by rattler-build from standins.yaml for
   the linux-64 job's variant (the newest CUDA job's; with the CPU job's for `cpu` and `speed`), with this
   machine's files as the packages' contents: its CUDA toolkit (DIR, default /usr/local/cuda-13.0),
   cuDNN, compilers, binutils and Python, and the wheels in STAGE/wheels. The job's CUDA and Python are
   this machine's (printed).
2. The device's copy of the recipe: recipe/ as rendered, with the settings in which this build differs
   from conda-forge's (plan.json's `overrides`, each with its reason) put in, printed as a diff. The
   source is the mirror's tree, as the machine has no network.
3. `rattler-build build` of each output from that copy against the channel, then each of the packages'
   own tests run by rattler-build, one by one (not for `speed`).
4. A fresh environment solved and installed by rattler (py-rattler) from the built packages' channel and
   the stand-ins, used with its interpreter alone (no PYTHONPATH or LD_LIBRARY_PATH):
   - plugin: `onnxruntime onnxruntime-ep-cuda` (onnxruntime a stand-in); the plugin named by the package's
     manifest, registered by hand, runs a model on the GPU, without and with torch imported first;
   - cpu, with the plugin package PLUGIN from an earlier run: `onnxruntime onnxruntime-cpp
     onnxruntime-ep-cuda`, all this feedstock's; `import onnxruntime` registers the plugin and
     `providers=["CUDAExecutionProvider"]` runs the model on the GPU (user_check.py), and a C++ program
     built against onnxruntime-cpp's CMake package registers it from its manifest and runs it too
     (consumer/);
   - speed, with the plugin built here (its tests are the package run's: it differs from that plugin in its
     GPU code alone) or PLUGIN, and plan.json's `core` (this feedstock's onnxruntime) from an earlier run:
     `onnxruntime onnxruntime-ep-cuda onnx`, user_check.py as above, then speed.py's models measured in that
     environment and with the compared wheel (plan.json's `compare`, carried in pieces) beside the machine's
     Python, SPEED_ROUNDS times each in alternation and once more with ONNX Runtime's profiler, and the table
     of the two.

WORK/results/package.json and package.md say what each step did. With --configure-only (a dry run on a
machine without a GPU) the build script stops at its build step (REHEARSAL_TARGETS_FILE) and nothing
after the build runs. Exit 0 when every step passed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from feedstock.ci_support import job_file  # noqa: E402
from feedstock.shipped_manifest import manifest_dir  # noqa: E402
from recipe_code import RECIPE  # noqa: E402
from standins.channel import build_channel, standins  # noqa: E402
from standins.environment import Said, machine_roots, recipe_copy  # noqa: E402
from standins.resolve import variant_file  # noqa: E402
from standins.sources import MIRROR_TREE_PATCHES, TREES, place_trees  # noqa: E402

PLUGIN = "onnxruntime-ep-cuda"
# how many times the speed run measures each side (the table takes each case's median over them): one
# process's median of a launch-bound case differs from the next process's by up to a half
# (docs/gpu-runs/2026-12-03-speed-sass.md)
SPEED_ROUNDS = 5
# the profiled runs of each side, at batch size 1 (a profile of more runs takes long to read)
PROFILED = ["--batches", "1", "--runs", "200", "--profile"]
HERE = Path(__file__).resolve().parent
class Step:
    """One step's outcome, kept in the report whatever happens."""

    def __init__(self, results: dict, name: str) -> None:
        self.record = results.setdefault("steps", {}).setdefault(name, {})
        self.name = name

    def __enter__(self) -> dict:
        self.start = time.monotonic()
        print(f"== {self.name}", flush=True)
        return self.record

    def __exit__(self, kind, error, _trace) -> bool:
        self.record["seconds"] = round(time.monotonic() - self.start, 1)
        self.record.setdefault("ok", error is None)
        if error is not None:
            self.record["error"] = f"{kind.__name__}: {error}"
        print(f"== {self.name}: {'ok' if self.record['ok'] else 'FAILED'} in {self.record['seconds']} s", flush=True)
        return False


def toolkit_version(toolkit: Path) -> str:
    """13.0 for a toolkit whose nvcc says `release 13.0` (not every toolkit has a version.json)."""
    said = subprocess.run([str(toolkit / "bin" / "nvcc"), "--version"], capture_output=True, text=True, check=True).stdout
    match = re.search(r"release (\d+\.\d+)", said)
    if match is None:
        raise SystemExit(f"package: {toolkit}/bin/nvcc --version names no release: {said.strip()}")
    return match.group(1)


def machine_facts() -> dict[str, str]:
    """What the report says of the machine: its GPU, driver library, compiler and Python."""
    def said(command: str) -> str:
        done = subprocess.run(command, shell=True, capture_output=True, text=True)
        return " / ".join(line.strip() for line in (done.stdout + done.stderr).splitlines()[:3] if line.strip())

    return {"gpu": said("nvidia-smi -L"), "driver library": said("ldconfig -p | grep 'libcuda.so.1 '"),
            "gcc": said("gcc --version | head -1"), "python": sys.version.split()[0]}


def write_report(results: dict, path: Path) -> None:
    """package.md: what each step did, from package.json."""
    steps = results.get("steps", {})
    lines = ["# The packages on a GPU: rattler-build, their tests, and a user's environment", "",
             f"- machine: {results.get('machine', {})}", f"- CUDA {results.get('cuda')}, Python {results.get('python')}",
             f"- started with: {results.get('started_with')}", "", "## Steps", "", "| step | ok | seconds |",
             "|---|---|---|"]
    lines += [f"| {name} | {step.get('ok')} | {step.get('seconds')} |" for name, step in steps.items()]
    for name, step in steps.items():
        if step.get("error"):
            lines += ["", f"{name}: {step['error']}"]
    lines += ["", "## Settings that differ from conda-forge's build (none of them is in the recipe)", ""]
    for kind, entries in results.get("overrides", {}).items():
        lines += [f"- {kind} `{name}` = `{value}`: {reason}" for name, value, reason in entries]
    if "diff" in steps.get("recipe", {}):
        lines += ["", "```diff", steps["recipe"]["diff"].rstrip(), "```"]
    for package in results.get("packages", []):
        lines += ["", f"## {package['file']}", "", f"- {package['bytes']} bytes",
                  f"- depends: {package['depends']}", f"- constrains: {package['constrains']}",
                  f"- {len(package['files'])} files:"]
        lines += [f"  - `{f}`" for f in package["files"][:60]]
    for name, step in steps.items():
        if name.startswith("build"):
            lines += ["", f"## rattler-build's linking checks ({name})", ""]
            lines += [f"    {line}" for line in step.get("linking", [])] or ["(none reported)"]
        for result in step.get("results", []) if name.startswith("tests") else []:
            lines += ["", f"## {name}, test {result['index']}: {'passed' if result['success'] else 'FAILED'} in "
                      f"{result.get('seconds')} s", "", "```", result["output"][-2500:].rstrip(), "```"]
    install = steps.get("install", {})
    if install:
        lines += ["", "## A user's environment", "", f"- packages: {install.get('packages')}"]
        for name, status in install.get("runs", {}).items():
            lines += ["", f"{name}: exit {status}", "```", install["logs"][name].rstrip(), "```"]
    speed = steps.get("speed", {})
    if speed:
        lines += ["", "## Speed", "", (speed.get("table") or "(no table)").rstrip()]
        for name, log in speed.get("logs", {}).items():
            lines += ["", f"{name}: exit {speed['runs'][name]}", "```", log.rstrip(), "```"]
    path.write_text("\n".join(lines) + "\n")


def device_recipe(plan: dict, work: Path, src: Path, mirror: Path, configure_only: bool,
                  trees: dict[str, str] | None = None) -> tuple[Path, str]:
    """The device's copy of the recipe (recipe_copy): the plan's outputs, the plugin for this machine's CUDA
    (none in a plan that names none), with the plan's overrides put in, and what the mirror's tree lacks of
    the tag (MIRROR_TREE_PATCHES); and its diff."""
    return recipe_copy(RECIPE, work, src, mirror, plan["outputs"], configure_only, trees, plan["overrides"],
                       plan.get("device_cuda"), MIRROR_TREE_PATCHES)


def unpack_sources(stage: Path, work: Path, plan: dict) -> tuple[Path, dict[str, str]]:
    """ORT's tree, with cutlass and cudnn_frontend where FetchContent would put them (place_trees: what it
    says of them; none for the CPU packages, which fetch neither)."""
    src = work / "src"
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir(parents=True)
    (tarball,) = stage.glob("sources/onnxruntime-*-src.tar.zst")
    # zstd reads a linked tarball from its standard input (named, it skips a symbolic link)
    subprocess.run(f'zstd -dc < "{tarball}" | tar -x -C "{src}" --strip-components=1', shell=True, check=True)
    trees = stage / "sources" / TREES
    return src, place_trees(trees, src, plan["script_env"]["ORT_BUILD_DIR"]) if trees.exists() else {}


def conda_facts(package: Path) -> dict:
    from rattler_build import Package  # noqa: PLC0415

    built = Package.from_file(package)
    return {"file": package.name, "bytes": package.stat().st_size, "depends": list(built.depends),
            "constrains": list(built.constrains), "files": sorted(str(f) for f in built.files)}


def linking_findings(said: list[str]) -> list[str]:
    """rattler-build's linking checks as it reported them, after the build script: each shared library's
    links, and what it warned of (overlinking, overdepending, a library it could not find)."""
    script_done = max((i for i, line in enumerate(said) if "Copying done" in line), default=0)
    keys = ("links against", "overlink", "overdepend", "could not find", "not found", "missing")
    return [line for line in said[script_done:] if (any(k in line.lower() for k in keys) and "repodata" not in line)
            or line.startswith(("warn", "error"))][:120]


def user_environment(channels: list[str], specs: list[str], prefix: Path) -> list[str]:
    """`specs` solved and installed by rattler, as a user's conda would, from the channels in their order
    (strict priority: a name the first channel has comes from it alone)."""
    import rattler  # noqa: PLC0415
    from rattler import VirtualPackage, VirtualPackageOverrides  # noqa: PLC0415

    virtual = VirtualPackage.detect(VirtualPackageOverrides.from_env())
    records = asyncio.run(rattler.solve(sources=channels, specs=specs, platforms=["linux-64", "noarch"],
                                        virtual_packages=virtual))
    shutil.rmtree(prefix, ignore_errors=True)
    asyncio.run(rattler.install(records, target_prefix=prefix, show_progress=False))
    return sorted(f"{r.name.normalized} {r.version} {r.build}" for r in records)


def run_in(prefix: Path, arguments: list[str], log: Path, extra_path: str = "") -> int:
    """A command in the environment with a bare environment: no LD_LIBRARY_PATH, and only the recipe's folder on
    PYTHONPATH (the load test that user_check.py and gpu_features.py run); `extra_path` puts the machine's
    build tools (cmake, ninja) after the environment's programs."""
    bare = {"PATH": f"{prefix}/bin:{extra_path + ':' if extra_path else ''}/usr/bin:/bin",
            "PYTHONPATH": str(RECIPE),
            "HOME": os.environ.get("HOME", "/root"),
            # the driver's kernel cache, which run.sh shares between the tests and these runs
            **{k: os.environ[k] for k in ("CUDA_CACHE_PATH", "CUDA_CACHE_MAXSIZE") if k in os.environ}}
    with log.open("w") as out:
        try:
            done = subprocess.run(arguments, env=bare, stdout=out, stderr=subprocess.STDOUT, cwd=RECIPE,
                                  timeout=600)
        except subprocess.TimeoutExpired:
            out.write("\n(stopped after 600 s)\n")
            return 124
    return done.returncode


def local_channel(packages: list[Path], channel: Path) -> None:
    """The packages in a channel of their own, indexed."""
    import rattler.index  # noqa: PLC0415

    shutil.rmtree(channel, ignore_errors=True)
    (channel / "linux-64").mkdir(parents=True)
    for package in packages:
        shutil.copy(package, channel / "linux-64" / package.name)
    asyncio.run(rattler.index.index_fs(channel))


def build_outputs(plan: dict, stage: Path, work: Path, job: Path, variant_overrides: dict, channel: Path,
                  output: Path, results: dict, results_dir: Path, configure_only: bool) -> list[Path]:
    """Each output of the plan built by rattler-build from the device's copy of the recipe."""
    from rattler_build import Stage0Recipe, ToolConfiguration, VariantConfig  # noqa: PLC0415

    # a package an earlier pipeline built in this work folder is kept only for the same settings
    settings = output / "overrides.json"
    if settings.exists() and json.loads(settings.read_text()) != plan["overrides"]:
        shutil.rmtree(output)
    output.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps(plan["overrides"]))
    with Step(results, "recipe") as record:
        src, trees = unpack_sources(stage, work, plan)
        recipe_dir, record["diff"] = device_recipe(plan, work, src, stage / "mirror", configure_only, trees)
        print(record["diff"])
        variants = variant_file(job, work, variant_overrides)
    rendered = Stage0Recipe.from_file(recipe_dir / "recipe.yaml").render(VariantConfig.from_file(variants))
    built = []
    for name in plan["outputs"]:
        made = f"linux-64/{name}-{plan['version']}-*.conda"
        kept = sorted(output.glob(made))
        if kept:
            # built by an earlier pipeline in this work folder, one whose later output failed: not built again
            print(f"== build {name}: kept {kept[-1]}", flush=True)
            results.setdefault("packages", []).append(conda_facts(kept[-1]) | {"kept from an earlier run": True})
            built.append(kept[-1])
            continue
        with Step(results, f"build {name}") as record:
            (variant,) = [v for v in rendered if v.recipe.to_dict()["package"]["name"] == name]
            record["variant"] = {k: str(v) for k, v in variant.variant.items()}
            said = Said(echo=True)
            try:
                # keep_build: the work folder, with the build script's log and ninja's, outlives the build, in
                # bld/rattler-build_<name> (no_build_id: no time stamp in the name)
                variant.run_build(tool_config=ToolConfiguration(test_strategy="skip", compression_threads=os.cpu_count(),
                                                                keep_build=True),
                                  output_dir=output, channels=[channel.as_uri()], no_build_id=True, progress_callback=said)
            finally:
                (results_dir / f"rattler-build-{name}.log").write_text("\n".join(said.lines) + "\n")
                for script_log in output.glob(f"bld/rattler-build_{name}/work/conda_build.log"):
                    shutil.copy(script_log, results_dir / f"conda_build-{name}.log")
                # each ninja step's start and end, to tell where the build spent its time
                for ninja_log in output.glob(f"bld/rattler-build_{name}/work/*/.ninja_log"):
                    shutil.copy(ninja_log, results_dir / f"ninja_log-{name}.txt")
                record["linking"] = linking_findings(said.lines)
            (package,) = output.glob(made)
            results.setdefault("packages", []).append(conda_facts(package))
            built.append(package)
    import rattler.index  # noqa: PLC0415

    # the kept packages with the new ones, for the tests' and the user's solver
    asyncio.run(rattler.index.index_fs(output))
    return built


def run_tests(package: Path, channels: list[str], results: dict) -> None:
    """The package's own tests, run by rattler-build one by one."""
    from rattler_build import Package  # noqa: PLC0415

    built_package = Package.from_file(package)
    name = built_package.name
    with Step(results, f"tests {name}") as record:
        record["results"] = []
        for index in range(built_package.test_count):
            started, said = time.monotonic(), Said(echo=True)
            try:
                outcome = built_package.run_test(index, channel=channels, progress_callback=said)
                success, lines = outcome.success, outcome.output
            except Exception as error:  # rattler-build raises for a test that fails: record it, run the next
                success, lines = False, [*said.lines, f"{type(error).__name__}: {error}"]
            said = "\n".join(lines) if isinstance(lines, list) else str(lines)
            record["results"].append({"index": index, "success": success, "output": said[-6000:],
                                      "seconds": round(time.monotonic() - started, 1)})
            print(f"{name} test {index}: {'passed' if success else 'FAILED'}", flush=True)
        record["ok"] = all(r["success"] for r in record["results"])


def use_plugin(prefix: Path, manifest: dict, results_dir: Path, purpose: str,
               roots: dict[str, str]) -> dict[str, int]:
    """What a user of the environment does with the plugin its `manifest` names, each run's exit status by its
    name (its log is results/<name>.log)."""
    runs = {}
    if purpose == "package":
        # the library the manifest names, under the registration name it gives, as README.md has users do
        load = ["test_plugin_load.py", "--library", str(prefix / manifest["library"]),
                "--ep-name", manifest["registration_name"], "--require-device"]
        runs["user-run"] = run_in(prefix, [str(prefix / "bin" / "python"), *load], results_dir / "user-run.log")
        torch_first = ["-c", "import sys; sys.path.append(sys.argv[1]); import torch; "
                       "print('torch', torch.__version__, torch.cuda.is_available()); sys.argv = sys.argv[2:]; "
                       "import runpy; runpy.run_path('test_plugin_load.py', run_name='__main__')",
                       sysconfig.get_paths()["purelib"], *load]
        runs["user-run-after-torch"] = run_in(prefix, [str(prefix / "bin" / "python"), *torch_first],
                                              results_dir / "user-run-after-torch.log")
        return runs
    # this feedstock's onnxruntime registers the plugin at import; its model, saved for the C++ program too
    model = results_dir / "model.onnx"
    runs["user-python"] = run_in(prefix, [str(prefix / "bin" / "python"), str(HERE / "user_check.py"), str(model)],
                                 results_dir / "user-python.log")
    if purpose != "cpu":  # a speed run's environment has no onnxruntime-cpp
        return runs
    # built with the machine's compiler, CMake and ninja against the environment's onnxruntime-cpp
    tools = ":".join(str(Path(roots[k]).parent) for k in ("cmake", "ninja", "gxx"))
    runs["user-cpp"] = run_in(prefix, ["bash", str(HERE / "consumer" / "run.sh"), str(prefix), str(model)],
                              results_dir / "user-cpp.log", extra_path=tools)
    return runs


def gpu_features(prefix: Path, manifest: dict, results_dir: Path) -> int:
    """IOBinding with device memory and CUDA graphs through the plugin the manifest names (gpu_features.py),
    torch's tensors from the machine's torch; its exit status, its log results/user-gpu-features.log."""
    return run_in(prefix, [str(prefix / "bin" / "python"), str(HERE / "gpu_features.py"),
                           "--library", str(prefix / manifest["library"]), "--ep", manifest["registration_name"],
                           "--torch-path", sysconfig.get_paths()["purelib"]], results_dir / "user-gpu-features.log")


def joined(folder: Path, into: Path) -> list[Path]:
    """The files pack.py cut into pieces (`<file>.part-NNN`, its `pieces`), put together again in `into`."""
    parts: dict[str, list[Path]] = {}
    for piece in sorted(folder.glob("*.part-*")):
        parts.setdefault(piece.name.rsplit(".part-", 1)[0], []).append(piece)
    into.mkdir(parents=True, exist_ok=True)
    for name, pieces in parts.items():
        with (into / name).open("wb") as whole:
            for piece in pieces:
                whole.write(piece.read_bytes())
    return [into / name for name in parts]


def compare_speed(prefix: Path, plan: dict, stage: Path, work: Path, results_dir: Path) -> dict:
    """The plugin in the user's environment against the compared wheel's built-in CUDA EP (speed.py): the
    models exported by the machine's torch, each side measured in fresh processes of its own interpreter,
    and the table. The wheel is unpacked beside the machine's Python, which has the CUDA libraries it loads."""
    import hashlib  # noqa: PLC0415
    import zipfile  # noqa: PLC0415

    (wheel,) = joined(stage / "compare", work / "compare")
    if hashlib.sha256(wheel.read_bytes()).hexdigest() != plan["compare_sha256"]:
        raise ValueError(f"{wheel.name}: its pieces put together differ from the wheel pack.py cut (sha256)")
    site = work / "compare" / "site"
    shutil.rmtree(site, ignore_errors=True)
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    speed, models = [sys.executable, str(HERE / "speed.py")], work / "models"
    sides = {"speed-plugin": ["--python", str(prefix / "bin" / "python"), "--label", PLUGIN],
             "speed-compared": ["--python", sys.executable, "--path", str(site), "--preload",
                                "--label", wheel.name.split("-")[0].replace("_", "-")]}
    runs = {"speed-export": run_in(prefix, [*speed, "export", str(models)], results_dir / "speed-export.log")}
    if not runs["speed-export"]:
        files: dict[str, list[str]] = {name: [] for name in sides}
        # the sides in alternation, ABBAAB: a drift of the GPU's or the host's state over the minutes weighs on both
        for number in range(1, SPEED_ROUNDS + 1):
            for name, side in (sides.items() if number % 2 else reversed(sides.items())):
                files[name].append(str(results_dir / f"{name}-{number}.json"))
                runs[f"{name}-{number}"] = run_in(prefix, [*speed, "measure", *side, "--models", str(models),
                                                           "--out", files[name][-1]],
                                                  results_dir / f"{name}-{number}.log")
        # then each operator's time per node, from ONNX Runtime's profiler
        for name, side in sides.items():
            runs[f"{name}-profile"] = run_in(prefix, [*speed, "measure", *side, "--models", str(models), *PROFILED,
                                                      "--out", str(results_dir / f"{name}-profile.json")],
                                             results_dir / f"{name}-profile.log")
        profiles = [str(results_dir / f"{name}-profile.json") for name in sides]
        # a case that failed in a round shows in the table as that round's error; a round that wrote nothing does not
        if all(Path(f).exists() for f in (*files["speed-plugin"], *files["speed-compared"])):
            runs["speed-table"] = run_in(prefix, [*speed, "table", "--plugin", *files["speed-plugin"],
                                                  "--other", *files["speed-compared"],
                                                  *(["--profiles", *profiles] if all(Path(f).exists() for f in profiles) else [])],
                                         results_dir / "speed.md")
    table = (results_dir / "speed.md").read_text() if runs.get("speed-table") == 0 else ""
    return {"runs": runs, "table": table, "ok": not any(runs.values()) and "speed-table" in runs,
            "logs": {name: (results_dir / f"{name}.log").read_text(errors="replace")[-3000:]
                     for name in runs if name != "speed-table"}}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stage", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--toolkit", type=Path, default=Path("/usr/local/cuda-13.0"))
    parser.add_argument("--results", type=Path, help="where package.json and package.md go (default: WORK/results)")
    parser.add_argument("--configure-only", action="store_true")
    parser.add_argument("--package", type=Path,
                        help="a plugin package built by an earlier run: tested and installed instead of building one; "
                             "for the CPU packages, installed with them; for a speed run, the plugin measured")
    args = parser.parse_args(argv)
    # what this script was started with stays with it: rattler-build's environments and the user's get none of it
    started_with = {k: os.environ.pop(k, "") for k in ("PYTHONPATH", "LD_LIBRARY_PATH")}
    stage, work = args.stage.resolve(), args.work.resolve()
    results_dir = (args.results or work / "results").resolve()
    results_dir.mkdir(parents=True, exist_ok=True)
    plan = json.loads((stage / "plan.json").read_text())
    plan["device_cuda"] = toolkit_version(args.toolkit)
    purpose = plan["purpose"]
    # the CPU packages' run and the speed run install packages earlier runs built (--package, plan.json's core)
    cpu_packages, speed = purpose == "cpu", purpose == "speed"
    from_earlier = cpu_packages or speed
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    results: dict = {"overrides": plan["overrides"], "cuda": plan["device_cuda"], "python": python,
                     "started_with": started_with, "machine": machine_facts()}

    def save() -> None:
        (results_dir / "package.json").write_text(json.dumps(results, indent=1) + "\n")
        write_report(results, results_dir / "package.md")

    channel, output, earlier = work / "channel", work / "output", work / "earlier"
    try:
        with Step(results, "channel") as record:
            # each job's variant with this machine's CUDA and Python: the GPU machine's own toolkit and interpreter
            cuda_overrides = {"cuda_compiler_version": plan["device_cuda"], "python": f"{python}.* *_cpython"}
            # the CUDA job pack.py chose, which its plan names
            jobs = {job_file(REPO, "linux-64", plan["cuda"]): cuda_overrides}
            if from_earlier:
                # the CPU job's stand-ins are what onnxruntime installs with, the CUDA job's what the plugin does;
                # the first job is the one built
                cpu_job = {job_file(REPO, "linux-64", None): {"python": cuda_overrides["python"]}}
                jobs = cpu_job | jobs if cpu_packages else jobs | cpu_job
            job, variant_overrides = next(iter(jobs.items()))
            record["jobs"] = {path.name: overrides for path, overrides in jobs.items()}
            # the cores the plugin's tests load, which the CPU packages' run replaces with its own onnxruntime
            cores = {} if from_earlier else {"min_core_version": plan["cores"]["floor"], "newest_core_version": plan["cores"]["newest"]}
            chosen = sorted({s for path, overrides in jobs.items() for s in standins([path], cores, overrides=overrides)},
                            key=lambda s: (s.name, s.version, s.build))
            shutil.rmtree(channel, ignore_errors=True)
            import nvidia.cudnn  # noqa: PLC0415

            roots = machine_roots(stage / "wheels", sorted(stage.glob("debs/*.deb")), work, args.toolkit,
                                  Path(list(nvidia.cudnn.__path__)[0]))
            built = build_channel(chosen, channel, roots)
            record["packages"] = {p.name: p.stat().st_size for p in built}
        if plan["outputs"]:
            packages = build_outputs(plan, stage, work, job, variant_overrides, channel, output, results, results_dir,
                                     args.configure_only)
        elif speed:
            packages = []  # the earlier run's plugin is installed below
            results["packages"] = [conda_facts(args.package)]
        else:
            # an earlier run's plugin, in a channel of its own, tested and installed instead of built
            local_channel([args.package], output)
            packages = [output / "linux-64" / args.package.name]
            results["packages"] = [conda_facts(packages[0])]
        if args.configure_only:
            return 0
        for package in [] if speed else packages:  # a speed run's plugin is tested by the package run
            run_tests(package, [output.as_uri(), channel.as_uri()], results)
        if cpu_packages and args.package is None:
            return 0 if all(s.get("ok") for s in results["steps"].values()) else 1
        with Step(results, "install") as record:
            # what this run built, what earlier runs built, the stand-ins
            channels = [*([output.as_uri()] if packages else []), channel.as_uri()]
            specs = ["onnxruntime", PLUGIN, "onnx"]
            if from_earlier:
                local_channel([stage / plan[key] for key in ("package", "core") if key in plan], earlier)
                channels.insert(-1, earlier.as_uri())
            if cpu_packages:
                specs.append("onnxruntime-cpp")
            prefix = work / "user-env"
            record["packages"] = user_environment(channels, specs, prefix)
            record["manifest"] = json.loads(next((prefix / manifest_dir("unix")).glob("*.json")).read_text())
            record["runs"] = use_plugin(prefix, record["manifest"], results_dir, purpose, roots)
            record["ok"] = not any(record["runs"].values())
            # what a user moving from a CUDA build of onnxruntime keeps: in the report, not a condition of the install
            record["runs"]["user-gpu-features"] = gpu_features(prefix, record["manifest"], results_dir)
            record["logs"] = {name: (results_dir / f"{name}.log").read_text(errors="replace")[-3000:]
                              for name in record["runs"]}
        if speed:
            with Step(results, "speed") as record:
                record |= compare_speed(prefix, plan, stage, work, results_dir)
    except Exception:  # every step's outcome goes in the report, the failing one's too
        import traceback  # noqa: PLC0415

        traceback.print_exc()
        return 1
    finally:
        save()
    return 0 if all(s.get("ok") for s in results["steps"].values()) else 1


if __name__ == "__main__":
    status = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # no interpreter shutdown: rattler-build's and rattler's worker threads can abort it (PyGILState_Release,
    # once under load), which would turn this exit status into SIGABRT
    os._exit(status)
