"""The recipe's build scripts rehearsed against ONNX Runtime's real source (scripts/rehearse.py).

Each rehearsal configures for real, in the build and host environments rattler-build makes from the
stand-in channel, and compiles a sample of the build graph (linux-64: onnxruntime-cpp, onnxruntime for
this machine's Python, onnxruntime-ep-cuda for the newest CUDA of the linux-64 jobs; CUDA 12 has no nvcc
on PyPI; linux-aarch64, cross-compiled from linux-64 as conda-forge builds it: onnxruntime-cpp and
onnxruntime-ep-cuda for the newest CUDA of its jobs). A rehearsal's result is kept under
.cache/rehearsal/runs/, keyed by everything it reads, so an unchanged feedstock is not rehearsed twice on one
machine. ORT's source comes from the mirror
ORT_SOURCE_MIRROR names or from a download (tests/support/upstream_source.py); without either, these
tests skip and say why.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bootstrap import cache_lock
from conftest import CONFIG, REPO
from feedstock.ci_support import job_file, load_jobs, newest_cuda
from feedstock.cuda_targets import nvcc_targets, number
from rattler_render import render
from rehearsal import dependencies
from standins.channel import lay_out_contents, load_standins, standins
from standins.downloads import debian_unpacked
from standins.environment import cuda_roots
from standins.sources import Sources
from support.upstream_source import CACHE, archives_cmake_took, sources
from support.yaml_files import read_yaml

# every test here rehearses, or reads a rehearsal's result
pytestmark = pytest.mark.slow

PLUGIN, CPP, PYTHON = (getattr(CONFIG.outputs, key).name for key in ("plugin", "cpp", "python"))
LINUX_64, AARCH64 = "linux-64", "linux-aarch64"
# the newest CUDA of the .ci_support jobs, whichever migration brought it; the rehearsal's Python is this machine's
REHEARSED_CUDA = newest_cuda(load_jobs(REPO), LINUX_64)
AARCH64_CUDA = newest_cuda(load_jobs(REPO), AARCH64)
# (output, target platform): the rehearse.py arguments. The Python package's cross build needs conda's
# cross-python, which has no stand-in: linux-aarch64 rehearses its C++ and plugin jobs
REHEARSED = {(PLUGIN, LINUX_64): ["--cuda", REHEARSED_CUDA], (CPP, LINUX_64): [],
             (PYTHON, LINUX_64): [],
             (PLUGIN, AARCH64): ["--cuda", AARCH64_CUDA, "--platform", AARCH64],
             (CPP, AARCH64): ["--platform", AARCH64]}
# the ELF machine each platform's objects are for (recipe/check_plugin_binary.py's TARGET_MACHINES)
MACHINES = {LINUX_64: "EM_X86_64", AARCH64: "EM_AARCH64"}
# the rehearsal's own code and data, and the code it imports, which a cached result must have been made with
REHEARSAL_CODE = [*(REPO / "scripts" / name for name in ("rehearse.py", "rehearsal.py", "rattler_render.py",
                                                         "ninja_graph.py", "bootstrap.py")),
                  *sorted(p for folder in ("standins", "feedstock") for p in (REPO / "scripts" / folder).rglob("*")
                          if p.suffix in (".py", ".yaml", ".j2", ".patch"))]


def _digest(feedstock: Path, args: list[str], located: Sources, platform: str) -> str:
    digest = hashlib.sha256(" ".join(args).encode())
    # the linux-64 jobs' files too: a plugin rehearsal samples the architectures only its platform's list has
    files = [*sorted((feedstock / "recipe").rglob("*")), feedstock / "config" / "feedstock.yaml",
             *sorted({*(feedstock / ".ci_support").glob("linux_64_*.yaml"),
                      *(feedstock / ".ci_support").glob(f"{platform.replace('-', '_')}_*.yaml")}), *REHEARSAL_CODE]
    for path in files:
        if path.is_file() and "__pycache__" not in path.parts:
            name = path.relative_to(feedstock if path.is_relative_to(feedstock) else REPO).as_posix()
            digest.update(name.encode() + path.read_bytes())
    for archive in (located.tarball, located.trees):
        if archive is not None:
            digest.update(f"{archive.name}:{archive.stat().st_size}".encode())
    return digest.hexdigest()[:16]


def rehearse(output: str, feedstock: Path = REPO, *extra: str, platform: str = LINUX_64,
             machine_prefix: Path | None = None) -> tuple[dict, Path]:
    """The report and work folder of a rehearsal, run unless an identical one is cached. machine_prefix: a
    prefix of this machine's own, as /usr is, reachable through PATH (its bin folder first there)."""
    args = [output, *REHEARSED[output, platform], *extra]
    located = sources(*dependencies(CONFIG.outputs.key(output), platform))
    env, key = None, args
    if machine_prefix is not None:
        env = {**os.environ, "PATH": f"{machine_prefix / 'bin'}{os.pathsep}{os.environ['PATH']}"}
        key = [*args, f"PATH from {machine_prefix}"]
    workdir = CACHE / "runs" / f"{output}-{_digest(feedstock, key, located, platform)}"
    report = workdir / "report.json"
    # a worker beside this one may be making the same rehearsal: it is made once
    with cache_lock(workdir):
        if not report.exists():
            shutil.rmtree(workdir, ignore_errors=True)
            command = [sys.executable, str(REPO / "scripts" / "rehearse.py"), *args,
                       "--workdir", str(workdir), "--feedstock", str(feedstock), "--cache", str(CACHE)]
            done = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL, env=env)
            # the error's last line first: a log that shows only the start of a failure still names its cause
            said = done.stderr.strip().splitlines() or [""]
            assert report.exists(), f"rehearse.py exit {done.returncode}: {said[-1]}\n{done.stderr[-3000:]}"
            # rattler-build's environments are most of a run's size (up to 2 GB for the plugin) and the report
            # already lists what they held; the source, build tree and graph stay for the tests to read
            for environment in workdir.glob("rattler/bld/*/*_env*"):
                shutil.rmtree(environment, ignore_errors=True)
    return json.loads(report.read_text()), workdir


