"""One output's build script run against ONNX Runtime's real source by rattler-build, in its own build
environment of stand-ins (environment.py).

The script runs verbatim up to its build step: environment, CMake configure and all. There it stops,
as every build script does when REHEARSAL_TARGETS_FILE names a file, and leaves in that file the targets
the step would build (recipe/cmake_common.py). The build step would take hours here, so instead the
rehearsal records the full build graph of those targets (`ninja -t commands`, `ninja -t compdb`) and
compiles a sample of their objects that covers each kind of translation unit, with the variables the
script ran with. The report says what was sampled; a sample is not a build. The build folder is the one
the recipe names (ORT_BUILD_DIR in its script environment), from which it lists the licence files.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bootstrap import cache_lock
from feedstock.inputs import OutputKey
from ninja_graph import run_generators, target_compiles
from standins import StandinError
from standins.channel import STANDINS, Standin, build_channel, load_standins, standins
from standins.downloads import BUILD_PLATFORM, tool_python
from standins.environment import (debug_session, needed, package_names, recipe_copy, script_environment,
                                   this_machines_roots)
from standins.resolve import variant_file
from standins.sources import Sources, place_trees

# The cmake/deps.txt entries each output's configure takes on every platform (upstream's CMake at 1.30.0): what a
# rehearsal without a mirror downloads, and checks, first. tests/test_rehearsal.py checks that they are
# exactly the archives the configure took.
_EVERY_BUILD = ("abseil_cpp", "date", "eigen", "flatbuffers", "json", "microsoft_gsl", "mp11", "onnx", "protobuf",
                "pytorch_cpuinfo", "re2", "safeint")
DEPENDENCIES: dict[OutputKey, tuple[str, ...]] = {"plugin": (*_EVERY_BUILD, "cudnn_frontend", "cutlass"),
                                                  "cpp": (*_EVERY_BUILD, "googletest"),
                                                  "python": (*_EVERY_BUILD, "dlpack")}
# what each platform's configure takes besides: every arm64 build turns KleidiAI on (recipe/cmake_common.py)
PLATFORM_DEPENDENCIES = {"linux-aarch64": ("kleidiai",)}


def dependencies(key: OutputKey, platform: str = BUILD_PLATFORM) -> tuple[str, ...]:
    """The deps.txt entries the output's configure takes on the platform. A cross build fetches no
    test-only ones: its unit tests would have to run on the build machine (build_cpp.py turns them off)."""
    taken = (*DEPENDENCIES[key], *PLATFORM_DEPENDENCIES.get(platform, ()))
    return taken if platform == BUILD_PLATFORM else tuple(d for d in taken if d not in TEST_ONLY_DEPENDENCIES)
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
# nvcc's device link (nvlink: -dlink, relocatable device code) and link-time optimisation (-dlto, -flto)
DEVICE_LINK = re.compile(r"(\s-dlink\b|--device-link|-rdc=true|--relocatable-device-code=true|nvlink)")
LTO = re.compile(r"\s(-dlto|-flto\S*|--lto\S*|-gen-opt-lto)\b")


@dataclass
class Sampled:
    object: str
    source: str
    why: str
    seconds: float = 0.0
    ok: bool = False
    error: str = ""
    architecture: str = ""  # an nvcc unit's one GPU architecture (empty: the list's first)
    machine: str = ""  # the ELF machine of what it made, as the recipe's audit reads it


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
    target_platform: str = BUILD_PLATFORM
    # what the recipe's audit (check_plugin_binary.py --objects) said of the sample's objects and link
    audit: list[str] = field(default_factory=list)
    audit_ok: bool = False
    # the graph's device-link (nvlink) and link-time-optimisation steps, which the anchor's aarch64 builds hit
    device_link_steps: int = 0
    lto_steps: int = 0


def _includes(source: Path, pattern: str) -> bool:
    text = source.read_text(errors="replace")
    return re.search(rf'#\s*include\s*[<"]{pattern}', text) is not None


INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.MULTILINE)


def own_code_size(source: Path, src: Path, read: dict[Path, tuple[int, list[Path]]]) -> int:
    """The bytes of `source` and of every header of ORT's tree it includes, directly or through another:
    how much of ORT's own code a compile of it reads, which its compile time follows far more closely than
    its own size (a 151-byte .cu that includes a template-heavy header took 42.5 s, one of 7 kB with 4 kB of
    headers 7.5 s). `read` keeps each file's size and headers between calls."""
    seen: set[Path] = set()
    todo = [source]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        if path not in read:
            headers = []
            for name in INCLUDE.findall(path.read_text(errors="replace")):
                found = next((f / name for f in (path.parent, src, src / "onnxruntime", src / "include" / "onnxruntime")
                              if (f / name).is_file()), None)
                if found is not None:
                    headers.append(Path(os.path.normpath(found)))
            read[path] = (path.stat().st_size, headers)
        todo += read[path][1]
    return sum(read[path][0] for path in seen)


