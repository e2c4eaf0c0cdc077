"""One output's build script run against ONNX Runtime's real source, as rattler-build would run it.

The script runs verbatim up to its build step: environment, CMake configure and all. There it stops,
as every build script does when REHEARSAL_TARGETS_FILE names a file, and leaves in that file the targets
the step would build (recipe/cmake_common.sh). The build step would take hours here, so instead the
rehearsal records the full build graph of those targets (`ninja -t commands`, `ninja -t compdb`) and
compiles a sample of their objects that covers each kind of translation unit. The report says what was
sampled; a sample is not a build. The build folder is the one the recipe names (ORT_BUILD_DIR in its
script environment), from which it lists the licence files.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ninja_graph import order_deps, target_compiles
from rehearsal.prefixes import Prefixes, RehearsalError, lay_out
from rehearsal.sources import Sources

# The cmake/deps.txt entries each output's linux-64 configure takes (upstream's CMake at 1.30.0): what a
# rehearsal without a mirror downloads, and checks, first. tests/test_rehearsal.py checks that they are
# exactly the archives the configure took.
_EVERY_BUILD = ("abseil_cpp", "date", "eigen", "flatbuffers", "json", "microsoft_gsl", "mp11", "onnx", "protobuf",
                "pytorch_cpuinfo", "re2", "safeint")
DEPENDENCIES = {"onnxruntime-ep-cuda": (*_EVERY_BUILD, "cudnn_frontend", "cutlass"),
                "onnxruntime-cpp": (*_EVERY_BUILD, "googletest"), "onnxruntime": (*_EVERY_BUILD, "dlpack")}
# How ORT's own sources include each dependency its CMake fetches: an object that includes one needs it
DEPENDENCY_INCLUDES = {
    "abseil_cpp": r"absl/", "protobuf": r"google/protobuf/", "onnx": r"onnx/", "re2": r"re2/",
    "flatbuffers": r"(core/)?flatbuffers/", "pytorch_cpuinfo": r"cpuinfo\.h", "date": r"date/",
    "nlohmann_json": r"nlohmann/", "eigen3": r"(unsupported/)?Eigen/", "gsl": r"gsl/",
    "safeint": r"(SafeInt\.hpp|core/common/safeint\.h)", "mp11": r"boost/mp11", "dlpack": r"(core/)?dlpack/",
    "pybind11": r"pybind11/",
}
# Fetched, but linked only into upstream's unit-test programs, which no output ships
TEST_ONLY_DEPENDENCIES = {"googletest"}
UNUSED_VARIABLES = re.compile(r"Manually-specified variables were not used by the project:\n\n((?:    \S+\n)+)")
GENCODE = re.compile(r"--generate-code=(\S+)")


@dataclass
class Sampled:
    object: str
    source: str
    why: str
    seconds: float = 0.0
    ok: bool = False
    error: str = ""


@dataclass
class Report:
    output: str
    variant: dict[str, str]
    workdir: str
    sources: str = ""
    configure_ok: bool = False
    configure_seconds: float = 0.0
    configure_error: str = ""
    standins: dict[str, list[str]] = field(default_factory=dict)
    standin_notes: list[str] = field(default_factory=list)
    unused_cmake_variables: list[str] = field(default_factory=list)
    build_targets: list[str] = field(default_factory=list)
    graph_steps: int = 0
    graph_compiles: int = 0
    fetched_dependencies: list[str] = field(default_factory=list)
    licence_files_missing: list[str] = field(default_factory=list)
    dependencies_without_licence: list[str] = field(default_factory=list)
    nvcc_sass: list[str] = field(default_factory=list)
    nvcc_ptx: list[str] = field(default_factory=list)
    link_line: str = ""
    sample: list[Sampled] = field(default_factory=list)
    not_rehearsed: list[str] = field(default_factory=list)
    patched_sources: list[str] = field(default_factory=list)
    # include folders of the graph's compiles that hold a header named like one of the C library's
    shadowing_include_dirs: list[str] = field(default_factory=list)


def _environment(report: Report, prefixes: Prefixes, rendered: dict[str, Any], src: Path, recipe_dir: Path,
                 cmake_args: list[str]) -> dict[str, str]:
    host, build = prefixes.host, prefixes.build
    env = {
        "PATH": f"{build / 'bin'}:{host / 'bin'}:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"),
        "LANG": "C.UTF-8", "SRC_DIR": str(src), "RECIPE_DIR": str(recipe_dir), "PREFIX": str(host),
        "BUILD_PREFIX": str(build), "PKG_NAME": report.output,
        "PKG_VERSION": str(rendered["package"]["version"]), "PKG_BUILDNUM": str(rendered["build"]["number"]),
        "CPU_COUNT": str(os.cpu_count() or 1), "target_platform": "linux-64", "build_platform": "linux-64",
        # conda-forge's linux-64 gcc activation flags (conda-forge/ctng-compiler-activation-feedstock
        # recipe/conda_build_config.yaml @ b5e6108, FINAL_*FLAGS; its -std=c++17 left out, as CMake passes
        # the standard), with the prefix paths its activation script adds
        "CFLAGS": f"-march=nocona -mtune=haswell -ftree-vectorize -fPIC -fstack-protector-strong -fno-plt -O2 -ffunction-sections -pipe -isystem {host}/include",
        "CXXFLAGS": f"-fvisibility-inlines-hidden -fmessage-length=0 -march=nocona -mtune=haswell -ftree-vectorize -fPIC -fstack-protector-strong -fno-plt -O2 -ffunction-sections -pipe -isystem {host}/include",
        "LDFLAGS": f"-Wl,-O2 -Wl,--sort-common -Wl,--as-needed -Wl,-z,relro -Wl,-z,now -Wl,--disable-new-dtags -Wl,--gc-sections -Wl,--allow-shlib-undefined -Wl,-rpath,{host}/lib -Wl,-rpath-link,{host}/lib -L{host}/lib",
        "CMAKE_ARGS": " ".join(cmake_args),
    }
    if (host / "bin" / "python").exists():
        env["PYTHON"] = str(host / "bin" / "python")
        site = next((host / "lib").glob("python3*/site-packages"))
        env["SP_DIR"] = str(site)
    env.update(prefixes.env)
    env.update({k: str(v) for k, v in (rendered["build"].get("script", {}).get("env") or {}).items()})
    return env


def _cmake_args(prefixes: Prefixes, sources: Sources) -> list[str]:
    """conda-forge's CMAKE_ARGS, plus ORT's offline mirror of the archives its CMake fetches."""
    host, build = prefixes.host, prefixes.build
    return [
        "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_INSTALL_PREFIX={host}", "-DCMAKE_INSTALL_LIBDIR=lib",
        f"-DCMAKE_PROGRAM_PATH={build}/bin;{host}/bin",
        # SHA1 checks and ORT's patch steps run as they would on a download
        f"-Donnxruntime_CMAKE_DEPS_MIRROR_DIR={sources.deps_mirror}",
        # conda-forge's CMAKE_ARGS root CMake's package search in PREFIX (and the sysroot, whose stand-in
        # has no CMake packages): a dependency ORT would take from the host comes from there or is fetched
        f"-DCMAKE_FIND_ROOT_PATH={host}", "-DCMAKE_FIND_ROOT_PATH_MODE_PACKAGE=ONLY",
    ]


def _place_trees(trees: Path, src: Path, build_dir: str, cmake_args: list[str]) -> None:
    """A mirror's cutlass and cudnn_frontend trees, put where FetchContent would unpack their archives."""
    deps = src / build_dir / "_deps"
    deps.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-xf", str(trees), "-C", str(deps)], check=True)
    for name in ("cutlass", "cudnn_frontend"):
        (deps / name).rename(deps / f"{name}-src")
        cmake_args.append(f"-DFETCHCONTENT_SOURCE_DIR_{name.upper()}={deps / f'{name}-src'}")
    # a FETCHCONTENT_SOURCE_DIR skips FetchContent's patch step, which ORT uses for cutlass
    subprocess.run(["patch", "-p1", "-i", str(src / "cmake/patches/cutlass/cutlass_4.7.0.patch")],
                   cwd=deps / "cutlass-src", check=True, stdout=subprocess.DEVNULL)


