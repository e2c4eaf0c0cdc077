#!/usr/bin/env python3
"""Lay out what a run on the GPU machine needs, in bundles that each fit one call's transfer.

    python3 scripts/device/pack.py [--mirror DIR] [--dest DIR] [--package PLUGIN] [--core ORT]
    python3 scripts/device/pack.py --cost [--mirror DIR] [--dest DIR]
    python3 scripts/device/pack.py --cpu [--novec] [--mirror DIR] [--dest DIR] [--package PLUGIN]
    python3 scripts/device/pack.py --speed [--core ORT] [--mirror DIR] [--dest DIR] [--package PLUGIN | --patch P ...]

The GPU machine has no network, and one call carries at most 64 MiB: the checkout plus the folders named in
`carry`. The sources, from a mirror folder laid out as scripts/standins/sources.py describes (ONNX Runtime's
`.tar.zst` tarball, the archives its CMake fetches, the cutlass/cudnn_frontend trees), protoc and zstd from
Debian, and the ONNX Runtime cores and the tools from PyPI are split into DEST/bundle-N folders of at most
BUNDLE_LIMIT bytes each. DEST/bundle-1/plan.json (plan.py's Plan) says what the run builds and tests, with which
cores, and which settings differ from conda-forge's build (`DEVICE_OVERRIDES`, each with its reason); run.sh and
package.py on the GPU machine read it. docs/gpu-machine.md ("Building the plugin package on a GPU") gives the
calls. The package run also runs upstream's operator suite (`OPERATOR_SUITE`, in the tarball) with the floor
core, the newest, the newest with cuDNN hidden, and with --core this feedstock's onnxruntime (or onnxruntime-novec)
from an earlier run; its models are made by onnx at SUITE_ONNX (scripts/cores.py), which every core reads. With
--cost it plans a cost run instead (README.md, "What a release costs"): the recipe's own settings, its
architecture list and floor those of the newest CUDA job (`cost_overrides`). With --cpu it plans the CPU
packages instead (`onnxruntime-cpp`, and `onnxruntime` for the machine's Python; --novec: their -novec twins),
and with --package a user's environment of them and that plugin package after they are built
(docs/gpu-machine.md, "The CPU packages on the GPU machine"). With --speed it plans the speed comparison: the
plugin built with SASS for the machine's GPU (`SPEED_PLUGIN_OVERRIDES`; with --package, that earlier run's
plugin instead), in a user's environment with the onnxruntime package an earlier run built (--core; without it,
a stand-in made of PyPI's onnxruntime wheel of the recipe's version), measured against onnxruntime-gpu's wheel
of the same version, which travels in pieces (pieces.py; docs/gpu-machine.md,
"How fast the plugin is measured"). Exit 0 when the bundles are written, 2 when an input is missing.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# the one command here that runs before .venv/ exists: bootstrap.py, which makes it, is one folder up
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bootstrap
from cores import NEWEST_CORE, SUITE_ONNX

# the tests' requirements, which hold the scripts': the operator suite's tools (SUITE_TOOLS) travel at their pins
bootstrap.ensure(bootstrap.REPO / "tests" / "requirements.txt")

from feedstock.ci_support import job_file, load_jobs, newest_cuda
from feedstock.inputs import load_config
from feedstock.rendering import NOVEC
from pieces import cut
from plan import (Compared, Cores, Job, OperatorSuite, Overrides, Plan, Purpose, Setting, SuiteRun,
                  package_name)
from standins import StandinError
from standins.evaluate import evaluate
from standins.environment import PROTOBUF_DEBS, TOOL_WHEELS
from standins.sources import TREES, Sources, SourcesUnavailable, from_mirror, mirror_folder
from steps import PLUGIN

MIB = 1024 * 1024
# One call carries 64 MiB; the tracked checkout travels with every bundle and must stay under the rest.
CALL_LIMIT = 64 * MIB
CHECKOUT_ALLOWANCE = 4 * MIB
BUNDLE_LIMIT = CALL_LIMIT - CHECKOUT_ALLOWANCE
# bundle-1 also carries plan.json, written after the inputs are packed
PLAN_ALLOWANCE = 64 * 1024
# The lent machine: linux-64, the image's Python 3.12 and its own CUDA 13.0 toolkit (run.sh), with which
# it builds the newest linux-64 CUDA job's recipe: a CUDA 13 job's list is what CUDA 13.0's nvcc compiles too.
MACHINE_PYTHON = "3.12"
WHEEL_TAGS = ["--python-version", MACHINE_PYTHON, "--implementation", "cp", "--platform", "manylinux_2_28_x86_64",
              "--platform", "manylinux_2_27_x86_64", "--platform", "manylinux_2_17_x86_64",
              "--platform", "manylinux_2_5_x86_64"]


# What run.sh installs from PyPI, from the bundles' rattler/ folder, before the Python steps run: rattler-build
# and rattler (py-rattler-build, py-rattler) and what the scripts read their files with, at the versions this
# machine's own scripts and tests run (scripts/requirements.txt, and what pydantic needs but typing-extensions,
# which the machine's image has). The stand-in channel
# takes CMake, ninja and packages besides the image's own from wheels/ (TOOL_WHEELS, and the plan's cores).
RATTLER = [f"{name}=={importlib.metadata.version(name)}" for name in
           ("py-rattler-build", "py-rattler", "pydantic", "pydantic-core", "annotated-types", "typing-inspection")]
# What upstream's operator suite runs with (pytest, its dependencies, pytest-xdist and pytest-timeout, which
# case_log.py takes the per-case timer of), at the versions this machine's tests run it with; beside them, onnx
# at SUITE_ONNX (scripts/cores.py), ahead of the environment's own on the suite's path
SUITE_TOOLS = [f"{name}=={importlib.metadata.version(name)}" for name in
               ("pytest", "pluggy", "iniconfig", "pygments", "execnet", "pytest-xdist", "pytest-timeout")]
# protoc 3.21 for the build machine and zstd, which the image lacks
DEBIAN_PACKAGES = [*PROTOBUF_DEBS, "zstd"]

# Every setting in which the GPU machine's build differs from conda-forge's, with its reason: values of the
# recipe's context, script variables of the plugin's output, and CMake cache settings (package.py puts them
# in the device's copy of the recipe and prints the difference).
DEVICE_OVERRIDES = Overrides(
    context=(
        Setting("cuda_architectures", "75-real;75-virtual",
         "the list's oldest entry alone, plus its PTX, which the H200 compiles at load time: the kernels that "
         "need SM80 or newer (the MoE GEMMs, flash attention) build as empty stubs, which cuts the MoE kernels' "
         "cicc time a unit to a fraction (docs/build-cost/2026-12-02-measurements.json), and no SM90 TMA units "
         "are built"),
        Setting("cuda_arch_floor", "7.5", "that list's oldest SASS, as in the recipe"),
    ),
    env=(
        Setting("CUDA_BUILD_JOBS", "16", "the machine's 16 cores"),
        Setting("NVCC_GB_PER_THREAD", "1",
                "the machine's memory reads low at first and grows as it is used; 16 jobs fit its 128 GB"),
    ),
    cmake=(
        Setting("onnxruntime_QUICK_BUILD", "ON",
                "flash attention for head size 128 only (upstream's developer switch)"),
        Setting("onnxruntime_USE_FPA_INTB_GEMM", "OFF", "no fpA_intB GEMM kernels"),
        Setting("onnxruntime_USE_FP8_KV_CACHE", "OFF", "no FP8 KV-cache variants of the XQA kernels"),
        # not onnxruntime_USE_MEMORY_EFFICIENT_ATTENTION=OFF: core/providers/cuda/llm/attention.cc then fails to
        # compile (kCutlassSafeMaskFilterValue is not declared; GPU run of 2026-12-02)
    ),
)


# The CPU packages' run (--cpu): the recipe's settings but two, each with its reason
CPU_OVERRIDES = Overrides(
    cmake=(
        Setting("onnxruntime_BUILD_UNIT_TESTS", "OFF",
         "onnxruntime-cpp's unit tests, built and run by build_cpp.py, would double its build and leave no room in "
         "the loan for the Python package's; conda-forge's CI builds and runs them"),
        Setting("Python_INCLUDE_DIR", f"$ENV{{PREFIX}}/include/python{MACHINE_PYTHON}",
                "the python stand-in's interpreter (the machine's own, with a pyvenv.cfg) names its base's include "
                "folder, outside CMake's find root; the stand-in carries those headers where conda's python has them"),
    ),
)

# The plugin whose speed is compared (--speed): the recipe's settings for the kernels the compared models
# run, with the machine's own GPU in the list, each difference with its reason
SPEED_PLUGIN_OVERRIDES = Overrides(
    context=(
        Setting("cuda_architectures", "90-real",
         "SASS for the H200 alone: the machine runs the machine code a conda-forge build ships for it (every "
         "CUDA 13 list has 90-real), not PTX compiled at load, and one target keeps the build inside a loan"),
        Setting("cuda_arch_floor", "9.0", "that list's oldest SASS, as in the recipe"),
    ),
    env=DEVICE_OVERRIDES.env,
    cmake=(
        Setting("onnxruntime_QUICK_BUILD", "ON",
         "flash attention for head size 128 alone and fewer MoE GEMM tile shapes (upstream's developer switch): "
         "kernels of attention and MoE operators, which no compared model has (speed.py records the operators "
         "each EP ran)"),
        Setting("onnxruntime_USE_FPA_INTB_GEMM", "OFF",
                "kernels for weight-only quantized MatMuls, which no compared model has; with SM 90 in the list their "
                "16 SM90 launchers would compile 2 at a time (SM90_TMA_JOBS)"),
        Setting("onnxruntime_USE_FP8_KV_CACHE", "OFF",
                "FP8 KV-cache variants of the XQA kernels, which no compared model uses"),
    ),
)
# Upstream's operator suite for the plugin, in the source tree, which the package run runs against the
# installed plugin (package.py's operator_suites)
OPERATOR_SUITE = "onnxruntime/test/python/transformers/test_cuda_plugin_ep.py"
# The speed comparison (--speed): what it measures the plugin against, at the recipe's version
COMPARED = "onnxruntime-gpu"
# and the sampling profiler that shows where each side's host time goes in a run, native frames included (nsys,
# where the machine has it, traces the CUDA API alone): its wheel holds one static program, at the version
# test_speed runs here
PROFILER = f"py-spy=={importlib.metadata.version('py-spy')}"


class PackError(Exception):
    pass


def _run(command: list[str], cwd: Path) -> None:
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        raise PackError(f"{' '.join(command)} exited {result.returncode}: {(result.stderr or result.stdout).strip()}")


def cost_overrides(recipe: dict) -> Overrides:
    """A cost run keeps the recipe's settings: the newest CUDA job's architecture list and floor, which the
    recipe has for that job's CUDA and not for the machine's 13.0, whose nvcc compiles the same list."""
    (floor,) = [c.split(">=")[1] for c in recipe["requirements"]["run_constraints"] if c.startswith("__cuda_arch ")]
    reason = "the newest linux-64 CUDA job's, as the recipe has it"
    return Overrides(context=(Setting("cuda_architectures", recipe["build"]["script"]["env"]["CUDA_ARCHITECTURES"],
                                      reason), Setting("cuda_arch_floor", floor, reason)))


def suite_runs(cores: Cores, version: str, core: str | None) -> tuple[SuiteRun, ...]:
    """The operator suite's runs: with the floor core, this feedstock's own onnxruntime (or onnxruntime-novec)
    where the run carries one (`core`, of the recipe's `version`), the newest PyPI core, and that core once more
    with cuDNN hidden."""
    own = []
    if core is not None:
        own = [SuiteRun(f"operators-feedstock-{package_name(core)}-{version}", version, feedstock_core=True)]
    return (SuiteRun(f"operators-{cores.floor}", cores.floor), *own,
            SuiteRun(f"operators-{cores.newest}", cores.newest),
            SuiteRun(f"operators-without-cudnn-{cores.newest}", cores.newest, cudnn=False))


def build_plan(feedstock: Path, purpose: Purpose = "package", package: str | None = None,
               core: str | None = None, novec: bool = False, patches: tuple[str, ...] = ()) -> Plan:
    """What the run builds, for the newest linux-64 CUDA job; `package` and `core`, earlier runs' plugin and
    onnxruntime by their paths in the bundles. `package`: the plugin as rattler-build evaluates it, with the
    device overrides (or `package`, built before), the cores its tests load it into, and upstream's operator
    suite; `cost` (scripts/buildcost.py): the plugin with the recipe's own settings; `cpu`: the CPU packages of
    the CPU job (`novec`: the -novec one's), whose user's environment takes its CUDA libraries from the CUDA job's
    stand-ins; `speed`: the plugin with the speed overrides (or `package`), untested (the package run tests the
    plugin), in the environment of `core` (without it, of the stand-in core of the recipe's version, PyPI's
    wheel), and the wheel it is compared with, with `patches` of ONNX Runtime's source (their paths in the
    bundles) on top of the recipe's."""
    cuda = newest_cuda(load_jobs(feedstock), "linux-64")
    try:
        recipe, _ = evaluate(feedstock, PLUGIN, cuda, None)
    except StandinError as error:
        raise PackError(str(error)) from None
    version, script_env = recipe["package"]["version"], recipe["build"]["script"]["env"]
    # the CPU job's stand-ins are what onnxruntime installs with, the CUDA job's what the plugin does; the first
    # job is the one built
    cuda_job = Job(str(job_file(feedstock, "linux-64", cuda).relative_to(feedstock)), cuda)
    cpu_job = Job(str(job_file(feedstock, "linux-64", None, NOVEC if novec else "").relative_to(feedstock)))
    earlier = {"package": package, "core": core}
    outputs = load_config(feedstock).outputs
    python = outputs.python
    if core is not None and package_name(core) not in (python.name, python.novec_name):
        raise PackError(f"{Path(core).name}: not a package of {python.name} or {python.novec_name}, which "
                        "--core names")
    if purpose == "cpu":
        # onnxruntime-cpp and onnxruntime, or their -novec twins
        cpu_outputs = (outputs.cpp.novec_name, python.novec_name) if novec else (outputs.cpp.name, python.name)
        return Plan(purpose, version, (cpu_job, cuda_job), cpu_outputs, CPU_OVERRIDES, **earlier)
    # an earlier run's plugin is tested or measured instead of built: no setting of this run's differs
    built = {"outputs": (), "overrides": Overrides()} if package else {"outputs": (PLUGIN,)}
    if purpose == "speed":
        # without `core`, the stand-in channel carries PyPI's core of the recipe's version as the newest, so that
        # the plugin is measured in the core that the compared wheel's CUDA EP is built into
        stand_in = {"cores": Cores(script_env["ORT_MIN_CORE_VERSION"], version)} if core is None else {}
        return Plan(purpose, version, (cuda_job, cpu_job), script_env=script_env, **stand_in,
                    compare=Compared(f"{COMPARED}=={version}"), **({"overrides": SPEED_PLUGIN_OVERRIDES} | built),
                    patches=patches, **earlier)
    cores = Cores(script_env["ORT_MIN_CORE_VERSION"], NEWEST_CORE)
    if purpose == "cost":
        return Plan(purpose, version, (cuda_job,), (PLUGIN,), cost_overrides(recipe), script_env, cores)
    return Plan(purpose, version, (cuda_job,), script_env=script_env, cores=cores,
                operator_suite=OperatorSuite(OPERATOR_SUITE, suite_runs(cores, version, core)),
                **({"overrides": DEVICE_OVERRIDES} | built), **earlier)


def mirrored(upstream: Path, version: str, trees: bool) -> Sources:
    """The mirror folder's sources of `version`, with the cutlass and cudnn_frontend `trees` where the run builds
    the plugin (standins/sources.py reads the folder); a PackError saying what is missing otherwise."""
    try:
        located = from_mirror(upstream, version)
    except SourcesUnavailable as error:
        raise PackError(str(error)) from None
    if not located.tarball.name.endswith(".tar.zst"):
        raise PackError(f"{located.tarball}: the GPU machine unpacks the source with zstd; give it as .tar.zst")
    if trees and located.trees is None:
        raise PackError(f"{upstream / TREES}: missing; the plugin's build takes cutlass and cudnn_frontend from it")
    return located


def _download(requirement: str, folder: Path) -> None:
    """One wheel for the machine's Python and platform (WHEEL_TAGS), without its dependencies, into folder."""
    _run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
          "--only-binary=:all:", *WHEEL_TAGS, "-d", str(folder), requirement], folder.parent)


