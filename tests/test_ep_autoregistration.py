"""EP plugin auto-registration at `import onnxruntime`, with real cores and real plugins from PyPI.

There is one staged prefix per core per session: a copy of a cached venv, with the recipe's
auto-registration installed the way the build script installs it. Each test writes its own
manifests and scratch files into the prefix, and the `prefix` fixture removes them afterwards.
`onnxruntime-ep-webgpu` stands in for the CUDA plugin. It registers into every core here and finds
0 devices on a CPU, so "registered" means that a second registration of the name is refused.
"""

from __future__ import annotations

import ctypes.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import FLOOR_CORE_VERSION, REPO
from cores import NEWEST_CORE
from recipe_code import RECIPE
from support.ep_prefix import MANIFEST_DIR, ProbeReport, plugin_manifest, probe, stage_prefix, write_manifest
from support.pyenvs import python_env, run, site_packages

pytestmark = [
    pytest.mark.network,
    pytest.mark.skipif(sys.platform != "linux", reason="staged prefixes and libm are Linux-only here"),
]

CORES = {
    "floor": [f"onnxruntime=={FLOOR_CORE_VERSION}", "onnxruntime-ep-webgpu==0.4.0"],
    "newest": [f"onnxruntime=={NEWEST_CORE}", "onnxruntime-ep-webgpu==0.4.0"],
}
# onnxruntime-ggml 0.2.0 requires onnxruntime>=1.29,<1.31: the newest core it installs beside is 1.30.0.
# onnx: scripts/device/user_check.py builds its model with it
GGML = ["onnxruntime==1.30.0", "onnxruntime-ggml==0.2.0", "onnx==1.23.2"]
WEBGPU = "WebGpuExecutionProvider"
WEBGPU_PACKAGE = "onnxruntime-ep-webgpu"
WEBGPU_LIBRARY = Path("onnxruntime_ep_webgpu", "libonnxruntime_providers_webgpu.so")
AUTOREGISTER_MODULES = {"onnxruntime._conda_ep_autoregister", "onnxruntime._conda_ep_manifest"}


@dataclass(frozen=True)
class Prefix:
    root: Path
    python: Path
    site_packages: Path
    cached_python: Path
    """The interpreter of the cached venv the prefix was copied from. That venv is outside the prefix."""

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def webgpu_library(self) -> Path:
        return self.site_packages / WEBGPU_LIBRARY

    def scratch(self) -> Path:
        path = self.root / "scratch"
        path.mkdir(exist_ok=True)
        return path