@pytest.fixture(scope="module", params=list(REHEARSED), ids=lambda key: f"{key[0]}-{key[1]}")
def rehearsal(request: pytest.FixtureRequest) -> tuple[str, dict, Path]:
    output, platform = request.param
    report, workdir = rehearse(output, platform=platform)
    return output, report, workdir


@pytest.fixture(scope="module", params=[LINUX_64, AARCH64])
def plugin_rehearsal(request: pytest.FixtureRequest) -> dict:
    return rehearse(PLUGIN, platform=request.param)[0]


@pytest.fixture(scope="module")
def aarch64_plugin() -> dict:
    return rehearse(PLUGIN, platform=AARCH64)[0]


@pytest.fixture(scope="module")
def aarch64_cpp() -> dict:
    return rehearse(CPP, platform=AARCH64)[0]


def _cuda(report: dict) -> str:
    return report["variant"]["cuda_compiler_version"]


# --- what every rehearsed output shows

def test_configure_succeeds_with_the_recipes_flags(rehearsal: tuple[str, dict, Path]) -> None:
    output, report, _ = rehearsal
    assert report["configure_ok"], f"{output}: {report['configure_error']}"


def test_cmake_reports_no_flag_unused(rehearsal: tuple[str, dict, Path]) -> None:
    output, report, _ = rehearsal
    assert report["configure_ok"] and report["unused_cmake_variables"] == [], output


def test_every_listed_licence_file_is_in_the_build_tree(rehearsal: tuple[str, dict, Path]) -> None:
    output, report, _ = rehearsal
    assert report["configure_ok"] and report["licence_files_missing"] == [], output


def test_every_fetched_dependency_has_its_licence_listed(rehearsal: tuple[str, dict, Path]) -> None:
    output, report, _ = rehearsal
    assert report["fetched_dependencies"], f"{output}: the build tree fetched nothing"
    assert report["dependencies_without_licence"] == [], output


def test_the_sampled_objects_compile(rehearsal: tuple[str, dict, Path]) -> None:
    output, report, _ = rehearsal
    assert report["sample"], f"{output}: nothing was sampled"
    failed = [(s["object"], s["error"]) for s in report["sample"] if not s["ok"]]
    assert not failed, f"{output}: {failed}"


