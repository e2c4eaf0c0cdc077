"""rattler-build's own build environment for one output, on this machine and on the GPU machine.

The stand-in channel (channel.py) is built with a machine's files in its packages; rattler-build then
solves, installs and activates the build and host environments from it, as it does on conda-forge's CI.
The rehearsal (build.py) runs the build script in that environment up to its build step; the GPU machine
(scripts/device/package.py) builds the package in it.

- `machine_roots`: where standins.yaml's `machine` globs find a machine's files: its compilers, binutils,
  patch and Python, CMake and ninja from their wheels, protoc from Debian's packages, and a CUDA toolkit
  and cuDNN. The GPU machine has its own toolkit; this one gets /usr/local/cuda's layout made from PyPI's
  wheels and Debian's driver library (`this_machines_roots`).
- `recipe_copy`: recipe/ as rendered, with the unpacked tree as its source, ORT's fetches taken from a
  mirror folder, and a machine's own settings put in.
- `debug_session`: rattler-build's environment for one output, made and not yet run (its DebugSession).
"""

from __future__ import annotations

import difflib
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterable, Sequence
from pathlib import Path

import yaml

from bootstrap import cache_lock
from feedstock.architectures import NVCC_RELEASES
from feedstock.inputs import load_config
from standins import StandinError
from standins.channel import STANDINS, Roots, Standin, load_standins
from standins.downloads import (BUILD_MACHINE_WHEELS, BUILD_PLATFORM, PLATFORMS, debian_packages, debian_unpacked,
                                 pip_download, tool_python, unpacked_wheel)

# the programs the compiler and binutils stand-ins carry, by their root's name: the machine's own
PROGRAMS = {"gcc": "gcc", "gxx": "g++", "cpp": "cpp", "gcc_ar": "gcc-ar", "gcc_nm": "gcc-nm",
            "gcc_ranlib": "gcc-ranlib", "ar": "ar", "as": "as", "ld": "ld", "nm": "nm", "objcopy": "objcopy",
            "objdump": "objdump", "ranlib": "ranlib", "readelf": "readelf", "strip": "strip", "patch": "patch"}
# protoc 3.21 for the build machine (conda-forge's libprotobuf 3.21): Debian 12's 3.21.12
PROTOBUF_DEBS = ["protobuf-compiler", "libprotoc32", "libprotobuf32"]
# no settings of a machine's own: what the rehearsal builds with
NO_OVERRIDES = {"context": [], "env": [], "cmake": []}


def standin_wheels() -> list[str]:
    """The wheels standins.yaml's `machine` files take from {wheels}, at the table's versions."""
    wanted = []
    for entry in load_standins().values():
        version = entry.get("conda", {}).get("version")
        for patterns in entry.get("machine", {}).values():
            for pattern in [patterns] if isinstance(patterns, str) else patterns:
                if version and pattern.startswith("{wheels}/"):
                    wanted.append(f"{pattern.removeprefix('{wheels}/').split('-{version}')[0]}=={version}")
    return wanted


# the wheels machine_roots takes CMake and ninja from (PyPI's 3.31, as the recipe asks for CMake below 4;
# PyPI has no ninja 1.13.1, the stand-in's version: the release after it), and the stand-ins' own
TOOL_WHEELS = [f"cmake=={load_standins()['cmake']['conda']['version']}", "ninja==1.13.2", *standin_wheels()]


def wrapper(path: Path, program: str, environment: dict[str, str] | None = None) -> str:
    """A shell script that runs `program` (which cannot move from where it is installed)."""
    exports = "".join(f'export {k}="{v}"\n' for k, v in (environment or {}).items())
    path.write_text(f'#!/bin/sh\n{exports}exec "{program}" "$@"\n')
    path.chmod(0o755)
    return str(path)