def _includes(source: Path, pattern: str) -> bool:
    text = source.read_text(errors="replace")
    return re.search(rf'#\s*include\s*[<"]{pattern}', text) is not None


def choose_sample(output: str, src: Path, compiles: list[dict[str, str]]) -> list[Sampled]:
    """The fewest of ORT's own objects that between them include every dependency (CPU outputs), or a
    CUDA-header host file, one plain `.cu` and one CUTLASS `.cu` (the plugin)."""
    # ORT's own library sources (not its tests), smallest first: the cheapest compile that shows it
    own = sorted((e for e in compiles if Path(e["file"]).resolve().is_relative_to(src / "onnxruntime")
                  and "/test/" not in e["file"]), key=lambda e: Path(e["file"]).stat().st_size)
    if output == "onnxruntime-ep-cuda":
        chosen = []
        kinds = [
            ("a host .cc that includes the CUDA headers (cuda_pch.h: cuda, cuBLAS, cuRAND, cuFFT)",
             lambda f: f.suffix == ".cc" and "providers/cuda" in str(f) and _includes(f, r"core/providers/cuda/cuda_common\.h")),
            ("a .cu at one architecture", lambda f: f.suffix == ".cu" and not _includes(f, r"cutlass/")),
            ("a CUTLASS-based .cu at one architecture", lambda f: f.suffix == ".cu" and _includes(f, r"cutlass/")),
        ]
        for why, matches in kinds:
            entry = next((e for e in own if matches(Path(e["file"]))), None)
            if entry is None:
                raise RehearsalError(f"the plugin's graph has no object of the kind `{why}`")
            chosen.append(Sampled(entry["output"], entry["file"], why))
        return chosen
    # the core objects are the C++ library's too: what only the Python build adds is its bindings
    python_only = {"dlpack", "pybind11"}
    wanted = python_only if output == "onnxruntime" else set(DEPENDENCY_INCLUDES) - python_only
    covers = {e["output"]: {d for d in wanted if _includes(Path(e["file"]), DEPENDENCY_INCLUDES[d])} for e in own}
    chosen, left = [], set(wanted)
    while left:
        best = max(own, key=lambda e: len(covers[e["output"]] & left))
        gained = covers[best["output"]] & left
        if not gained:
            break
        chosen.append(Sampled(best["output"], best["file"], "includes " + ", ".join(sorted(gained))))
        left -= gained
    if left:
        raise RehearsalError(f"no object of ORT's own that the build compiles includes {', '.join(sorted(left))}")
    return chosen