def test_the_report_calls_the_sample_a_sample_and_records_the_whole_graph(rehearsal: tuple[str, dict, Path]) -> None:
    output, report, workdir = rehearsal
    assert "SAMPLED, NOT BUILT" in (workdir / "report.txt").read_text()
    steps = len((workdir / "graph.txt").read_text().splitlines())
    assert steps == report["graph_steps"] > len(report["sample"]), output


def test_no_include_folder_shadows_the_c_librarys_headers(rehearsal: tuple[str, dict, Path]) -> None:
    output, report, _ = rehearsal
    assert report["configure_ok"] and report["shadowing_include_dirs"] == [], output


def test_cmake_takes_every_dependency_from_the_archives_located_for_the_output(
        rehearsal: tuple[str, dict, Path]) -> None:
    output, report, workdir = rehearsal
    located = sources(*dependencies(CONFIG.outputs.key(output), report["target_platform"]))
    assert archives_cmake_took(workdir / "src") == set(located.archives.values()), output


def test_the_sample_is_built_for_the_target_platforms_machine(rehearsal: tuple[str, dict, Path]) -> None:
    """The recipe's own audit (check_plugin_binary.py --objects) read every object the sample made, and the
    file it linked, as the target platform's: a cross build that compiled for the build machine fails here."""
    output, report, _ = rehearsal
    assert report["audit_ok"], (output, report["audit"])
    assert {s["machine"] for s in report["sample"]} == {MACHINES[report["target_platform"]]}, output


# Source files, as opposed to the CMake files and headers a patch may change too
COMPILED_SUFFIXES = {".c", ".cc", ".cpp", ".cu"}


def test_the_native_cpp_sample_compiles_every_source_a_patch_changes() -> None:
    """recipe/patches/ changes sources of ORT's unit-test libraries, which only the native C++ build compiles:
    build_cpp.py turns the unit tests off in a cross build, and the plugin and the Python package never build
    them. In those rehearsals no patched source is in the graph, so a check there could not fail; here every
    patched source must be in the graph (a patch for another output's sources fails this until that output is
    checked too) and compiled by the sample."""
    report, workdir = rehearse(CPP)
    patched = {s for s in report["patched_sources"] if Path(s).suffix in COMPILED_SUFFIXES}
    graph = {e["file"] for e in json.loads((workdir / "compile_commands.json").read_text())}
    compiled = {s["source"] for s in report["sample"] if s["ok"]}
    assert patched, "no patch in recipe/patches/ changes a source file"
    assert patched <= graph, sorted(patched - graph)
    assert patched <= compiled, sorted(patched - compiled)


# --- the plugin

def test_the_plugins_link_line_names_cudart_cublas_cublaslt_and_the_drivers_stub(plugin_rehearsal: dict) -> None:
    """The link command. What the library ends up needing is check_plugin_binary.py's to say, in the package's
    test: there the driver's stub is gone (-Wl,--as-needed, docs/gpu-runs/2026-12-03-packages.md)."""
    libraries = set(re.findall(r"lib(cudart|cublas|cublasLt|cuda)\.so\b", plugin_rehearsal["link_line"]))
    assert libraries == {"cudart", "cublas", "cublasLt", "cuda"}


def test_the_plugin_never_links_cudnn(plugin_rehearsal: dict) -> None:
    link_line = plugin_rehearsal["link_line"]
    assert link_line and "libcudnn" not in link_line and "-lcudnn" not in link_line


def test_the_plugin_link_takes_the_recipes_export_list_as_its_only_version_script(plugin_rehearsal: dict) -> None:
    version_scripts = [flag for flag in plugin_rehearsal["link_line"].split()
                       if flag.startswith("-Wl,--version-script=")]
    assert [Path(flag.split("=", 1)[1]).name for flag in version_scripts] == ["plugin_exports.map"]


def test_the_plugin_link_keeps_the_library_loaded_until_the_process_ends(plugin_rehearsal: dict) -> None:
    assert "-Wl,-z,nodelete" in plugin_rehearsal["link_line"].split()


def test_the_plugin_link_produces_the_library_the_recipe_ships(plugin_rehearsal: dict) -> None:
    library = Path(CONFIG.outputs.plugin.library.unix).name
    assert re.search(rf"-o {re.escape(library)}\b", plugin_rehearsal["link_line"])


