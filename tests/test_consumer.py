"""scripts/device/consumer/: the C++ program a user's environment builds through the onnxruntime-cpp
package's CMake package to run a model on the CUDA plugin. Here, without a GPU or the packages, it is
compiled against ONNX Runtime's real headers, its manifest reading is built and run for real, and
run.sh's refusals are run. Building the program for real and running it happen on the GPU machine."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO
from support import upstream_source

CONSUMER = REPO / "scripts" / "device" / "consumer"
MANIFEST = REPO / "recipe" / "ep-plugins" / "unix" / "onnxruntime-ep-cuda.json"
MANIFEST_IN_PREFIX = Path("share", "onnxruntime", "ep-plugins", "onnxruntime-ep-cuda.json")

# prints what read_manifest found, or its message and exit status 1
MANIFEST_DRIVER = """\
#include "plugin_manifest.h"

#include <exception>
#include <iostream>

int main(int, char** argv) {
  try {
    const PluginManifest plugin = read_manifest(argv[1]);
    std::cout << plugin.registration_name << "\\n" << plugin.library.string() << "\\n";
    return 0;
  } catch (const std::exception& error) {
    std::cerr << error.what() << "\\n";
    return 1;
  }
}
"""


def compile_cpp(compiler: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([compiler, "-std=c++17", *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=300)


@pytest.fixture(scope="module")
def manifest_reader(tmp_path_factory: pytest.TempPathFactory, gxx: str) -> Path:
    folder = tmp_path_factory.mktemp("manifest-reader")
    (folder / "driver.cpp").write_text(MANIFEST_DRIVER)
    program = folder / "read_manifest"
    built = compile_cpp(gxx, "-Wall", "-Wextra", "-Werror", f"-I{CONSUMER}", str(folder / "driver.cpp"),
                        "-o", str(program))
    assert built.returncode == 0, built.stderr
    return program


def install_manifest(prefix: Path, manifest: dict, library: bool = True) -> Path:
    """The manifest where the plugin package installs it, and (with `library`) a file where it points."""
    path = prefix / MANIFEST_IN_PREFIX
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(manifest, indent=2))
    if library:
        (prefix / manifest["library"]).parent.mkdir(parents=True, exist_ok=True)
        (prefix / manifest["library"]).write_bytes(b"")
    return path


def read(reader: Path, manifest: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(reader), str(manifest)], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=60)


def test_run_plugin_compiles_against_onnx_runtimes_headers(tmp_path: Path, gxx: str) -> None:
    """Every API the program calls is in the headers of the recipe's ONNX Runtime, as declared there."""
    source = upstream_source.unpack(tmp_path / "onnxruntime", "include")
    # what the package installs flat in include/onnxruntime/, which its CMake target puts on the path
    headers = source / "include" / "onnxruntime" / "core" / "session"

    result = compile_cpp(gxx, "-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-isystem", str(headers),
                         str(CONSUMER / "run_plugin.cpp"))

    assert result.returncode == 0, result.stderr


def test_the_installed_manifest_names_the_library_three_folders_above_its_own(manifest_reader: Path,
                                                                               tmp_path: Path) -> None:
    manifest = json.loads(MANIFEST.read_text())
    path = install_manifest(tmp_path / "env", manifest)

    result = read(manifest_reader, path)

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [manifest["registration_name"], str(tmp_path / "env" / manifest["library"])]


@pytest.mark.parametrize("key", ["library", "registration_name"])
def test_a_manifest_without_a_key_is_refused_by_file_and_key(manifest_reader: Path, tmp_path: Path, key: str) -> None:
    manifest = json.loads(MANIFEST.read_text())
    path = install_manifest(tmp_path / "env", manifest)
    del manifest[key]
    path.write_text(json.dumps(manifest))

    result = read(manifest_reader, path)

    assert result.returncode == 1
    assert f'{path}: no "{key}" key' in result.stderr


def test_a_manifest_whose_library_is_not_installed_is_refused(manifest_reader: Path, tmp_path: Path) -> None:
    manifest = json.loads(MANIFEST.read_text())
    path = install_manifest(tmp_path / "env", manifest, library=False)

    result = read(manifest_reader, path)

    assert result.returncode == 1
    assert f"{path}: its library {tmp_path / 'env' / manifest['library']} does not exist" in result.stderr


def run_sh(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(CONSUMER / "run.sh"), *map(str, args)], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=300)


@pytest.mark.parametrize("args", [[], ["/env"], ["/env", "model.onnx"], ["/env", "m.json", "model.onnx", "extra"]],
                         ids=len)
def test_run_sh_without_a_prefix_a_manifest_and_a_model_gets_the_usage_and_exit_2(args: list[str]) -> None:
    result = run_sh(*args)

    assert result.returncode == 2
    assert result.stderr.startswith("usage: ")


def test_run_sh_refuses_a_prefix_without_the_plugins_manifest(tmp_path: Path) -> None:
    model = tmp_path / "model.onnx"
    model.write_bytes(b"")

    result = run_sh(tmp_path / "env", tmp_path / "env" / MANIFEST_IN_PREFIX, model)

    assert result.returncode == 1
    assert f"FAILED: {tmp_path / 'env' / MANIFEST_IN_PREFIX} does not exist" in result.stderr


def test_run_sh_refuses_a_missing_model(tmp_path: Path) -> None:
    manifest = install_manifest(tmp_path / "env", json.loads(MANIFEST.read_text()))

    result = run_sh(tmp_path / "env", manifest, tmp_path / "model.onnx")

    assert result.returncode == 1
    assert f"FAILED: {tmp_path / 'model.onnx'} does not exist" in result.stderr


def test_run_sh_fails_when_the_prefix_has_no_onnxruntime_cmake_package(tmp_path: Path) -> None:
    """The build's failure is run.sh's exit status, with CMake's reason."""
    if not (shutil.which("c++") and shutil.which("cmake") and shutil.which("ninja")):
        pytest.skip("needs a C++ compiler, cmake and ninja")
    manifest = install_manifest(tmp_path / "env", json.loads(MANIFEST.read_text()))
    model = tmp_path / "model.onnx"
    model.write_bytes(b"")

    result = run_sh(tmp_path / "env", manifest, model)

    assert result.returncode != 0
    assert "onnxruntimeConfig.cmake" in result.stderr