def choose_sample(key: OutputKey, src: Path, compiles: list[dict[str, str]], architectures: list[str] = (),
                  newest: str = "") -> list[Sampled]:
    """The fewest of ORT's own objects that between them include every dependency (CPU outputs), or a
    CUDA-header host file, a cuDNN-frontend host file, one plain `.cu` at the list's first architecture and at each of
    `architectures`, and one CUTLASS `.cu` at the list's `newest` architecture (the plugin)."""
    # ORT's own library sources (not its tests), the least of ORT's code read first: the cheapest compile that shows it
    read: dict[Path, tuple[int, list[Path]]] = {}
    own = sorted((e for e in compiles if Path(e["file"]).resolve().is_relative_to(src / "onnxruntime")
                  and "/test/" not in e["file"]), key=lambda e: own_code_size(Path(e["file"]).resolve(), src, read))
    if key == "plugin":
        chosen = []
        kinds = [
            ("a host .cc that includes the CUDA headers (cuda_pch.h: cuda, cuBLAS, cuRAND, cuFFT)",
             lambda f: f.suffix == ".cc" and "providers/cuda" in str(f)
                       and _includes(f, r"core/providers/cuda/cuda_common\.h")),
            ("a host .cc that includes cuDNN's frontend (cudnn_common.h: cuDNN, and NVRTC through the frontend)",
             lambda f: f.suffix == ".cc" and "providers/cuda" in str(f)
                       and _includes(f, r"(core/providers/cuda/cudnn_common\.h|cudnn_frontend\.h)")),
            ("a .cu at one architecture", lambda f: f.suffix == ".cu" and not _includes(f, r"cutlass/")),
            ("a CUTLASS-based .cu at one architecture", lambda f: f.suffix == ".cu" and _includes(f, r"cutlass/")),
        ]
        for why, matches in kinds:
            entry = next((e for e in own if matches(Path(e["file"]))), None)
            if entry is None:
                raise StandinError(f"the plugin's graph has no object of the kind `{why}`")
            chosen.append(Sampled(entry["output"], entry["file"], why))
        # the last two kinds: the host files above them may grow without moving these
        plain, cutlass = chosen[-2:]
        if newest:
            cutlass.why, cutlass.architecture = f"a CUTLASS-based .cu at {newest}, the list's newest", newest
        chosen += [Sampled(plain.object, plain.source, f"the .cu at {a}, which only this platform's list has",
                           architecture=a)
                   for a in architectures]
        return chosen
    # the core objects are the C++ library's too: what only the Python build adds is its bindings
    python_only = {"dlpack", "pybind11"}
    wanted = python_only if key == "python" else set(DEPENDENCY_INCLUDES) - python_only
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
        raise StandinError(f"no object of ORT's own that the build compiles includes {', '.join(sorted(left))}")
    return chosen


def _one_architecture(command: str, architecture: str = "") -> list[str]:
    """The nvcc command with only one --generate-code kept: the SASS one of `architecture` (ORT may have
    made it arch-specific, 110 -> sm_110a), or the first."""
    words, kept = shlex.split(command), False
    wanted = re.compile(rf"code=\[?sm_{architecture}a?\]?$") if architecture else None
    result = []
    for word in words:
        if word.startswith("--generate-code="):
            if kept or (wanted is not None and not wanted.search(word)):
                continue
            kept = True
        result.append(word)
    if not kept:
        raise StandinError(f"the nvcc command compiles no SASS for {architecture}: {command[:200]}")
    return result