def gather(upstream: Path | None, plan: Plan, scratch: Path) -> tuple[Plan, dict[str, Path]]:
    """What the run takes from here, each by its path inside a bundle, and the plan with the bundle paths of the
    operator suite's tools."""
    build: dict[str, Path] = {}
    # the source tarball for a build, and for the operator suite, which is in it
    if plan.outputs or plan.operator_suite:
        if upstream is None:
            raise PackError("no mirror folder: name one with --mirror or ORT_SOURCE_MIRROR")
        located = mirrored(upstream, plan.version, PLUGIN in plan.outputs)
        build = {f"sources/{located.tarball.name}": located.tarball}
    if plan.outputs:
        # cutlass and cudnn_frontend are the plugin's alone
        build |= {f"sources/{located.trees.name}": located.trees} if PLUGIN in plan.outputs else {}
        build |= {f"mirror/{p.relative_to(located.deps_mirror)}": p
                  for p in sorted(located.deps_mirror.rglob("*")) if p.is_file()}
    if plan.compare:
        compared = scratch / "compared"
        _download(plan.compare.requirement, compared)
        (wheel,) = compared.glob("*.whl")
        # package.py puts the pieces together, checked against the wheel's sha256 that `cut` writes beside them
        made = cut(wheel, scratch / plan.compare.folder, BUNDLE_LIMIT - PLAN_ALLOWANCE)
        build |= {f"{plan.compare.folder}/{piece.name}": piece for piece in made}
        _download(PROFILER, scratch / "profiler")
        build |= {f"profiler/{p.name}": p for p in (scratch / "profiler").glob("*.whl")}
    debs = scratch / "debs"
    debs.mkdir()
    _run(["apt-get", "download", *DEBIAN_PACKAGES], debs)
    build |= {f"debs/{p.name}": p for p in sorted(debs.glob("*.deb"))}
    cores = [f"onnxruntime=={version}" for version in dataclasses.astuple(plan.cores)] if plan.cores else []
    for folder, requirements in (("wheels", [*cores, *TOOL_WHEELS]), ("rattler", RATTLER)):
        for requirement in requirements:  # one at a time: pip refuses two versions of one project
            _download(requirement, scratch / folder)
        build |= {f"{folder}/{p.name}": p for p in sorted((scratch / folder).glob("*.whl"))}
    if plan.operator_suite:
        tools = scratch / "suite"
        for requirement in [*SUITE_TOOLS, f"onnx=={SUITE_ONNX}"]:
            _download(requirement, tools)
        carried = {f"suite/{p.name}": p for p in sorted(tools.glob("*.whl"))}
        build |= carried
        plan = dataclasses.replace(plan, operator_suite=dataclasses.replace(plan.operator_suite, tools=tuple(carried)))
    return plan, build