def test_the_sm90_tma_units_compile_in_a_pool_of_their_own(plugin_rehearsal: dict) -> None:
    """Every compile of ORT's SM90 TMA target, and nothing else, runs in the recipe's ninja pool, whose depth
    is the config's sm90_tma_jobs (recipe/cmake/sm90_tma_job_pool.cmake)."""
    (build_ninja,) = (Path(plugin_rehearsal["workdir"]) / "src").glob("*/build.ninja")
    rules = (build_ninja.parent / "CMakeFiles" / "rules.ninja").read_text()
    assert re.search(rf"^pool conda_forge_sm90_tma\n  depth = {CONFIG.cuda.sm90_tma_jobs}$", rules, re.MULTILINE)
    edges = re.findall(r"^build (\S+): (\S+) .*\n((?:  .*\n)*)", build_ninja.read_text(), re.MULTILINE)
    pooled = {out for out, _, body in edges if "  pool = conda_forge_sm90_tma\n" in body}
    sm90 = {out for out, rule, _ in edges if "_sm90_tma.dir/" in out and rule.startswith("CUDA_COMPILER")}
    assert sm90 and pooled == sm90


def test_every_nvcc_unit_of_the_graph_is_of_a_measured_kind(plugin_rehearsal: dict) -> None:
    """The release-cost prediction can price the recipe's graph as it is: each nvcc unit is of a kind the
    recorded GPU run measured (a new kernel family upstream fails here first), and the FP4 QMoE units the
    recipe turns off are gone."""
    import buildcost
    from predict_build_cost import load_graph, measurements_file

    units, _ = load_graph(Path(plugin_rehearsal["workdir"]))
    measurements = measurements_file(REPO / "docs" / "build-cost")
    measured = buildcost.kind_costs(json.loads(measurements.read_text())["pieces"])
    assert units and {u.kind for u in units} <= set(measured)
    assert not [u.source for u in units if re.search(r"moe_gemm\w*fp4", Path(u.source).name)]


def _prediction(*graphs: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "scripts" / "predict_build_cost.py"), "--graph", *graphs],
                          capture_output=True, text=True)


def test_every_cuda_job_of_the_recipe_is_predicted_within_the_runners_limits(aarch64_plugin: dict) -> None:
    """The recipe's graphs, priced from the recorded measurements for every CUDA job's list, leave each
    job 1.5 times under the runner's time limit and within its memory (runner_size in the config): a
    longer list or a new kernel family that breaks this fails here, before a release does on a runner."""
    done = _prediction(rehearse(PLUGIN)[0]["workdir"], aarch64_plugin["workdir"])
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_aarch64_jobs_are_priced_from_their_own_graph(aarch64_plugin: dict) -> None:
    """The linux-aarch64 graph is not linux-64's (KleidiAI, and 110 where linux-64 has 89), so its rows
    are priced from its own rehearsal, and say so."""
    done = _prediction(rehearse(PLUGIN)[0]["workdir"], aarch64_plugin["workdir"])
    rows = [line.split("|") for line in done.stdout.splitlines() if line.startswith("| 1")]
    graph_of = {(cells[1].strip(), cells[2].strip()): cells[-2].strip() for cells in rows}
    assert {g for (_, platform), g in graph_of.items() if platform == AARCH64} == {AARCH64}, done.stdout
    assert {g for (_, platform), g in graph_of.items() if platform == LINUX_64} == {LINUX_64}, done.stdout


def test_nvcc_compiles_sass_for_each_listed_architecture(plugin_rehearsal: dict) -> None:
    targets = nvcc_targets(list(CONFIG.cuda_lists.get(_cuda(plugin_rehearsal), plugin_rehearsal["target_platform"])))
    assert plugin_rehearsal["nvcc_sass"] == sorted(t for t in targets if t.startswith("sm_"))


def test_nvcc_embeds_ptx_for_the_newest_architecture_only(plugin_rehearsal: dict) -> None:
    listed = CONFIG.cuda_lists.get(_cuda(plugin_rehearsal), plugin_rehearsal["target_platform"])
    assert plugin_rehearsal["nvcc_ptx"] == [f"compute_{number(listed[-1])}"]