def machine_roots(wheels: Path, debs: list[Path], work: Path, toolkit: Path | None = None,
                  cudnn_root: Path | None = None) -> Roots:
    """Where each stand-in's files are on this machine (standins.yaml's `machine` keys name these): its
    compilers, binutils, patch and Python; CMake and ninja from their wheels in `wheels`, protoc from
    Debian's packages `debs` (PROTOBUF_DEBS); with a CUDA toolkit, the toolkit and cuDNN's folder."""
    tools = work / "tools"
    tools.mkdir(parents=True, exist_ok=True)
    include = sysconfig.get_paths()["include"]
    roots = {"wheels": str(wheels), "site": sysconfig.get_paths()["purelib"], "python_include": include,
             "python_include_inside": include.lstrip("/"),
             "python_exe": os.path.realpath(sys._base_executable)}
    for root, program in PROGRAMS.items():
        found = shutil.which(program)
        if found is None:
            raise StandinError(f"this machine has no `{program}`, which a stand-in of {STANDINS.name} carries")
        # a wrapper, as GCC's driver finds cc1 and its other parts relative to where it is installed
        roots[root] = wrapper(tools / program, os.path.realpath(found))
    roots["system_lib"] = str(Path(subprocess.run(["g++", "-print-file-name=libstdc++.so.6"], check=True,
                                                  capture_output=True, text=True).stdout.strip()).resolve().parent)
    if toolkit is not None:
        roots |= {"toolkit": str(toolkit), "cudnn_root": str(cudnn_root)}
    # the programs are in the wheels' data folders, which pip puts in <package>/data/bin or, as scripts, in bin/
    site = work / "tool-wheels"
    if not site.exists():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target", str(site),
                        *glob.glob(str(wheels / "cmake-*.whl")), *glob.glob(str(wheels / "ninja-*.whl"))], check=True)
    for program, wheel in (("cmake", "cmake"), ("ctest", "cmake"), ("ninja", "ninja")):
        # the program itself, not the Python script of the same name that a wheel's entry point makes
        found = [p for p in (site / wheel / "data" / "bin" / program, site / "bin" / program)
                 if p.is_file() and p.open("rb").read(2) != b"#!"]
        if not found:
            raise StandinError(f"no `{program}` program in {wheels}'s cmake and ninja wheels")
        roots[program] = wrapper(tools / program, str(found[0]))
    # Debian's protoc and its libraries; the wrapper finds them beside itself in the environment
    protobuf = work / "protobuf"
    for deb in debs:
        subprocess.run(["dpkg", "-x", str(deb), str(protobuf)], check=True)
    roots["protobuf"] = str(protobuf / "usr")
    protoc = tools / "protoc"
    protoc.write_text('#!/bin/sh\nhere="$(cd "$(dirname "$0")/.." && pwd)/libexec/protobuf"\n'
                      'LD_LIBRARY_PATH="${here}/lib/x86_64-linux-gnu" exec "${here}/bin/protoc" "$@"\n')
    protoc.chmod(0o755)
    roots["protoc"] = str(protoc)
    cfg = tools / "pyvenv.cfg"
    cfg.write_text(f"home = {Path(roots['python_exe']).parent}\ninclude-system-site-packages = false\n"
                   f"version = {'.'.join(map(str, sys.version_info[:3]))}\n")
    roots["pyvenv_cfg"] = str(cfg)
    return roots


