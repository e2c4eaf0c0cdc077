"""What every ONNX Runtime build in this recipe shares, written once for every platform.

Imported by the build scripts (build_*.py), which rattler-build runs with Python on unix and Windows
alike; importing it runs nothing. The scripts read their settings from the environment rattler-build
gives them (the recipe's build.script.env among them) and stop with one `ERROR:` line on stderr.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NoReturn


def fail(message: str) -> NoReturn:
    print(f"ERROR: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def target_platform(env: Mapping[str, str]) -> str:
    """rattler-build's target_platform; Windows' os.environ spells every name in capitals."""
    return env.get("target_platform") or env["TARGET_PLATFORM"]


def is_windows(env: Mapping[str, str]) -> bool:
    return target_platform(env).startswith("win-")


def run(command: Sequence[str], env: Mapping[str, str], cwd: str | Path | None = None) -> None:
    """Runs a program found on the environment's PATH, echoed first as `set -x` would, and stops the
    build when it fails."""
    program = shutil.which(command[0], path=env.get("PATH"))
    if program is None:
        fail(f"{command[0]} is not on PATH")
    print(f"+ {shlex.join(command)}", file=sys.stderr, flush=True)
    done = subprocess.run([program, *command[1:]], env=dict(env), cwd=cwd, check=False)
    if done.returncode != 0:
        fail(f"`{shlex.join(command)}` exited {done.returncode}")


def toolchain_cmake_args(env: Mapping[str, str]) -> list[str]:
    """conda-forge's CMAKE_ARGS, split as the shell that used to pass them on did: bash splits at
    whitespace; cmd.exe leaves the words to the program, which keeps a quoted one together."""
    value = env.get("CMAKE_ARGS", "")
    if is_windows(env):
        return [word.replace('"', "") for word in shlex.split(value, posix=False)]
    return value.split()


def linker_flags(env: Mapping[str, str]) -> str:
    """LDFLAGS for every build."""
    flags = env.get("LDFLAGS", "")
    if target_platform(env).startswith("linux-"):
        # A library that asks for an executable stack cannot be dlopened on hardened or newer-glibc
        # systems (conda-forge/ctng-compiler-activation-feedstock#143; conda-forge's onnxruntime sets it too)
        flags += " -Wl,-z,noexecstack"
    return flags.strip()


def ort_common_cmake_args(env: Mapping[str, str]) -> list[str]:
    """The CMake arguments every output's configure takes, with the platform's own at the end."""
    platform = target_platform(env)
    args = [
        # upstream's warning set tracks upstream's CI compilers, not conda-forge's newer ones
        "--compile-no-warning-as-error",
        "-DCMAKE_BUILD_TYPE=Release",
        # one standard for ORT and the dependencies it vendors: abseil picks ABI-relevant types per standard
        "-DCMAKE_CXX_STANDARD=20",
        # the generated flatbuffers headers ship in the source; flatc would only regenerate them
        "-DFLATBUFFERS_BUILD_FLATC=OFF",
        # no usage reports to Microsoft; ON also fetches the 1DS SDK and a static curl on unix
        "-Donnxruntime_USE_TELEMETRY=OFF",
        # ORT turns RTTI off unless Python or CUDA is built; every output keeps it, as conda-forge's builds always had
        "-Donnxruntime_DISABLE_RTTI=OFF",
    ]
    if is_windows(env):
        args += [
            # ORT asks find_package(Protobuf) before fetching the 3.21 its cmake/deps.txt pins
            # (FIND_PACKAGE_ARGS in cmake/external/onnxruntime_external_deps.cmake), and find_package also
            # searches the parent of every PATH entry ending in bin, here the build and host environments'
            # Library: a conda-forge libprotobuf there, of whatever version, would be linked instead
            # (conda-forge/onnxruntime-feedstock#57)
            "-DCMAKE_DISABLE_FIND_PACKAGE_Protobuf=ON",
            # conda-forge links the DLL runtime (/MD), as ORT does by default (CMP0091); protobuf 21.12 alone
            # defaults a static build to the static one (protobuf_MSVC_STATIC_RUNTIME in its CMakeLists.txt).
            # onnx and abseil, at the versions ORT's cmake/deps.txt fetches, already default theirs to OFF
            # (tests/test_build_scripts.py reads the defaults from the archives).
            "-Dprotobuf_MSVC_STATIC_RUNTIME=OFF",
        ]
    else:
        # the build machine's protoc (conda-forge's libprotobuf 3.21, the version ORT vendors): ORT then
        # skips building protoc, and a cross build gets one it can run
        args.append(f"-DONNX_CUSTOM_PROTOC_EXECUTABLE={env['BUILD_PREFIX']}/bin/protoc")
    if platform.startswith("linux-"):
        # conda-forge's compiler activation confines find_library and find_path to the environments
        # (CMAKE_FIND_ROOT_PATH, with their modes ONLY) but leaves find_package free to search the machine's
        # own prefixes: /usr, and the parent of every PATH entry ending in bin. ORT asks find_package before
        # each fetch (FIND_PACKAGE_ARGS), and the recipe lists the licence files of its fetches: a machine with
        # its own nlohmann_json (Ubuntu's nlohmann-json3-dev) had it linked in the fetch's place, and the
        # package failed for the missing licence file
        args.append("-DCMAKE_FIND_ROOT_PATH_MODE_PACKAGE=ONLY")
    if env.get("ORT_DONT_VECTORIZE") == "ON":
        # the -novec packages: Eigen without SIMD (EIGEN_DONT_VECTORIZE, cmake/adjust_global_compile_flags.cmake);
        # MLAS keeps its own kernels
        args.append("-Donnxruntime_DONT_VECTORIZE=ON")
    if platform in ("linux-aarch64", "osx-arm64"):
        # Arm's KleidiAI kernels in MLAS: upstream's build.py passes this for every build unless
        # --no_kleidiai (tools/ci_build/build.py), and ORT's CMake turns it off on other CPUs
        args.append("-Donnxruntime_USE_KLEIDIAI=ON")
    if platform == "osx-arm64":
        # the CoreML EP, built into the core as in upstream's macOS wheels; its macOS 13+ code paths are
        # checked at run time, so the SDK may be newer than the deployment target (config/feedstock.yaml)
        args.append("-Donnxruntime_USE_COREML=ON")
    if env.get("CONDA_BUILD_CROSS_COMPILATION") == "1" and platform.startswith("linux-"):
        # glibc has iconv built in, but FindIconv cannot try-compile that check when cross-compiling and
        # picks the build machine's libiconv instead
        args.append("-DIconv_IS_BUILT_IN=TRUE")
    return args


def configure(env: Mapping[str, str], output_args: Sequence[str]) -> None:
    """ORT's CMake configure in the recipe's build folder, ORT_BUILD_DIR, from which the recipe lists the
    licence files of what ORT fetches there."""
    run(["cmake", "-S", "cmake", "-B", env["ORT_BUILD_DIR"], "-G", "Ninja", *toolchain_cmake_args(env),
         *ort_common_cmake_args(env), *output_args], env)


def stop_here_if_rehearsed(env: Mapping[str, str], targets: Sequence[str]) -> None:
    """scripts/rehearse.py runs a build script up to its build step and records the build graph of that
    step's targets instead of building them: given REHEARSAL_TARGETS_FILE, a script that reaches its build
    step writes the targets there and stops."""
    if env.get("REHEARSAL_TARGETS_FILE"):
        Path(env["REHEARSAL_TARGETS_FILE"]).write_text("".join(f"{target}\n" for target in targets))
        sys.exit(0)