def compile_sample(build: Path, sample: list[Sampled], compiles: list[dict[str, str]], log: Path,
                   env: dict[str, str]) -> None:
    """The code generators the sample needs (generating_commands: not the libraries ninja would build
    before them, which none of the sample's objects needs to compile), then each object by its own compile
    command, a .cu at one architecture, as many at once as there are CPUs. In the build script's
    environment: nvcc takes its host compiler from the activation's NVCC_PREPEND_FLAGS."""
    by_output = {e["output"]: e for e in compiles}
    with log.open("a") as out:
        if run_generators(build, [item.object for item in sample], env, out):
            for item in sample:
                item.error = f"a code generator it needs failed (see {log.name})"
            return

    def compile_one(item: Sampled) -> str:
        start, entry = time.monotonic(), by_output[item.object]
        try:
            command = (_one_architecture(entry["command"], item.architecture) if item.source.endswith(".cu")
                       else shlex.split(entry["command"]))
        except StandinError as error:
            item.error = str(error)
            return ""
        done = subprocess.run(command, cwd=entry["directory"], capture_output=True, text=True, env=env)
        item.ok, item.seconds = done.returncode == 0, round(time.monotonic() - start, 1)
        errors = [line for line in (done.stdout + done.stderr).splitlines() if "error" in line]
        item.error = "" if item.ok else (errors[0] if errors else f"exit {done.returncode}")
        return f"\n$ {shlex.join(command)}\n{done.stdout}{done.stderr}"

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        said = list(pool.map(compile_one, sample))
    with log.open("a") as out:
        out.write("".join(said))


# the most objects and static libraries a link of the sample may need: the graph's smallest shared library
# or program, if it is small
SMALL_LINK_OBJECTS = 8


def small_link(commands: list[str]) -> str:
    """The output of the graph's link (shared library or program) that takes the fewest objects and static
    libraries, if at most SMALL_LINK_OBJECTS; empty when there is none."""
    links = []
    for command in commands:
        words = command.split()
        if "-o" not in words or " -c " in command or not any(w.endswith(".o") for w in words):
            continue
        if any(w in ("ar", "qc") or w.endswith("/ar") or w.endswith("-ar") for w in words):
            continue
        # objects and the static libraries it links: each library needs its own objects built
        inputs = [w for w in words if w.endswith((".o", ".a"))]
        links.append((len(inputs), words[words.index("-o") + 1]))
    small = sorted(link for link in links if link[0] <= SMALL_LINK_OBJECTS)
    return small[0][1] if small else ""


def link_sample(build: Path, output: str, log: Path, env: dict[str, str]) -> Sampled:
    """`output` linked by ninja, with the objects it needs compiled first."""
    item = Sampled(output, "", "the graph's smallest link: its objects compiled and linked")
    start = time.monotonic()
    with log.open("a") as out:
        done = subprocess.run(["ninja", "-C", str(build), output], capture_output=True, text=True, env=env)
        out.write(done.stdout + done.stderr)
    item.seconds = round(time.monotonic() - start, 1)
    item.ok = done.returncode == 0 and (build / output).exists()
    if not item.ok:
        errors = [line for line in (done.stdout + done.stderr).splitlines() if "error" in line]
        item.error = errors[0] if errors else f"ninja exit {done.returncode}"
    return item


def audit_sample(build: Path, sample: list[Sampled], target_platform: str, recipe_dir: Path,
                 auditor: Path) -> tuple[list[str], bool]:
    """The recipe's own audit (check_plugin_binary.py, with the pyelftools and pefile its test installs)
    of what the sample made: each object and the linked file is for the target platform's machine."""
    made = [build / item.object for item in sample if item.ok]
    if not made:
        return ["nothing was made to audit"], False
    done = subprocess.run([str(auditor), str(recipe_dir / "check_plugin_binary.py"), "--objects",
                           "--target-platform", target_platform, *map(str, made)],
                          capture_output=True, text=True)
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    machines = dict(re.findall(r"^(?:ok|FAIL \[target-machine\]) (\S+): (EM_\w+|IMAGE_FILE_MACHINE_\w+|\S+)",
                               "\n".join(lines), re.MULTILINE))
    for item in sample:
        item.machine = machines.get(str(build / item.object), item.machine)
    return lines, done.returncode == 0


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
    variables = (dict(re.findall(r"^  (LINK_PATH|LINK_LIBRARIES) = (.*)$", statement.group(0), re.MULTILINE))
                 if statement else {})
    return " ".join([links[-1], variables.get("LINK_PATH", ""), variables.get("LINK_LIBRARIES", "")])


