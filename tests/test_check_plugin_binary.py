"""recipe/check_plugin_binary.py, run for real on libraries built here with gcc and on PyPI plugin wheels."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.pyenvs import python_env, run
from support.wheels import GGML, WEBGPU, linux_library, windows_library

AUDIT = Path(__file__).resolve().parents[1] / "recipe" / "check_plugin_binary.py"
VERSION_SCRIPT = AUDIT.with_name("plugin_exports.map")
# The recipe's test requirements for the audit, pinned so a parser release cannot change a verdict.
AUDIT_REQUIREMENTS = ["pyelftools==0.33", "pefile==2024.8.26"]
ENTRY_POINTS = ("CreateEpFactories", "ReleaseEpFactory")
CUDA_LINKS = ("libcudart.so.12", "libcublas.so.12", "libcublasLt.so.12", "libcuda.so.1")
# the CUDA libraries the plugin loads itself when a model needs them, never links
LOADED_LAZILY = ("libcudnn.so.9", "libcufft.so.11")
SYSTEM_LINKS = ("libstdc++.so.6", "libm.so.6")
FAILURE = re.compile(r"^FAIL \[(?P<rule>[^\]]+)\] (?P<subject>[^:]+): ", re.MULTILINE)

pytestmark = pytest.mark.network


@dataclass(frozen=True)
class FakePlugin:
    exports: tuple[str, ...] = ENTRY_POINTS
    undefined: tuple[str, ...] = ()
    links: tuple[str, ...] = CUDA_LINKS + SYSTEM_LINKS
    hidden_visibility: bool = True
    # like ONNX Runtime's own static libraries: code compiled with default visibility, linked in
    static_archive: bool = False
    # linked with the recipe's list of exports, as build_ep_cuda.py links the plugin
    version_script: bool = False


@pytest.fixture(scope="session")
def audit_python() -> Path:
    return python_env("plugin-audit", AUDIT_REQUIREMENTS)


@pytest.fixture(scope="session")
def stub_libraries(gcc: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Empty shared libraries whose SONAMEs are the CUDA, cuDNN, cuFFT and protobuf names a plugin could link."""
    directory = tmp_path_factory.mktemp("stubs")
    for soname in (*CUDA_LINKS, *LOADED_LAZILY, "libprotobuf.so.32"):
        subprocess.run([gcc, "-shared", "-fPIC", "-x", "c", "/dev/null", "-o", str(directory / soname),
                        f"-Wl,-soname,{soname}"], check=True)
    return directory


def plugin_source(plugin: FakePlugin) -> str:
    undefined = (*plugin.undefined, *(("vendored_helper",) if plugin.static_archive else ()))
    declarations = [f"extern void {name}(void);" for name in undefined]
    calls = " ".join(f"{name}();" for name in undefined)
    exported = [f'__attribute__((visibility("default"))) int {name}(void) {{ return internal_helper(); }}'
                for name in plugin.exports]
    return "\n".join([*declarations, f"int internal_helper(void) {{ {calls} return 0; }}", *exported, ""])


def build(plugin: FakePlugin, gcc: str, stubs: Path, directory: Path) -> Path:
    source = directory / "plugin.c"
    library = directory / "libonnxruntime_providers_cuda.so"
    source.write_text(plugin_source(plugin))
    visibility = ["-fvisibility=hidden"] if plugin.hidden_visibility else []
    archives = [str(static_archive(gcc, directory))] if plugin.static_archive else []
    exclude = [f"-Wl,--version-script={VERSION_SCRIPT}"] if plugin.version_script else []
    # --no-as-needed keeps a DT_NEEDED entry for every linked library, used or not, as in a real build.
    subprocess.run([gcc, "-shared", "-fPIC", *visibility, str(source), *archives, "-o", str(library), *exclude,
                    "-Wl,--no-as-needed", f"-L{stubs}", *(f"-l:{name}" for name in plugin.links)], check=True)
    return library


def static_archive(gcc: str, directory: Path) -> Path:
    source, obj, archive = directory / "vendored.c", directory / "vendored.o", directory / "libvendored.a"
    source.write_text("void vendored_helper(void) {}\n")
    subprocess.run([gcc, "-c", "-fPIC", str(source), "-o", str(obj)], check=True)
    subprocess.run(["ar", "rcs", str(archive), str(obj)], check=True)
    return archive


def audit(python: Path, library: Path) -> tuple[int, set[tuple[str, str]], str]:
    result = run(python, str(AUDIT), str(library))
    failures = {(match["rule"], match["subject"]) for match in FAILURE.finditer(result.stdout)}
    return result.returncode, failures, result.stdout + result.stderr


def audit_fake(plugin: FakePlugin, audit_python: Path, gcc: str, stubs: Path,
               tmp_path: Path) -> tuple[int, set[tuple[str, str]], str]:
    return audit(audit_python, build(plugin, gcc, stubs, tmp_path))


def test_audit_passes_a_library_exporting_the_entry_points_and_linking_cuda_and_the_c_runtime(
        audit_python, gcc, stub_libraries, tmp_path):
    returncode, failures, output = audit_fake(FakePlugin(), audit_python, gcc, stub_libraries, tmp_path)
    assert (returncode, failures) == (0, set()), output
    assert output.startswith("ok: ") and "libcudart.so.12" in output and "libcuda.so.1" in output


def test_audit_rejects_a_library_exporting_get_provider(audit_python, gcc, stub_libraries, tmp_path):
    plugin = FakePlugin(exports=(*ENTRY_POINTS, "GetProvider"))
    returncode, failures, output = audit_fake(plugin, audit_python, gcc, stub_libraries, tmp_path)
    assert (returncode, failures) == (1, {("no-provider-bridge-export", "GetProvider")}), output