def _one_architecture(command: str) -> list[str]:
    """The nvcc command with only its first --generate-code kept."""
    words, kept = shlex.split(command), False
    result = []
    for word in words:
        if word.startswith("--generate-code="):
            if kept:
                continue
            kept = True
        result.append(word)
    return result


def compile_sample(build: Path, sample: list[Sampled], compiles: list[dict[str, str]], log: Path) -> None:
    """Host objects by ninja itself, all at once; each .cu by its own nvcc command at one architecture."""
    by_output = {e["output"]: e for e in compiles}
    with log.open("a") as out:
        host = [item for item in sample if not item.source.endswith(".cu")]
        if host:
            start = time.monotonic()
            done = subprocess.run(["ninja", "-C", str(build), "-k", "0", *(i.object for i in host)],
                                  capture_output=True, text=True)
            out.write(done.stdout + done.stderr)
            seconds = round(time.monotonic() - start, 1)
            for item in host:
                failed = f"FAILED: {item.object}" in done.stdout
                item.ok, item.seconds = (build / item.object).exists() and not failed, seconds
                if not item.ok:
                    after = done.stdout.split(f"FAILED: {item.object}", 1)[-1] if failed else done.stdout
                    errors = [line for line in after.splitlines() if "error" in line]
                    item.error = errors[0] if errors else f"not built: ninja exit {done.returncode}"
        for item in sample:
            if item in host:
                continue
            start = time.monotonic()
            entry = by_output[item.object]
            deps = order_deps(build, item.object)
            first = subprocess.run(["ninja", "-C", str(build), *deps], stdout=out, stderr=subprocess.STDOUT) if deps else None
            if first is not None and first.returncode != 0:
                item.error = f"its prerequisites failed to build (see {log.name})"
            else:
                command = _one_architecture(entry["command"])
                out.write(f"\n$ {shlex.join(command)}\n")
                out.flush()
                done = subprocess.run(command, cwd=entry["directory"], capture_output=True, text=True)
                out.write(done.stdout + done.stderr)
                item.ok = done.returncode == 0
                errors = [line for line in (done.stdout + done.stderr).splitlines() if "error" in line]
                item.error = "" if item.ok else (errors[0] if errors else f"exit {done.returncode}")
            item.seconds = round(time.monotonic() - start, 1)