def test_every_cuda_of_the_platform_without_a_stand_in_nvcc_is_reported_as_not_rehearsed(
        plugin_rehearsal: dict) -> None:
    platform = plugin_rehearsal["target_platform"]
    others = {job.cuda_version for job in load_jobs(REPO) if job.platform == platform and job.cuda_version}
    others -= {_cuda(plugin_rehearsal), *load_standins()["cuda-nvcc_linux-64"]["pypi"]}
    assert {item.split(":")[0] for item in plugin_rehearsal["not_rehearsed"]} == {f"CUDA {v}" for v in others}


# --- what a broken recipe gets

@pytest.mark.parametrize(("package", "header"), [("libcurand-dev", "curand.h"), ("cuda-nvrtc-dev", "nvrtc.h")])
def test_a_plugin_without_a_header_package_fails_on_its_missing_header(feedstock: Path, package: str,
                                                                        header: str) -> None:
    recipe = feedstock / "recipe" / "recipe.yaml"
    text = recipe.read_text()
    # the host requirement; the deeper-indented line names the package in ignore_run_exports
    assert text.count(f"\n        - {package}\n") == 1
    recipe.write_text(text.replace(f"\n        - {package}\n", "\n"))
    report, _ = rehearse(PLUGIN, feedstock)
    errors = [s["error"] for s in report["sample"] if not s["ok"]]
    assert any(f"{header}: No such file" in e for e in errors), report["sample"]


def test_a_listed_licence_file_that_is_not_there_is_reported(feedstock: Path) -> None:
    scratch = feedstock
    config = scratch / "config" / "feedstock.yaml"
    config.write_text(config.read_text().replace("{dep: re2, spdx: BSD-3-Clause, file: LICENSE}",
                                                 "{dep: re2, spdx: BSD-3-Clause, file: COPYING}"))
    subprocess.run([sys.executable, str(scratch / "scripts" / "render.py")], check=True, capture_output=True)
    report, _ = rehearse(CPP, scratch, "--no-sample")
    (cpp,) = [o for o in read_yaml(scratch / "recipe" / "recipe.yaml")["outputs"] if o["package"]["name"] == CPP]
    build_dir = cpp["build"]["script"]["env"]["ORT_BUILD_DIR"]
    assert report["licence_files_missing"] == [f"{build_dir}/_deps/re2-src/COPYING"]


def test_a_cmake_package_of_the_machines_own_is_not_taken_for_a_fetch() -> None:
    # Debian's nlohmann_json (3.11; ORT takes 3.10 or newer from find_package), as the GPU machine's /usr held
    # Ubuntu's, which ORT linked in place of its fetch (docs/gpu-runs/2026-12-03-shared-environment-second-loan.md).
    # Its prefix here is the parent of a PATH entry ending in bin, which find_package searches as it does /usr
    (unpacked,) = debian_unpacked(["nlohmann-json3-dev"], "main", CACHE, "amd64")
    prefix = unpacked / "usr"
    (prefix / "bin").mkdir(exist_ok=True)
    assert list(prefix.glob("share/cmake/nlohmann_json/nlohmann_jsonConfig.cmake"))
    report, _ = rehearse(CPP, REPO, "--no-sample", machine_prefix=prefix)
    assert report["configure_ok"], report["configure_error"]
    assert "nlohmann_json" in report["fetched_dependencies"] and report["licence_files_missing"] == []


def test_an_architecture_cuda_13_dropped_fails_configure(feedstock: Path) -> None:
    # Thor was 101 before CUDA 13 renamed it 110: nvcc 13 no longer knows sm_101. A render refuses it in
    # the config (scripts/feedstock/architectures.py), so the recipe's CUDA 13 list is edited by hand here.
    recipe = feedstock / "recipe" / "recipe.yaml"
    text = recipe.read_text()
    version = re.escape(f'"{REHEARSED_CUDA}"')
    cuda_13_list = re.search(rf'"[^"]*100-real;[^"]*"\s+if cuda_compiler_version (?:== {version}|in \[[^\]]*{version})',
                             text).group(0)
    recipe.write_text(text.replace(cuda_13_list, cuda_13_list.replace("100-real;", "100-real;101-real;"), 1))
    report, _ = rehearse(PLUGIN, feedstock, "--no-sample")
    assert not report["configure_ok"]
    assert "101" in report["configure_error"]