@pytest.fixture(scope="session", params=sorted(CORES))
def staged(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Prefix:
    cached = python_env(f"autoreg-{request.param}", CORES[request.param])
    python = stage_prefix(cached, tmp_path_factory.mktemp(request.param) / "prefix")
    return Prefix(python.parents[1], python, site_packages(python), cached)


@pytest.fixture
def prefix(staged: Prefix) -> Iterator[Prefix]:
    yield staged
    shutil.rmtree(staged.root / MANIFEST_DIR.parent, ignore_errors=True)
    shutil.rmtree(staged.root / "scratch", ignore_errors=True)


def webgpu_manifest(prefix: Prefix, library: str | None = None, package: str = WEBGPU_PACKAGE) -> Path:
    library = library if library is not None else prefix.relative(prefix.webgpu_library())
    return write_manifest(prefix.root, package, plugin_manifest(package, WEBGPU, library))


def probe_webgpu(prefix: Prefix, *args: str, env: dict[str, str] | None = None) -> ProbeReport:
    """Import onnxruntime in the prefix, then try to register the prefix's WebGPU plugin again."""
    return probe(prefix.python, *args, "--register", WEBGPU, str(prefix.webgpu_library()), env=env)


def assert_one_warning(report: ProbeReport, manifest: Path, reason: str) -> None:
    [warning] = report["warnings"]
    assert warning["category"] == "EpAutoregistrationWarning"
    assert str(manifest) in warning["message"]
    assert reason in warning["message"]


def test_manifest_library_is_registered_at_import(prefix: Prefix) -> None:
    webgpu_manifest(prefix)
    report = probe_webgpu(prefix)
    assert report["warnings"] == []
    assert "already registered" in report["registration"]


def test_upstream_style_code_registering_the_plugin_itself_still_runs(prefix: Prefix) -> None:
    webgpu_manifest(prefix)
    report = probe_webgpu(prefix)
    assert "already registered" in report["registration"]  # the core has it ...
    assert report["application_registration"] == "accepted"  # ... and the application's own call passes


def test_library_escaping_the_prefix_through_dotdot_is_refused(prefix: Prefix) -> None:
    outside = site_packages(prefix.cached_python) / WEBGPU_LIBRARY
    manifest = webgpu_manifest(prefix, os.path.relpath(outside, prefix.root))
    report = probe_webgpu(prefix)
    assert_one_warning(report, manifest, "outside the prefix")
    assert report["registration"] == "accepted"


def test_absolute_library_path_is_refused_even_inside_the_prefix(prefix: Prefix) -> None:
    manifest = webgpu_manifest(prefix, str(prefix.webgpu_library()))
    report = probe_webgpu(prefix)
    assert_one_warning(report, manifest, "must be relative to the prefix")
    assert report["registration"] == "accepted"


def test_library_symlink_escaping_the_prefix_is_refused(prefix: Prefix) -> None:
    link = prefix.scratch() / "libescape.so"
    link.symlink_to(site_packages(prefix.cached_python) / WEBGPU_LIBRARY)
    manifest = webgpu_manifest(prefix, prefix.relative(link))
    report = probe_webgpu(prefix)
    assert_one_warning(report, manifest, "outside the prefix")
    assert report["registration"] == "accepted"


def test_malformed_manifest_warns_once(prefix: Prefix) -> None:
    manifest = write_manifest(prefix.root, WEBGPU_PACKAGE, '{"manifest_version": 1,')
    assert_one_warning(probe_webgpu(prefix), manifest, "is not valid JSON")


def test_missing_library_warns_once(prefix: Prefix) -> None:
    manifest = webgpu_manifest(prefix, "lib/libonnxruntime_providers_absent.so")
    assert_one_warning(probe_webgpu(prefix), manifest, "does not exist")


def test_bare_soname_is_looked_for_in_the_prefix_only(prefix: Prefix) -> None:
    manifest = webgpu_manifest(prefix, "libm.so.6")
    assert_one_warning(probe_webgpu(prefix), manifest, f"{prefix.root.resolve() / 'libm.so.6'} does not exist")


def test_library_the_core_refuses_warns_once(prefix: Prefix) -> None:
    libm = prefix.scratch() / "libm.so.6"
    shutil.copyfile(system_libm(), libm)
    manifest = webgpu_manifest(prefix, prefix.relative(libm))
    report = probe_webgpu(prefix)
    assert_one_warning(report, manifest, "onnxruntime refused")
    assert "CreateEpFactories" in report["warnings"][0]["message"]


def test_reimport_neither_warns_nor_raises(prefix: Prefix) -> None:
    webgpu_manifest(prefix)
    report = probe_webgpu(prefix, "--reload")
    assert report["warnings"] == []
    assert report["reload_warnings"] == []
    assert "already registered" in report["registration"]


def test_disable_variable_turns_autoregistration_off(prefix: Prefix) -> None:
    webgpu_manifest(prefix)
    write_manifest(prefix.root, "broken", "not json")
    report = probe_webgpu(prefix, env={"ONNXRUNTIME_DISABLE_EP_AUTOREGISTRATION": "1"})
    assert report["warnings"] == []
    assert report["registration"] == "accepted"


def test_each_failure_warns_once_and_the_healthy_plugin_still_registers(prefix: Prefix) -> None:
    broken = [
        write_manifest(prefix.root, "a-malformed", "[1, 2"),
        webgpu_manifest(prefix, "lib/absent.so", package="b-missing-library"),
        webgpu_manifest(prefix, "../outside.so", package="c-outside"),
        write_manifest(
            prefix.root, "d-future", {**plugin_manifest("d-future", "Future", "lib/x.so"), "manifest_version": 2}
        ),
    ]
    webgpu_manifest(prefix)
    report = probe_webgpu(prefix)
    messages = [warning["message"] for warning in report["warnings"]]
    assert len(messages) == len(broken)
    assert all(sum(str(path) in message for message in messages) == 1 for path in broken)
    assert "already registered" in report["registration"]


def test_import_succeeds_when_warnings_are_errors(prefix: Prefix) -> None:
    write_manifest(prefix.root, "broken", "not json")
    result = run(prefix.python, "-W", "error", "-c", "import onnxruntime")
    assert result.returncode == 0, result.stderr


def test_second_manifest_with_a_taken_registration_name_warns(prefix: Prefix) -> None:
    webgpu_manifest(prefix, package="a-first")
    second = webgpu_manifest(prefix, package="b-second")
    report = probe_webgpu(prefix)
    assert_one_warning(report, second, f"registration name {WEBGPU!r} is already used by")
    assert "already registered" in report["registration"]


def test_conda_prefix_variable_is_not_where_manifests_come_from(prefix: Prefix, tmp_path: Path) -> None:
    write_manifest(tmp_path, WEBGPU_PACKAGE, "a decoy that would warn if it were read")
    webgpu_manifest(prefix)
    report = probe_webgpu(prefix, env={"CONDA_PREFIX": str(tmp_path)})
    assert report["warnings"] == []
    assert "already registered" in report["registration"]


def test_import_without_manifests_loads_only_the_autoregistration_modules(prefix: Prefix) -> None:
    script = "import sys, onnxruntime; print('\\n'.join(sorted(sys.modules)))"
    with_hook = run(prefix.python, "-c", script)
    without_hook = run(prefix.cached_python, "-c", script)
    assert with_hook.returncode == without_hook.returncode == 0, with_hook.stderr + without_hook.stderr
    added = set(with_hook.stdout.split()) - set(without_hook.stdout.split())
    assert added == AUTOREGISTER_MODULES


def test_import_survives_a_missing_manifest_reader(prefix: Prefix) -> None:
    reader = prefix.site_packages / "onnxruntime" / "_conda_ep_manifest.py"
    hidden = prefix.scratch() / reader.name
    reader.rename(hidden)
    try:
        report = probe_webgpu(prefix)
    finally:
        hidden.rename(reader)
    [warning] = report["warnings"]
    assert "ModuleNotFoundError" in warning["message"]


@pytest.fixture(scope="session")
def ggml_prefix(tmp_path_factory: pytest.TempPathFactory) -> Prefix:
    cached = python_env("autoreg-ggml", GGML)
    python = stage_prefix(cached, tmp_path_factory.mktemp("ggml") / "prefix")
    return Prefix(python.parents[1], python, site_packages(python), cached)


def test_registered_plugin_shows_its_devices_to_the_core(ggml_prefix: Prefix) -> None:
    library = ggml_prefix.site_packages / "onnxruntime_ggml" / "lib" / "libonnxruntime_ggml.so"
    write_manifest(
        ggml_prefix.root, "onnxruntime-ggml", plugin_manifest("onnxruntime-ggml", "ggml", ggml_prefix.relative(library))
    )
    report = probe(ggml_prefix.python)
    assert report["warnings"] == []
    assert report["ep_names"] == ["CPUExecutionProvider", "ggml"]


def test_the_gpu_machines_user_check_runs_the_model_on_the_plugin_the_import_registered(
        ggml_prefix: Prefix, tmp_path: Path) -> None:
    """scripts/device/user_check.py, which a user's environment of this feedstock's packages runs on the GPU
    machine, with the ggml plugin (whose device is the CPU) in the CUDA plugin's place: without its manifest
    the import registers nothing and the check fails; with it, every node runs on ggml. As package.py runs it:
    with the recipe's folder on PYTHONPATH, for the load test."""
    check = [str(REPO / "scripts" / "device" / "user_check.py"), str(tmp_path / "model.onnx"), "--ep", "ggml"]
    recipe_path = {"PYTHONPATH": str(RECIPE)}
    shutil.rmtree(ggml_prefix.root / MANIFEST_DIR, ignore_errors=True)
    without = run(ggml_prefix.python, *check, env=recipe_path)
    assert without.returncode == 1 and "registered no ggml device" in without.stderr, without.stdout + without.stderr
    library = ggml_prefix.site_packages / "onnxruntime_ggml" / "lib" / "libonnxruntime_ggml.so"
    write_manifest(
        ggml_prefix.root, "onnxruntime-ggml", plugin_manifest("onnxruntime-ggml", "ggml", ggml_prefix.relative(library))
    )
    done = run(ggml_prefix.python, *check, env=recipe_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^session +all \d+ nodes on ggml", done.stdout, re.MULTILINE), done.stdout
    assert (tmp_path / "model.onnx").stat().st_size > 0


def system_libm() -> Path:
    """The C math library the interpreter itself loaded: a real shared object that is no plugin."""
    name = ctypes.util.find_library("m")
    ctypes.CDLL(name)
    with open("/proc/self/maps", encoding="utf-8") as maps:
        for line in maps:
            if line.rstrip().endswith(f"/{name}"):
                return Path(line.split()[-1])
    raise FileNotFoundError(f"{name} is not mapped into this process")


# What a careless or hostile manifest costs: only itself. Each refusal is one warning naming it, the import is
# neither blocked nor made to read without bound, and the healthy plugin beside it still registers.
def fifo(path: Path) -> None:
    os.mkfifo(path)


def endless_device(path: Path) -> None:
    path.symlink_to("/dev/zero")


def unix_socket(path: Path) -> None:
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(path))


def directory(path: Path) -> None:
    path.mkdir()


def oversized(path: Path) -> None:
    path.write_text(json.dumps(plugin_manifest("a-hostile", "Hostile", "lib/x.so")) + " " * 1024 * 1024)


@pytest.mark.parametrize(("make", "reason"), [
    (fifo, "is not a regular file"),
    (endless_device, "is not a regular file"),
    (unix_socket, "cannot be read"),
    (directory, "is not a regular file"),
    (oversized, "more than a manifest may have"),
])
def test_a_manifest_that_is_no_small_regular_file_is_refused_unread(
        prefix: Prefix, make: Callable[[Path], None], reason: str) -> None:
    hostile = prefix.root / MANIFEST_DIR / "a-hostile.json"
    hostile.parent.mkdir(parents=True, exist_ok=True)
    make(hostile)
    webgpu_manifest(prefix)
    report = probe_webgpu(prefix)
    assert_one_warning(report, hostile, reason)
    assert "already registered" in report["registration"]


# each breaks the reader of an unguarded loop: the recursion limit, realpath's NUL, a name the core cuts at its NUL
READER_BREAKERS = {
    "nesting 1,000 deep": ("[" * 1000 + "]" * 1000, "nested too deeply"),
    "a NUL in the library": (plugin_manifest("{package}", "Breaker", "lib/x\u0000.so"), "library"),
    "a NUL in the registration name": (plugin_manifest("{package}", "Breaker\u0000evil", "lib/x.so"),
                                       "registration_name"),
}


@pytest.mark.parametrize("case", sorted(READER_BREAKERS))
def test_a_manifest_that_breaks_the_reader_costs_only_itself(prefix: Prefix, case: str) -> None:
    content, reason = READER_BREAKERS[case]
    # one sorts before the healthy manifest and one after it
    broken = [write_manifest(prefix.root, package, json.loads(json.dumps(content).replace("{package}", package))
                             if isinstance(content, dict) else content) for package in ("a-broken", "z-broken")]
    webgpu_manifest(prefix)
    report = probe(prefix.python, "--register", "Breaker", str(prefix.webgpu_library()))
    messages = [warning["message"] for warning in report["warnings"]]
    assert [sum(str(path) in message for message in messages) for path in broken] == [1, 1], messages
    assert all(reason in message for message in messages), messages
    assert report["ep_names"] == ["CPUExecutionProvider"]
    # nothing holds the name "Breaker" (the core cuts a name at its NUL), and the wrapper was installed
    assert report["registration"] == "accepted"
    webgpu = probe_webgpu(prefix)
    assert "already registered" in webgpu["registration"]
    assert webgpu["application_registration"] == "accepted"


def test_a_library_the_core_refuses_is_not_counted_as_registered_whatever_its_path_says(prefix: Prefix) -> None:
    libm = prefix.scratch() / "already registered" / "libm.so.6"
    libm.parent.mkdir()
    shutil.copyfile(system_libm(), libm)
    manifest = webgpu_manifest(prefix, prefix.relative(libm))
    report = probe(prefix.python, "--register", WEBGPU, str(libm))
    assert_one_warning(report, manifest, "onnxruntime refused")
    assert report["application_registration"].startswith("refused"), report


@pytest.mark.parametrize(("field", "value", "shown"), [
    ("library", "lib/\u001b[31mFAKE.so", "\\x1b[31mFAKE.so"),
    ("manifest_version", "x" * 50_000, "'xxxxxxxx"),
])
def test_warnings_quote_the_manifest_escaped_and_cut(prefix: Prefix, field: str, value: str, shown: str) -> None:
    manifest = write_manifest(prefix.root, "a-loud", {**plugin_manifest("a-loud", "Loud", "lib/x.so"), field: value})
    [warning] = probe_webgpu(prefix)["warnings"]
    assert str(manifest) in warning["message"]
    assert shown in warning["message"]
    assert "\u001b" not in warning["message"]
    assert len(warning["message"]) < 1000


@pytest.mark.parametrize(("value", "registers"), [
    ("1", False), ("true", False), ("Yes", False), ("on", False),
    ("", True), ("0", True), ("false", True), ("No", True), ("off", True),
])
def test_the_disable_variable_reads_the_values_the_readme_names(prefix: Prefix, value: str, registers: bool) -> None:
    webgpu_manifest(prefix)
    report = probe_webgpu(prefix, env={"ONNXRUNTIME_DISABLE_EP_AUTOREGISTRATION": value})
    assert report["warnings"] == []
    assert ("already registered" in report["registration"]) is registers


def test_a_disable_value_it_does_not_know_turns_it_off_and_says_which_it_knows(prefix: Prefix) -> None:
    webgpu_manifest(prefix)
    report = probe_webgpu(prefix, env={"ONNXRUNTIME_DISABLE_EP_AUTOREGISTRATION": "please"})
    [warning] = report["warnings"]
    assert "ONNXRUNTIME_DISABLE_EP_AUTOREGISTRATION='please'" in warning["message"]
    assert "1, true, yes, on" in warning["message"]
    assert report["registration"] == "accepted"


def test_a_library_that_is_a_directory_is_named_so(prefix: Prefix) -> None:
    folder = prefix.scratch() / "libfolder.so"
    folder.mkdir()
    manifest = webgpu_manifest(prefix, prefix.relative(folder))
    assert_one_warning(probe_webgpu(prefix), manifest, "is not a regular file")


def test_a_folder_named_like_the_helper_in_the_working_directory_changes_nothing(
        prefix: Prefix, tmp_path: Path) -> None:
    decoy = tmp_path / "onnxruntime_ep_cuda"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("raise SystemExit('the decoy ran')\n")
    (decoy / "_manifest.py").write_text("raise SystemExit('the decoy ran')\n")
    webgpu_manifest(prefix)
    register_again = ("import warnings, onnxruntime as ort\n"
                      f"try: ort.capi._pybind_state.register_execution_provider_library({WEBGPU!r}, "
                      f"{str(prefix.webgpu_library())!r})\n"
                      "except Exception as error: print(error)\n")
    result = run(prefix.python, "-W", "always", "-c", register_again, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "already registered" in result.stdout, result.stdout + result.stderr
    assert "Warning" not in result.stderr, result.stderr


def test_the_manifest_of_a_library_that_kills_the_process_is_named_before_it_loads(
        prefix: Prefix, gcc: str, tmp_path: Path) -> None:
    source = tmp_path / "abort.c"
    source.write_text("#include <stdlib.h>\n__attribute__((constructor)) static void die(void) { abort(); }\n")
    library = prefix.scratch() / "libaborts.so"
    subprocess.run([gcc, "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    manifest = webgpu_manifest(prefix, prefix.relative(library), package="a-aborts")
    with_debug_log = "import logging; logging.basicConfig(level=logging.DEBUG); import onnxruntime"
    result = run(prefix.python, "-c", with_debug_log)
    assert result.returncode == -signal.SIGABRT, result.stderr
    assert str(manifest) in result.stderr and str(library.resolve()) in result.stderr, result.stderr