def cuda_roots(cuda: str, cache: Path, platform: str = BUILD_PLATFORM) -> tuple[Path, Path]:
    """A CUDA toolkit in /usr/local/cuda's layout (bin/, nvvm/, targets/<platform's>/{include,lib,lib/stubs})
    made from PyPI's wheels of the CUDA version (the `pypi` lists of standins.yaml) and Debian's driver
    library as the link stub, which no wheel has; and cuDNN's folder in its wheel. Another platform's
    toolkit takes only the headers of the build machine's wheels (BUILD_MACHINE_WHEELS)."""
    table = load_standins()
    wanted = sorted({w.format(nvcc=NVCC_RELEASES[cuda]) for name, entry in table.items() if name != "cudnn"
                     for w in entry.get("pypi", {}).get(cuda, [])})
    if not wanted:
        raise StandinError(f"{STANDINS}: no `pypi` wheels for CUDA {cuda}")
    target = PLATFORMS[platform]
    # named by its wheels, so that a toolkit made before standins.yaml changed them is not taken for today's
    wheels = hashlib.sha256("\n".join(wanted).encode()).hexdigest()[:12]
    toolkit = cache / "toolkits" / f"cuda-{cuda}-{platform}-{wheels}"
    (cudnn,) = pip_download(table["cudnn"]["pypi"]["any"], cache, target)
    cudnn_root = unpacked_wheel(cudnn, cache) / "nvidia" / "cudnn"
    with cache_lock(toolkit):
        if (toolkit / "made").exists():
            return toolkit, cudnn_root
        shutil.rmtree(toolkit, ignore_errors=True)
        targets = toolkit / "targets" / target.cuda_target
        (targets / "lib" / "stubs").mkdir(parents=True)
        for requirement, wheel in zip(wanted, pip_download(wanted, cache, target), strict=True):
            cu13 = unpacked_wheel(wheel, cache) / "nvidia" / "cu13"
            folders = {"bin": toolkit / "bin", "nvvm": toolkit / "nvvm", "include": targets / "include",
                       "lib": targets / "lib"}
            if platform != BUILD_PLATFORM and requirement.split("==")[0] in BUILD_MACHINE_WHEELS:
                folders = {"include": targets / "include"}
            for inside, to in folders.items():
                if (cu13 / inside).is_dir():
                    # linked, not copied: the wheels' files stay unpacked in the cache beside it
                    shutil.copytree(cu13 / inside, to, symlinks=True, dirs_exist_ok=True, copy_function=os.link)
        # the unversioned links of the -dev packages
        for library in (targets / "lib").glob("lib*.so.*"):
            link = library.with_name(library.name.split(".so")[0] + ".so")
            if not link.exists():
                link.symlink_to(library.name)
        # Debian non-free's driver library has NVIDIA's stub's SONAME (libcuda.so.1) and the driver API
        driver = table["cuda-driver-dev"]
        (unpacked,) = debian_unpacked(driver["debian"], driver["suite"], cache, target.debian_arch)
        (library,) = unpacked.glob(f"usr/lib/{target.triplet}/nvidia/current/libcuda.so.*.*")
        shutil.copy2(library, targets / "lib" / "stubs" / "libcuda.so")
        (toolkit / "made").touch()
    return toolkit, cudnn_root


def cross_roots(cache: Path, platform: str) -> Path:
    """The cross compiler to `platform` laid out as its conda packages' files are in BUILD_PREFIX: Debian's
    cross gcc, binutils and C library in <host>/sysroot/usr (the `debian` lists and `layout` of the
    platform's compiler entries of standins.yaml), their programs under conda's names in bin/
    (`programs`), each a script that finds its parts from where it is, as do the binutils that need their
    libraries shown (`library_path`)."""
    entries = [entry for name, entry in load_standins().items() if name.endswith(f"_{platform}") and "debian" in entry]
    root = cache / f"cross-{platform}"
    build = PLATFORMS[BUILD_PLATFORM]
    with cache_lock(root):
        if (root / "made").exists():
            return root
        shutil.rmtree(root, ignore_errors=True)
        for entry in entries:
            for unpacked in debian_unpacked(entry["debian"], "main", cache, build.debian_arch):
                for inside, to in entry["layout"].items():
                    shutil.copytree(unpacked / inside, root / to, symlinks=True, dirs_exist_ok=True)
        for entry in entries:
            for folder, programs in entry.get("library_path", {}).items():
                for program in (root / p.format(triplet=build.triplet) for p in programs):
                    program.rename(program.with_name(program.name + ".real"))
                    libraries = os.path.relpath(root / folder.format(triplet=build.triplet), program.parent)
                    program.write_text(f'#!/bin/sh\nhere="$(dirname "$(readlink -f "$0")")"\n'
                                       f'LD_LIBRARY_PATH="$here/{libraries}" exec "$here/{program.name}.real" "$@"\n')
                    program.chmod(0o755)
            for program, runs in entry.get("programs", {}).items():
                path = root / program
                path.parent.mkdir(parents=True, exist_ok=True)
                top = os.path.relpath(root, path.parent)
                words = "".join(f' "{w.replace("{BUILD_PREFIX}", "$top")}"' for w in runs[1:])
                path.write_text(f'#!/bin/sh\ntop="$(dirname "$(readlink -f "$0")")/{top}"\n'
                                f'exec "$top/{runs[0]}"{words} "$@"\n')
                path.chmod(0o755)
        (root / "made").touch()
    return root


