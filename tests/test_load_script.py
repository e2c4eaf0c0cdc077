"""Plugin libraries loaded into real ONNX Runtime cores from PyPI: recipe/test_plugin_load.py with the plugin EP
wheels, and how the cores load a library linked as build_ep_cuda.py links the plugin."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FLOOR_CORE_VERSION
from cores import NEWEST_CORE
from support.pyenvs import core_env, run
from support.wheels import GGML, WEBGPU, linux_library

LOAD = Path(__file__).resolve().parents[1] / "recipe" / "test_plugin_load.py"
# The webgpu plugin refuses cores older than its floor, 1.24.4, at registration.
BELOW_FLOOR_CORE = "1.24.1"
# registers a plugin by loading it, unloading it and loading it again (docs/gpu-runs/2026-12-01-fourth-run.md)
RELOADING_CORE = "1.30.0"
CORE_FAILURE = "onnxruntime.capi.onnxruntime_pybind11_state.Fail: [ONNXRuntimeError] : 1 : FAIL : "

pytestmark = [
    pytest.mark.network,
    pytest.mark.skipif(sys.platform != "linux", reason="loads the linux libraries of the plugin wheels"),
]


@pytest.fixture(scope="session")
def floor_core() -> Path:
    return core_env(FLOOR_CORE_VERSION)


@pytest.fixture(scope="session")
def newest_core() -> Path:
    return core_env(NEWEST_CORE)


@pytest.fixture(scope="session")
def reloading_core() -> Path:
    return core_env(RELOADING_CORE)


@pytest.fixture(scope="session")
def below_floor_core() -> Path:
    return core_env(BELOW_FLOOR_CORE)


def load(core: Path, library: Path, ep_name: str, *options: str) -> subprocess.CompletedProcess[str]:
    return run(core, str(LOAD), "--library", str(library), "--ep-name", ep_name, *options)


def mapped_libm() -> Path:
    """The libm.so.6 this machine's loader resolves, as an absolute path."""
    ctypes.CDLL("libm.so.6")
    for line in Path("/proc/self/maps").read_text().splitlines():
        path = Path(line.split()[-1])
        if path.name == "libm.so.6":
            return path
    pytest.skip("libm.so.6 is not mapped into this process")


@pytest.mark.parametrize(("core", "version"), [("floor_core", FLOOR_CORE_VERSION),
                                               ("newest_core", NEWEST_CORE)])
def test_load_registers_webgpu_into_the_core_without_a_device(request, core, version):
    result = load(request.getfixturevalue(core), linux_library(WEBGPU), WEBGPU.ep_name)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"onnxruntime {version}" in result.stdout
    assert f"no device for EP {WEBGPU.ep_name}" in result.stdout
    assert f"unregister {WEBGPU.ep_name}" in result.stdout


def test_load_runs_a_model_on_ggml_alone_with_the_newest_core(newest_core):
    result = load(newest_core, linux_library(GGML), GGML.ep_name, "--require-device")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "nodes on ggml: Gemm, Relu, Mul" in result.stdout
    assert "16 values match the CPU EP" in result.stdout


def test_load_fails_when_a_device_is_required_and_none_exists(newest_core):
    result = load(newest_core, linux_library(WEBGPU), WEBGPU.ep_name, "--require-device")
    assert result.returncode == 1
    assert f"no device for EP {WEBGPU.ep_name} and --require-device given" in result.stderr


def test_load_fails_with_the_core_message_for_a_missing_library(newest_core, tmp_path):
    missing = tmp_path / "libonnxruntime_providers_cuda.so"
    result = load(newest_core, missing, "CUDAExecutionProvider")
    assert result.returncode == 1
    assert (f"{CORE_FAILURE}Failed to load library {missing} with error: {missing}: "
            "cannot open shared object file: No such file or directory") in result.stderr


def test_load_fails_with_the_core_message_for_a_library_that_is_no_plugin(newest_core):
    result = load(newest_core, mapped_libm(), "CUDAExecutionProvider")
    assert result.returncode == 1
    # The loader names libm by the path it was first loaded under, which may differ from ours.
    assert f"{CORE_FAILURE}Failed to get symbol CreateEpFactories with error: " in result.stderr
    assert "libm.so.6: undefined symbol: CreateEpFactories" in result.stderr


def test_load_fails_with_the_plugins_refusal_of_a_core_below_its_floor(below_floor_core):
    result = load(below_floor_core, linux_library(WEBGPU), WEBGPU.ep_name)
    assert result.returncode == 1
    refusal = 'ORT runtime version "1.24.1" is below the minimum required version "1.24.4".'
    assert f"{CORE_FAILURE}{refusal}" in result.stderr


def test_load_gives_up_with_every_threads_stack_past_its_time_limit(newest_core, tmp_path):
    # the core's dlopen of a pipe nobody writes to blocks for good: a hang inside the core
    library = tmp_path / "libonnxruntime_providers_cuda.so"
    os.mkfifo(library)
    result = load(newest_core, library, "CUDAExecutionProvider", "--time-limit", "2")
    assert result.returncode == 1
    assert "Timeout (0:00:02)!" in result.stderr
    assert f'File "{LOAD}", line' in result.stderr and "in check_plugin" in result.stderr
    assert "register " not in result.stdout


# --- the plugin stays loaded once a core has loaded it

# A plugin that offers no factory, and writes "init" and "fini" to the file LOAD_EVENTS names when it is
# loaded and unloaded.
EVENT_PLUGIN = r"""
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
static void event(const char *what) {
    FILE *log = fopen(getenv("LOAD_EVENTS"), "a");
    fprintf(log, "%s\n", what);
    fclose(log);
}
__attribute__((constructor)) static void loaded(void) { event("init"); }
__attribute__((destructor)) static void unloaded(void) { event("fini"); }
__attribute__((visibility("default"))) void *CreateEpFactories(const char *name, const void *api, const void *logger,
        void **factories, size_t max_factories, size_t *count) { *count = 0; return NULL; }
__attribute__((visibility("default"))) void *ReleaseEpFactory(void *factory) { return NULL; }
"""
REGISTER = """
import sys, onnxruntime
onnxruntime.register_execution_provider_library("events", sys.argv[1])
with open(sys.argv[2], "a") as log:
    log.write("registered\\n")
"""


def load_events(core: Path, gcc: str, tmp_path: Path, *link_flags: str) -> list[str]:
    """What the library saw, in order, while the core registered it."""
    source, library, events = tmp_path / "plugin.c", tmp_path / "libevents.so", tmp_path / "events"
    source.write_text(EVENT_PLUGIN)
    subprocess.run([gcc, "-shared", "-fPIC", "-fvisibility=hidden", str(source), "-o", str(library), *link_flags],
                   check=True)
    result = run(core, "-c", REGISTER, str(library), str(events), env={"LOAD_EVENTS": str(events)})
    assert result.returncode == 0, result.stdout + result.stderr
    return events.read_text().split()


def test_the_reloading_core_unloads_a_plugin_while_it_registers_it(reloading_core, gcc, tmp_path):
    assert load_events(reloading_core, gcc, tmp_path)[:4] == ["init", "fini", "init", "registered"]


@pytest.mark.parametrize("core", ["floor_core", "reloading_core", "newest_core"])
def test_linked_as_the_recipe_links_the_plugin_each_core_loads_it_once(request, core, gcc, tmp_path):
    # the flag build_ep_cuda.py adds to LDFLAGS
    events = load_events(request.getfixturevalue(core), gcc, tmp_path, "-Wl,-z,nodelete")
    assert events[:2] == ["init", "registered"]