def check_licences(license_files: list[str], src: Path, build_dir: str,
                   without_file: set[str]) -> tuple[list[str], list[str], list[str]]:
    """Listed licence files that are missing; fetched dependencies none of whose files is listed.

    `without_file`: dependencies the config lists with no licence file of their own (their notice is
    in ThirdPartyNotices.txt).
    """
    missing = [f for f in license_files if not (src / f).exists()]
    deps = sorted(p.name.removesuffix("-src") for p in (src / build_dir / "_deps").glob("*-src"))
    listed = {f.split("/_deps/", 1)[1].split("-src/", 1)[0] for f in license_files if "/_deps/" in f}
    unlisted = [d for d in deps if d not in listed | without_file | TEST_ONLY_DEPENDENCIES]
    return missing, unlisted, deps


# C library headers that its own headers include by name (glibc's <sys/types.h> includes <endian.h>)
C_LIBRARY_HEADERS = ("endian.h", "features.h", "limits.h", "stdlib.h", "string.h", "time.h", "math.h")


def shadowing_include_dirs(compiles: list[dict[str, str]]) -> list[str]:
    """`-I` folders that hold a header of the C library's name: it would be found before the C library's."""
    folders = {folder for entry in compiles for folder in re.findall(r"(?:^|\s)-I(\S+)", entry["command"])}
    return sorted(f for f in folders if any((Path(f) / header).is_file() for header in C_LIBRARY_HEADERS))


def nvcc_targets(commands: list[str]) -> tuple[list[str], list[str]]:
    """SASS (code=sm_*) and PTX (code=compute_*) of the graph's nvcc compiles."""
    sass, ptx = set(), set()
    for command in commands:
        if "nvcc" not in command.split(" ", 1)[0]:
            continue
        for code in GENCODE.findall(command):
            for item in re.findall(r"(sm_\w+|compute_\w+)", code.split("code=", 1)[-1]):
                (sass if item.startswith("sm_") else ptx).add(item)
    return sorted(sass), sorted(ptx)


def plugin_link_line(build: Path, commands: list[str]) -> str:
    """The plugin's link command with the libraries CMake hands it in a response file."""
    links = [c for c in commands if " -shared " in c and "libonnxruntime_providers_cuda.so" in c]
    if not links:
        return ""
    statement = re.search(r"^build libonnxruntime_providers_cuda\.so:.*?(?=^build |\Z)",
                          (build / "build.ninja").read_text(), re.MULTILINE | re.DOTALL)
    variables = dict(re.findall(r"^  (LINK_PATH|LINK_LIBRARIES) = (.*)$", statement.group(0), re.MULTILINE)) if statement else {}
    return " ".join([links[-1], variables.get("LINK_PATH", ""), variables.get("LINK_LIBRARIES", "")])