def this_machines_roots(cache: Path, chosen: list[Standin], cuda: str | None,
                        platform: str = BUILD_PLATFORM) -> dict[str, Roots]:
    """machine_roots on this machine, for the build machine's packages and `platform`'s: the tool wheels and
    protoc's packages downloaded into the cache, {site} a cached environment of the PyPI packages of the
    chosen stand-ins that take their files from there, a toolkit made from PyPI's wheels for a CUDA version,
    and for another platform the cross compiler, that platform's toolkit, and its C++ runtime (the cross
    compiler's)."""
    wheels = pip_download(TOOL_WHEELS, cache, PLATFORMS[BUILD_PLATFORM])[0].parent
    debs = debian_packages(PROTOBUF_DEBS, "main", cache, PLATFORMS[BUILD_PLATFORM].debian_arch)
    toolkit, cudnn_root = cuda_roots(cuda, cache) if cuda else (None, None)
    roots = {BUILD_PLATFORM: machine_roots(wheels, debs, cache / "roots", toolkit, cudnn_root)}
    site = sorted({f"{s.name}=={s.version}" for s in chosen for _, patterns, _ in s.machine
                   if any(p.startswith("{site}") for p in patterns)})
    if site:
        python = tool_python(site, cache)
        roots[BUILD_PLATFORM]["site"] = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True).stdout.strip()
    if platform != BUILD_PLATFORM:
        cross = cross_roots(cache, platform)
        target = PLATFORMS[platform]
        roots[BUILD_PLATFORM]["cross"] = str(cross)
        roots[platform] = {"system_lib": str(next(cross.glob(f"*-conda-linux-gnu/sysroot/usr/{target.triplet}/lib")))}
        if cuda:
            target_toolkit, target_cudnn = cuda_roots(cuda, cache, platform)
            roots[platform] |= {"toolkit": str(target_toolkit), "cudnn_root": str(target_cudnn)}
            roots[BUILD_PLATFORM]["target_toolkit"] = str(target_toolkit)
    return roots


def package_names(specs: Iterable[str]) -> list[str]:
    return [re.split(r"[\s=<>!~]", spec.strip(), maxsplit=1)[0] for spec in specs]


def needed(chosen: list[Standin], names: list[str]) -> list[Standin]:
    """The stand-ins these names pull in: them and their dependencies, over and over."""
    by_name: dict[str, list[Standin]] = {}
    for standin in chosen:
        by_name.setdefault(standin.name, []).append(standin)
    wanted, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in wanted or name not in by_name:
            continue
        wanted.add(name)
        for standin in by_name[name]:
            todo += package_names(standin.depends)
    return [s for s in chosen if s.name in wanted]