def _channel(cache: Path, job: Path, overrides: dict[str, str], asked: dict[str, list[str]], cuda: str | None,
             platform: str) -> tuple[Path, list[Standin]]:
    """The stand-ins the build and host environments take, with this machine's files: the build machine's
    for the build environment, the platform's for the host environment, with what the build environment's
    packages export to it (their strong run_exports). The channel is kept in the cache for the code and
    table that made it: each package is built once."""
    build = needed(standins([job], {}, overrides), asked["build"])
    exported = package_names(s for standin in build for kind, specs in standin.run_exports if kind == "strong"
                             for s in specs)
    # rattler-build (py-rattler-build 0.73) solves a cross build's host environment in the build platform's
    # subdir (its log: `Platform: linux-64` above the host's specs), so the target's packages go there too,
    # each with the target platform in its build string
    host = needed(standins([job], {}, overrides, platform, subdir=BUILD_PLATFORM), asked["host"] + exported)
    digest = hashlib.sha256(sys.version.encode())
    for code in sorted(STANDINS.parent.glob("*.py")) + [Path(__file__), STANDINS]:
        digest.update(code.read_bytes())
    channel = cache / "channels" / f"{platform}-{digest.hexdigest()[:16]}"
    # a channel that other code or another table made is not used again
    for stale in channel.parent.glob(f"{platform}-*"):
        if not stale.name.startswith(channel.name):
            shutil.rmtree(stale, ignore_errors=True) if stale.is_dir() else stale.unlink()
    with cache_lock(channel):
        roots = this_machines_roots(cache, [*build, *host], cuda, platform)
        build_channel(build, channel, roots[BUILD_PLATFORM])
        build_channel(host, channel, roots[platform])
    return channel, [*build, *host]


def _installed(prefix: Path) -> list[str]:
    """The names of the packages installed in an environment."""
    return sorted(json.loads(record.read_text())["name"] for record in prefix.glob("conda-meta/*.json"))


def rehearse(output: str, key: OutputKey, rendered: dict[str, Any], variant: dict[str, str], recipe_dir: Path,
             job: Path, python: str, sources: Sources, workdir: Path, cache: Path, without_file: set[str],
             sample: bool = True, not_rehearsed: list[str] = (), architectures: list[str] = (),
             newest: str = "") -> Report:
    """The build script of the package `output` (the config's output `key`) run by rattler-build in the environment
    it makes from the stand-in channel for the job's variant (with this machine's Python), up to its build step;
    then its graph, sample and audit. `architectures`: the plugin's GPU architectures its sample compiles a unit at
    besides the list's first; `newest`: the list's newest, which its CUTLASS unit is compiled at."""
    target_platform = variant.get("target_platform", BUILD_PLATFORM)
    report = Report(output, variant, str(workdir), sources.origin, not_rehearsed=list(not_rehearsed),
                    target_platform=target_platform)
    workdir.mkdir(parents=True, exist_ok=True)
    cuda = variant.get("cuda_compiler_version")
    cuda = None if cuda in (None, "None") else cuda
    overrides = {"python": f"{python}.* *_cpython"}
    asked = {section: package_names(map(str, rendered["requirements"].get(section) or []))
             for section in ("build", "host")}
    table = load_standins()
    for section, names in asked.items():
        if missing := [name for name in names if name not in table]:
            raise StandinError(f"{STANDINS}: no stand-in for `{missing[0]}` (asked for in {section})")
    channel, chosen = _channel(cache, job, overrides, asked, cuda, target_platform)
    report.standin_notes = sorted({f"{s.name}: {s.note}" for s in chosen if s.note})
    # the tree rattler-build copies, with cutlass and cudnn_frontend where FetchContent would put them
    tree = workdir / "tree"
    shutil.rmtree(tree, ignore_errors=True)
    sources.unpack(tree)
    build_dir = str(rendered["build"]["script"]["env"]["ORT_BUILD_DIR"])
    trees = place_trees(sources.trees, tree, build_dir) if key == "plugin" and sources.trees else {}
    copy, _ = recipe_copy(recipe_dir, workdir, tree, sources.deps_mirror, [output], configure_only=True, trees=trees)
    shutil.rmtree(workdir / "rattler", ignore_errors=True)
    # rattler's package cache, the rehearsal's own: a package of the metadata-only channel has the same file
    # name, and the environments, linked to its files, keep them when it goes
    packages = workdir / "packages"
    os.environ["RATTLER_CACHE_DIR"] = str(packages)
    session = debug_session(copy, variant_file(job, workdir, overrides), output, target_platform, channel,
                            workdir / "rattler")
    shutil.rmtree(packages)
    shutil.rmtree(tree)
    paths = session.paths
    report.standins = {"build": _installed(paths.build_prefix), "host": _installed(paths.host_prefix)}
    src = workdir / "src"
    src.unlink(missing_ok=True)
    src.symlink_to(paths.work_dir)
    # rattler-build applied the source's patches
    patched = {str(paths.work_dir / changed): patch
               for source in rendered.get("source") or [] for patch in source.get("patches") or []
               for changed in re.findall(r"^\+\+\+ b/(\S+)", (recipe_dir / patch).read_text(), re.MULTILINE)}
    report.patched_sources = sorted(patched)
    targets = workdir / "build_targets.txt"
    targets.unlink(missing_ok=True)
    start = time.monotonic()
    done = session.run_script()
    report.configure_seconds = round(time.monotonic() - start, 1)
    text = done.stdout + done.stderr
    (workdir / "configure.log").write_text(text)
    env = script_environment(paths.build_env_script)
    report.configure_ok = done.exit_code == 0 and targets.is_file()
    license_files = [f for f in rendered["about"].get("license_file", [])]
    if not report.configure_ok:
        errors = [line.strip() for line in text.splitlines()
                  if re.search(r"CMake Error|fatal|error:|^ERROR", line)]
        # CMake's "CMake Error at <file>" is followed by the message itself
        errors.sort(key=lambda line: line.startswith("CMake Error"))
        stopped = f"exit {done.exit_code}" if done.exit_code else "the script never reached its build step"
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
        report.device_link_steps = sum(1 for c in commands if DEVICE_LINK.search(c))
        report.lto_steps = sum(1 for c in commands if LTO.search(c))
        if sample:
            report.sample = choose_sample(key, src.resolve(), compiles, list(architectures), newest)
            report.sample += [Sampled(e["output"], e["file"], f"changed by {patched[e['file']]}")
                              for e in compiles if e["file"] in patched]
            compile_sample(build, report.sample, compiles, workdir / "sample.log", env)
            linked = small_link(commands)
            if linked:
                report.sample.append(link_sample(build, linked, workdir / "sample.log", env))
            auditor = tool_python(["pyelftools", "pefile"], cache)
            report.audit, report.audit_ok = audit_sample(build, report.sample, target_platform, recipe_dir, auditor)
    (workdir / "report.json").write_text(json.dumps(asdict(report), indent=1) + "\n")
    (workdir / "report.txt").write_text(summary(report))
    return report