def rehearse(output: str, rendered: dict[str, Any], variant: dict[str, str], recipe_dir: Path, sources: Sources,
             workdir: Path, cache: Path, without_file: set[str], sample: bool = True,
             not_rehearsed: list[str] = ()) -> Report:
    report = Report(output, variant, str(workdir), sources.origin, not_rehearsed=list(not_rehearsed))
    workdir.mkdir(parents=True, exist_ok=True)
    src = workdir / "src"
    shutil.rmtree(src, ignore_errors=True)
    sources.unpack(src)
    # rattler-build applies the source's patches before any script runs
    patched: dict[str, str] = {}
    for source in rendered.get("source") or []:
        for patch in source.get("patches") or []:
            subprocess.run(["patch", "-p1", "-i", str(recipe_dir / patch)], cwd=src, check=True, stdout=subprocess.DEVNULL)
            for changed in re.findall(r"^\+\+\+ b/(\S+)", (recipe_dir / patch).read_text(), re.MULTILINE):
                patched[str(src / changed)] = patch
    report.patched_sources = sorted(patched)
    requirements = {k: [str(s) for s in v] for k, v in rendered["requirements"].items() if k in ("build", "host")}
    cuda = variant.get("cuda_compiler_version")
    prefixes = lay_out(requirements, None if cuda in (None, "None") else cuda, workdir, cache)
    report.standins, report.standin_notes = prefixes.laid_out, prefixes.notes
    script = rendered["build"]["script"]
    build_dir = str(script["env"]["ORT_BUILD_DIR"])
    cmake_args = _cmake_args(prefixes, sources)
    if output == "onnxruntime-ep-cuda":
        if sources.trees is not None:
            _place_trees(sources.trees, src, build_dir, cmake_args)
    env = _environment(report, prefixes, rendered, src, recipe_dir, cmake_args)
    log = workdir / "configure.log"
    targets = workdir / "build_targets.txt"
    targets.unlink(missing_ok=True)
    env["REHEARSAL_TARGETS_FILE"] = str(targets)
    start = time.monotonic()
    configure = subprocess.run(["bash", str(recipe_dir / f"{script['file']}.sh")], cwd=src, env=env,
                               stdout=log.open("w"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    report.configure_seconds = round(time.monotonic() - start, 1)
    text = log.read_text(errors="replace")
    report.configure_ok = configure.returncode == 0 and targets.is_file()
    license_files = [f for f in rendered["about"].get("license_file", [])]
    if not report.configure_ok:
        errors = [line.strip() for line in text.splitlines()
                  if re.search(r"CMake Error|fatal|error:|^ERROR", line)]
        # CMake's "CMake Error at <file>" is followed by the message itself
        errors.sort(key=lambda line: line.startswith("CMake Error"))
        stopped = f"exit {configure.returncode}" if configure.returncode else "the script never reached its build step"
        report.configure_error = errors[0] if errors else stopped
    else:
        unused = UNUSED_VARIABLES.search(text)
        report.unused_cmake_variables = unused.group(1).split() if unused else []
        build = src / build_dir
        report.build_targets = targets.read_text().split()
        commands, compiles = target_compiles(build, report.build_targets)
        (workdir / "graph.txt").write_text("\n".join(commands) + "\n")
        (workdir / "compile_commands.json").write_text(json.dumps(compiles, indent=1))
        report.graph_steps, report.graph_compiles = len(commands), len(compiles)
        report.licence_files_missing, report.dependencies_without_licence, report.fetched_dependencies = \
            check_licences(license_files, src, build_dir, without_file)
        report.nvcc_sass, report.nvcc_ptx = nvcc_targets(commands)
        report.shadowing_include_dirs = shadowing_include_dirs(compiles)
        report.link_line = plugin_link_line(build, commands)
        if sample:
            report.sample = choose_sample(output, src.resolve(), compiles)
            report.sample += [Sampled(e["output"], e["file"], f"changed by {patched[e['file']]}")
                              for e in compiles if e["file"] in patched]
            compile_sample(build, report.sample, compiles, workdir / "sample.log")
    (workdir / "report.json").write_text(json.dumps(asdict(report), indent=1) + "\n")
    (workdir / "report.txt").write_text(summary(report))
    return report


def summary(report: Report) -> str:
    lines = [f"rehearsal of {report.output} ({', '.join(f'{k}={v}' for k, v in sorted(report.variant.items()))})",
             f"sources: {report.sources}",
             f"configure: {'ok' if report.configure_ok else 'FAILED: ' + report.configure_error} in {report.configure_seconds} s",
             f"CMake variables reported unused: {', '.join(report.unused_cmake_variables) or 'none'}",
             f"build graph of {', '.join(report.build_targets)}: {report.graph_steps} steps, {report.graph_compiles} compiles (graph.txt)",
             f"licence files listed but missing: {', '.join(report.licence_files_missing) or 'none'}",
             f"fetched dependencies without a listed licence: {', '.join(report.dependencies_without_licence) or 'none'}"]
    lines.append(f"include folders shadowing the C library's headers: {', '.join(report.shadowing_include_dirs) or 'none'}")
    if report.nvcc_sass or report.nvcc_ptx:
        lines.append(f"nvcc SASS: {' '.join(report.nvcc_sass)}; PTX: {' '.join(report.nvcc_ptx) or 'none'}")
    lines.append("SAMPLED, NOT BUILT: these objects of the graph were compiled; the rest were not:")
    for item in report.sample:
        lines.append(f"  {'ok' if item.ok else 'FAILED'} {item.seconds} s {item.object} ({item.why}) {item.error}")
    lines += [f"stand-in: {note}" for note in report.standin_notes]
    lines += [f"not rehearsed: {item}" for item in report.not_rehearsed]
    return "\n".join(lines) + "\n"