def test_a_cpp_build_without_the_endian_patch_puts_orts_endian_h_before_the_c_librarys(feedstock: Path) -> None:
    config = feedstock / "config" / "feedstock.yaml"
    text = config.read_text()
    patches = re.search(r"^  patches: \[.*\]$", text, re.MULTILINE)
    assert patches and "endian" in patches.group(0)
    config.write_text(text.replace(patches.group(0), "  patches: []"))
    # a patch in recipe/patches/ that the config does not list is refused, so it goes too
    for patch in (feedstock / "recipe" / "patches").glob("*endian*.patch"):
        patch.unlink()
    render = subprocess.run([sys.executable, str(feedstock / "scripts" / "render.py")], capture_output=True, text=True)
    assert render.returncode == 0, render.stderr
    report, _ = rehearse(CPP, feedstock, "--no-sample")
    assert any(folder.endswith("include/onnxruntime/core/common") for folder in report["shadowing_include_dirs"])


# --- the stand-ins

def test_rattler_builds_environments_hold_the_packages_the_recipe_asks_for(rehearsal: tuple[str, dict, Path]) -> None:
    """rattler-build solved the build and host environments from the stand-in channel: each holds every
    package its section asks for, and the host none of the build section's tools."""
    output, report, _ = rehearsal
    platform = report["target_platform"]
    cuda = report["variant"]["cuda_compiler_version"]
    lists = read_yaml(job_file(REPO, platform, None if cuda == "None" else cuda))
    lists["python"] = [v for v in lists.get("python", [])
                       if v.startswith(f"{sys.version_info[0]}.{sys.version_info[1]}.")]
    (rendered,) = [r for r in render(REPO / "recipe" / "recipe.yaml", lists, platform, LINUX_64) if r.name == output]
    asked = {section: {spec.split()[0] for spec in rendered.recipe["requirements"].get(section, [])}
             for section in ("build", "host")}
    for section in ("build", "host"):
        assert asked[section] <= set(report["standins"][section]), (output, section)
    assert not (asked["build"] - asked["host"]) & set(report["standins"]["host"]), output


def test_a_package_without_a_stand_in_is_refused_naming_the_table_and_the_package(feedstock: Path) -> None:
    recipe = feedstock / "recipe" / "recipe.yaml"
    text = recipe.read_text()
    assert "        - libcufft-dev\n" in text
    recipe.write_text(text.replace("        - libcufft-dev\n", "        - libcufft-dev\n        - libnvjpeg-dev\n", 1))
    sources(*dependencies("plugin"))
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "rehearse.py"), PLUGIN, "--cuda", REHEARSED_CUDA,
                           "--workdir", str(feedstock / "rehearsal"), "--feedstock", str(feedstock),
                           "--cache", str(CACHE)], capture_output=True, text=True)
    assert done.returncode == 2
    assert "standins.yaml" in done.stderr and "libnvjpeg-dev" in done.stderr


# --- linux-aarch64, cross-compiled on linux-64 as conda-forge.yml's build_platform has it built

def test_the_aarch64_plugin_compiles_a_unit_for_thor_and_one_for_spark(aarch64_plugin: dict) -> None:
    """110 (Jetson Thor), which no linux-64 job compiles, and 121 (DGX Spark), the list's newest, each
    compile a sampled nvcc unit with the cross host compiler."""
    compiled = {s["architecture"] for s in aarch64_plugin["sample"] if s["ok"] and s["machine"] == "EM_AARCH64"}
    assert {"110", "121"} <= compiled, aarch64_plugin["sample"]


def test_every_nvcc_command_of_the_aarch64_graph_names_the_cross_host_compiler(aarch64_plugin: dict) -> None:
    """The graph carries nvcc's host compiler (build_ep_cuda.py's CMAKE_CUDA_HOST_COMPILER), so no nvcc unit
    depends on the activation's NVCC_PREPEND_FLAGS to compile for aarch64."""
    graph = (Path(aarch64_plugin["workdir"]) / "graph.txt").read_text().splitlines()
    nvcc = [c for c in graph if re.search(r"/bin/nvcc\s.*\s-c\s", c)]
    assert nvcc and all(re.search(r"-ccbin=\S*/aarch64-conda-linux-gnu-c\+\+\s", c) for c in nvcc)