@pytest.mark.parametrize("soname", LOADED_LAZILY)
def test_audit_rejects_a_library_linking_what_it_should_load_lazily(soname, audit_python, gcc, stub_libraries,
                                                                     tmp_path):
    plugin = FakePlugin(links=(*CUDA_LINKS, soname))
    returncode, failures, output = audit_fake(plugin, audit_python, gcc, stub_libraries, tmp_path)
    assert (returncode, failures) == (1, {("loaded-lazily", soname)}), output


def test_audit_rejects_a_library_missing_release_ep_factory(audit_python, gcc, stub_libraries, tmp_path):
    plugin = FakePlugin(exports=("CreateEpFactories",))
    returncode, failures, output = audit_fake(plugin, audit_python, gcc, stub_libraries, tmp_path)
    assert (returncode, failures) == (1, {("entry-points", "ReleaseEpFactory")}), output


def test_audit_rejects_a_library_needing_provider_get_host(audit_python, gcc, stub_libraries, tmp_path):
    plugin = FakePlugin(undefined=("Provider_GetHost",))
    returncode, failures, output = audit_fake(plugin, audit_python, gcc, stub_libraries, tmp_path)
    assert (returncode, failures) == (1, {("no-provider-bridge-import", "Provider_GetHost")}), output


def test_audit_rejects_a_dependency_outside_the_allowlist(audit_python, gcc, stub_libraries, tmp_path):
    plugin = FakePlugin(links=(*CUDA_LINKS, "libprotobuf.so.32"))
    returncode, failures, output = audit_fake(plugin, audit_python, gcc, stub_libraries, tmp_path)
    assert (returncode, failures) == (1, {("dependency-allowlist", "libprotobuf.so.32")}), output


def test_audit_rejects_a_library_built_without_hidden_visibility(audit_python, gcc, stub_libraries, tmp_path):
    plugin = FakePlugin(hidden_visibility=False)
    returncode, failures, output = audit_fake(plugin, audit_python, gcc, stub_libraries, tmp_path)
    assert (returncode, failures) == (1, {("exports-only-entry-points", "internal_helper")}), output


def test_audit_rejects_static_libraries_whose_symbols_leak_into_the_exports(
        audit_python, gcc, stub_libraries, tmp_path):
    plugin = FakePlugin(static_archive=True)
    returncode, failures, output = audit_fake(plugin, audit_python, gcc, stub_libraries, tmp_path)
    assert (returncode, failures) == (1, {("exports-only-entry-points", "vendored_helper")}), output


def test_audit_passes_leaked_symbols_once_linked_with_the_recipes_export_list_as_the_plugin_build_does(
        audit_python, gcc, stub_libraries, tmp_path):
    # what a GPU build of 1.30.0 exported besides the entry points: vendored code and cuFFT's stubs
    plugin = FakePlugin(exports=(*ENTRY_POINTS, "cufftCreate"), static_archive=True, version_script=True)
    returncode, failures, output = audit_fake(plugin, audit_python, gcc, stub_libraries, tmp_path)
    assert (returncode, failures) == (0, set()), output


def test_audit_rejects_default_visibility_stubs_without_the_export_list(audit_python, gcc, stub_libraries, tmp_path):
    plugin = FakePlugin(exports=(*ENTRY_POINTS, "cufftCreate"))
    returncode, failures, output = audit_fake(plugin, audit_python, gcc, stub_libraries, tmp_path)
    assert (returncode, failures) == (1, {("exports-only-entry-points", "cufftCreate")}), output


def test_audit_refuses_a_file_that_is_no_library(audit_python, tmp_path):
    not_a_library = tmp_path / "libonnxruntime_providers_cuda.so"
    not_a_library.write_text("not a binary\n")
    returncode, failures, output = audit(audit_python, not_a_library)
    assert (returncode, failures) == (2, set()), output
    assert "neither an ELF nor a PE file" in output


@pytest.mark.skipif(sys.platform != "linux", reason="the wheel's library is the linux one of this machine")
def test_audit_passes_the_webgpu_plugin_from_pypi(audit_python):
    returncode, failures, output = audit(audit_python, linux_library(WEBGPU))
    assert (returncode, failures) == (0, set()), output


@pytest.mark.skipif(sys.platform != "linux", reason="the wheel's library is the linux one of this machine")
def test_audit_rejects_the_ggml_plugin_from_pypi(audit_python):
    returncode, failures, output = audit(audit_python, linux_library(GGML))
    assert (returncode, failures) == (1, {
        ("exports-only-entry-points", "ggml_backend_cpu_reg"),
        ("dependency-allowlist", "libgomp-d46f9225.so.1.0.0"),
    }), output


def test_audit_rejects_the_ggml_windows_plugin_from_pypi(audit_python):
    returncode, failures, output = audit(audit_python, windows_library(GGML))
    assert (returncode, failures) == (1, {
        ("exports-only-entry-points", "ggml_backend_cpu_reg"),
        ("dependency-allowlist", "bcryptprimitives.dll"),
        ("dependency-allowlist", "ntdll.dll"),
        ("dependency-allowlist", "VCOMP140.DLL"),
    }), output


def test_audit_passes_the_webgpu_windows_plugin_with_its_delay_loaded_system_dlls(audit_python):
    returncode, failures, output = audit(audit_python, windows_library(WEBGPU))
    assert (returncode, failures) == (0, set()), output
    # SHELL32 and USER32 are delay-loaded: the audit reads those imports too
    assert "needs SHELL32.dll" in output and "needs USER32.dll" in output