def summary(report: Report) -> str:
    lines = [f"rehearsal of {report.output} ({', '.join(f'{k}={v}' for k, v in sorted(report.variant.items()))})",
             f"sources: {report.sources}",
             f"configure: {'ok' if report.configure_ok else 'FAILED: ' + report.configure_error} "
             f"in {report.configure_seconds} s",
             f"CMake variables reported unused: {', '.join(report.unused_cmake_variables) or 'none'}",
             f"build graph of {', '.join(report.build_targets)}: {report.graph_steps} steps, "
             f"{report.graph_compiles} compiles (graph.txt)",
             f"licence files listed but missing: {', '.join(report.licence_files_missing) or 'none'}",
             "fetched dependencies without a listed licence: "
             f"{', '.join(report.dependencies_without_licence) or 'none'}"]
    lines.append("include folders shadowing the C library's headers: "
                 f"{', '.join(report.shadowing_include_dirs) or 'none'}")
    if report.nvcc_sass or report.nvcc_ptx:
        lines.append(f"nvcc SASS: {' '.join(report.nvcc_sass)}; PTX: {' '.join(report.nvcc_ptx) or 'none'}")
    if report.nvcc_sass:
        lines.append(f"nvcc device-link (nvlink) steps: {report.device_link_steps}; LTO steps: {report.lto_steps}")
    lines.append(f"SAMPLED, NOT BUILT ({report.target_platform}): these objects of the graph were compiled; "
                 "the rest were not:")
    for item in report.sample:
        at = f" at {item.architecture}" if item.architecture else ""
        lines.append(f"  {'ok' if item.ok else 'FAILED'} {item.seconds} s {item.object}{at} ({item.why}) "
                     f"{item.machine} {item.error}".rstrip())
    lines.append("audit of the sample (recipe/check_plugin_binary.py --objects "
                 f"--target-platform {report.target_platform}): {'ok' if report.audit_ok else 'FAILED'}")
    lines += [f"  {line}" for line in report.audit if not line.startswith("ok ")]
    lines += [f"stand-in: {note}" for note in report.standin_notes]
    lines += [f"not rehearsed: {item}" for item in report.not_rehearsed]
    return "\n".join(lines) + "\n"