def test_the_aarch64_plugin_graph_has_no_device_link_or_lto_step(aarch64_plugin: dict) -> None:
    """The anchor's aarch64-only failures were nvcc's device link (`nvlink fatal: elfLink linker library load
    error (target: sm_50)`, conda-forge/onnxruntime-feedstock da32832, 8430fb6) and LTO that hung (1c53bec).
    The plugin's graph has neither step, so its architecture list need not drop anything for them."""
    assert aarch64_plugin["graph_steps"] > 0
    assert (aarch64_plugin["device_link_steps"], aarch64_plugin["lto_steps"]) == (0, 0)


def test_the_aarch64_cpu_build_links_its_smallest_library_for_aarch64(aarch64_cpp: dict) -> None:
    linked = [s for s in aarch64_cpp["sample"] if s["why"].startswith("the graph's smallest link")]
    assert [(Path(s["object"]).name, s["ok"], s["machine"]) for s in linked] == \
        [("libonnxruntime_providers_shared.so", True, "EM_AARCH64")]


def test_the_aarch64_plugin_links_the_targets_cuda_libraries(aarch64_plugin: dict) -> None:
    linked = re.findall(r"\S+/lib(?:cudart|cublas|cublasLt|cuda)\.so\b", aarch64_plugin["link_line"])
    assert linked and all("/targets/sbsa-linux/" in path for path in linked), linked


def test_thors_pre_cuda_13_name_in_the_aarch64_list_fails_the_aarch64_rehearsal(feedstock: Path) -> None:
    """An aarch64-only setting broken in a copy of the feedstock: the linux-aarch64 CUDA 13 list names Thor
    101, as CUDA 12 did, which nvcc 13 no longer knows. Only the linux-aarch64 rehearsal can see it."""
    recipe = feedstock / "recipe" / "recipe.yaml"
    text = recipe.read_text()
    aarch64_list = re.search(rf'"[^"]*110-real[^"]*"\s+if cuda_compiler_version (?:== |in \[)'
                             rf'"{re.escape(AARCH64_CUDA)}"'
                             r'[^\n]*\n\s+and target_platform == "linux-aarch64"', text).group(0)
    recipe.write_text(text.replace(aarch64_list, aarch64_list.replace("110-real", "101-real"), 1))
    report, _ = rehearse(PLUGIN, feedstock, "--no-sample", platform=AARCH64)
    assert not report["configure_ok"]
    assert "101" in report["configure_error"]


def test_no_file_of_the_gpu_machines_toolkit_goes_into_two_stand_ins(tmp_path: Path) -> None:
    """The GPU machine's CUDA stand-ins take their files from its one toolkit folder by patterns (standins.yaml's
    `machine`). A file two packages of the host environment take hides a -dev package the recipe lacks:
    cuda-cudart-dev's `include/*` took nvrtc.h, and the plugin built there without cuda-nvrtc-dev. Laid out
    here from the PyPI wheels' toolkit, which has that folder's layout."""
    toolkit, _ = cuda_roots(REHEARSED_CUDA, CACHE)
    job = job_file(REPO, LINUX_64, REHEARSED_CUDA)
    owners: dict[str, list[str]] = {}
    for standin in standins([job], {}):
        # a compiler package (cuda-nvcc_linux-64) goes into the build environment, where the build machine's
        # copies of the headers are its own (conda-forge's cuda-nvcc_linux-64 brings cuda-cudart-dev_linux-64)
        host = not standin.name.endswith(f"_{LINUX_64}")
        if not host or not any("{toolkit}" in pattern for _, patterns, _ in standin.machine for pattern in patterns):
            continue
        folder = tmp_path / standin.name
        lay_out_contents(standin, folder, {"toolkit": str(toolkit), "target_toolkit": str(toolkit)})
        for path in folder.rglob("*"):
            if not path.is_dir() and "activate.d" not in path.parts:
                owners.setdefault(path.relative_to(folder).as_posix(), []).append(standin.name)
    assert "targets/x86_64-linux/include/nvrtc.h" in owners
    assert {name: who for name, who in owners.items() if len(who) > 1} == {}