def recipe_copy(recipe_dir: Path, work: Path, src: Path, mirror: Path, outputs: list[str], configure_only: bool,
                trees: dict[str, str] | None = None, overrides: dict = NO_OVERRIDES,
                cuda: str | None = None, tree_patches: Sequence[Path] = ()) -> tuple[Path, str]:
    """A feedstock's recipe/ (as rendered) copied to WORK/recipe, building `outputs` from the tree `src`, with
    `overrides` (a machine's settings, each with its reason: context values, script variables, CMake cache
    settings) put in, ORT's fetches taken from `mirror` and `trees`'s FETCHCONTENT_SOURCE_DIR settings
    (place_trees) in a toolchain file; the plugin built for `cuda` alone. Returns the copy and its diff from
    recipe/recipe.yaml. configure_only: the build scripts stop at their build step (REHEARSAL_TARGETS_FILE),
    and the tests go. tree_patches: what `src` lacks of the recipe's own source, applied after the recipe's
    patches."""
    target = work / "recipe"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(recipe_dir, target)
    original = (recipe_dir / "recipe.yaml").read_text()
    recipe = yaml.safe_load(original)
    for patch in tree_patches:
        shutil.copyfile(patch, target / patch.name)
    patches = [*recipe["source"].get("patches", []), *(patch.name for patch in tree_patches)]
    recipe["source"] = {"path": str(src), "use_gitignore": False, **({"patches": patches} if patches else {})}
    for name, value, _ in overrides["context"]:
        recipe["context"][name] = value
    toolchain = work / "settings.cmake"
    lines = [f'# {reason}\nset({name} "{value}" CACHE STRING "" FORCE)' for name, value, reason in overrides["cmake"]]
    # offline: ORT's dependency archives from the mirror, cutlass and cudnn_frontend from their trees
    lines.append(f'set(onnxruntime_CMAKE_DEPS_MIRROR_DIR "{mirror}" CACHE PATH "" FORCE)')
    # rattler-build builds in a copy of the source tree: its SRC_DIR
    lines += [f'set(FETCHCONTENT_SOURCE_DIR_{name} "$ENV{{SRC_DIR}}/{folder}" CACHE PATH "" FORCE)'
              for name, folder in (trees or {}).items()]
    toolchain.write_text("\n".join(lines) + "\n")
    plugin = load_config(recipe_dir.parent).outputs.plugin.name
    for output in recipe["outputs"]:
        if output["package"]["name"] not in outputs:
            continue
        env = output["build"]["script"]["env"]
        for name, value, _ in overrides["env"]:
            env[name] = value
        env["CMAKE_TOOLCHAIN_FILE"] = str(toolchain)
        if configure_only:
            # the script stops at its build step: the package is empty, so its tests go
            env["REHEARSAL_TARGETS_FILE"] = str(work / "build_targets.txt")
            output.pop("tests", None)
        if cuda is not None and output["package"]["name"] == plugin:
            output["build"]["skip"] = [f'cuda_compiler_version != "{cuda}"']
    text = yaml.safe_dump(recipe, sort_keys=False, width=120)
    (target / "recipe.yaml").write_text(text)
    diff = "".join(difflib.unified_diff(yaml.safe_dump(yaml.safe_load(original), sort_keys=False, width=120)
                                        .splitlines(keepends=True), text.splitlines(keepends=True),
                                        "recipe/recipe.yaml (as rendered)", "copy"))
    return target, diff


def debug_session(recipe_dir: Path, variants: Path, output: str, target_platform: str, channel: Path,
                  output_dir: Path):
    """rattler-build's build of `output` up to its script: its environments solved from `channel` and
    installed, the source copied and patched, the script written (DebugSession)."""
    from rattler_build import PlatformConfig, RenderConfig, Stage0Recipe, VariantConfig
    from rattler_build.debug import DebugSession

    platform = PlatformConfig(target_platform=target_platform, host_platform=target_platform,
                              build_platform=BUILD_PLATFORM)
    rendered = Stage0Recipe.from_file(recipe_dir / "recipe.yaml").render(VariantConfig.from_file(variants),
                                                                          RenderConfig(platform=platform))
    chosen = [v for v in rendered if v.recipe.to_dict()["package"]["name"] == output]
    if len(chosen) != 1:
        raise StandinError(f"{recipe_dir / 'recipe.yaml'}: {len(chosen)} variants of {output} for {variants}")
    said = Said()
    try:
        return DebugSession.create(chosen[0], output_dir=output_dir, channels=[channel.as_uri()],
                                   progress_callback=said)
    except Exception as error:  # noqa: BLE001 - whatever rattler-build raises is told as a StandinError
        # rattler-build's errors name the step; its last messages say what failed
        raise StandinError(f"rattler-build: {error}: "
                           + " | ".join(" ".join(line.split()) for line in said.lines[-8:])) from None


class Said:
    """rattler-build's own messages (its progress callback): kept, and printed as they come with `echo`."""

    def __init__(self, echo: bool = False) -> None:
        self.lines: list[str] = []
        self.echo = echo

    def on_log(self, event) -> None:
        self._keep(f"{event.level}: {event.message}")

    def on_build_step(self, event) -> None:
        self._keep(f"step: {event.step_name}: {event.message}")

    def _keep(self, line: str) -> None:
        self.lines.append(line)
        if self.echo:
            print(f"rattler-build {line}", flush=True)


def script_environment(build_env_script: Path) -> dict[str, str]:
    """The variables the build script runs with: rattler-build's build_env.sh, the environments'
    activation included, read by the shell."""
    done = subprocess.run(["bash", "-c", f'source "{build_env_script}" >/dev/null 2>&1; env -0'],
                          capture_output=True, check=True,
                          env={"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/")})
    return dict(item.split("=", 1) for item in done.stdout.decode().split("\0") if "=" in item)