def bundles(inputs: dict[str, Path], limit: int) -> list[dict[str, Path]]:
    """First fit, largest first."""
    packed: list[dict[str, Path]] = []
    used: list[int] = []
    for name, path in sorted(inputs.items(), key=lambda item: -item[1].stat().st_size):
        size = path.stat().st_size
        if size > limit:
            raise PackError(f"{path}: {size} bytes, more than one call carries ({limit})")
        slot = next((i for i, u in enumerate(used) if u + size <= limit), None)
        if slot is None:
            packed.append({})
            used.append(0)
            slot = len(packed) - 1
        packed[slot][name] = path
        used[slot] += size
    return packed


def write(dest: Path, packed: list[dict[str, Path]], plan: Plan) -> None:
    staging = dest.with_name(dest.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    # the pipeline starts once every input is staged
    plan = dataclasses.replace(plan, inputs=tuple(sorted(name for bundle in packed for name in bundle)))
    for number, bundle in enumerate(packed, start=1):
        folder = staging / f"bundle-{number}"
        for name, path in bundle.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, folder / name)
    (staging / "bundle-1").mkdir(parents=True, exist_ok=True)
    plan.write(staging / "bundle-1" / "plan.json")
    # the earlier bundles give way; anything else in DEST (a package kept for a call) stays
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob("bundle-*"):
        shutil.rmtree(old)
    for folder in sorted(staging.iterdir()):
        folder.rename(dest / folder.name)
    staging.rmdir()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirror", type=Path, default=mirror_folder(os.environ),
                        help="the mirror folder (default: ORT_SOURCE_MIRROR, else ../shared/upstream)")
    parser.add_argument("--dest", type=Path, default=bootstrap.REPO / ".device", help="where the bundles go")
    parser.add_argument("--package", type=Path,
                        help="a plugin package an earlier run built (.cache/device/): tested and installed, not "
                             "rebuilt; with --cpu, installed with the CPU packages; with --speed, the plugin measured")
    parser.add_argument("--core", type=Path,
                        help="this feedstock's onnxruntime or onnxruntime-novec package an earlier run built "
                             "(.cache/device/): with "
                             "--speed, the environment the plugin is measured in (default: PyPI's onnxruntime of the "
                             "recipe's version, as a stand-in); else one more core upstream's "
                             "operator suite runs the plugin with")
    purpose = parser.add_mutually_exclusive_group()
    purpose.add_argument("--cost", action="store_const", dest="purpose", const="cost", default="package",
                         help="a cost run: the recipe's own settings, a sample of nvcc units compiled, no tests")
    purpose.add_argument("--cpu", action="store_const", dest="purpose", const="cpu",
                         help="the CPU packages, built and tested")
    parser.add_argument("--novec", action="store_true",
                        help="with --cpu: the -novec CPU packages (onnxruntime_DONT_VECTORIZE), of the -novec CPU job")
    purpose.add_argument("--speed", action="store_const", dest="purpose", const="speed",
                         help=f"the speed comparison: the plugin (built, or --package) in --core's environment (or "
                              f"PyPI's core of the recipe's version) against {COMPARED}")
    parser.add_argument("--patch", type=Path, action="append", default=[],
                        help="with --speed: a patch of ONNX Runtime's source that the plugin is built with, on top of "
                             "the recipe's, to measure it before it goes into config/feedstock.yaml (repeatable)")
    args = parser.parse_args(argv)
    if args.core is not None and args.purpose not in ("speed", "package"):
        parser.error("--core names the onnxruntime package a speed run measures the plugin with, or the package run "
                     "runs upstream's operator suite with: it goes with --speed or no purpose")
    if args.novec and args.purpose != "cpu":
        parser.error("--novec builds the -novec CPU packages: it goes with --cpu")
    if args.patch and (args.purpose != "speed" or args.package is not None):
        parser.error("--patch builds the plugin a speed run measures with a patch: it goes with --speed, without "
                     "--package")
    if args.purpose == "cost" and args.package is not None:
        parser.error("--cost measures the build of the recipe's plugin: it takes no --package")
    given = {key: path for key, path in (("core", args.core), ("package", args.package)) if path is not None}
    try:
        for path in [*given.values(), *args.patch]:
            if not path.is_file():
                raise PackError(f"{path}: no such file")
        carried = {f"packages/{path.name}": path for path in given.values()}
        patches = {f"patches/{path.name}": path for path in args.patch}
        if len(patches) < len(args.patch):
            # they travel under their names, so one would take the other's place
            raise PackError(f"--patch: two patches named alike: {' '.join(map(str, args.patch))}")
        carried |= patches
        plan = build_plan(bootstrap.REPO, args.purpose, novec=args.novec, patches=tuple(patches),
                          **{key: f"packages/{path.name}" for key, path in given.items()})
        with tempfile.TemporaryDirectory() as scratch:
            plan, inputs = gather(args.mirror and args.mirror.resolve(), plan, Path(scratch))
            inputs |= carried
            packed = bundles(inputs, BUNDLE_LIMIT - PLAN_ALLOWANCE)
            write(args.dest.resolve(), packed, plan)
    except PackError as error:
        print(f"pack: {error}", file=sys.stderr)
        return 2
    for number, bundle in enumerate(packed, start=1):
        size = sum(p.stat().st_size for p in (args.dest / f"bundle-{number}").rglob("*") if p.is_file())
        print(f"{args.dest / f'bundle-{number}'}: {len(bundle)} files, {size / MIB:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
