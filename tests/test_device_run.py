"""The GPU run's pieces that run here: scripts/device/pack.py's plan and bundles, run.sh's staging, argument
handling and time-limited steps, package.py's operator suite command, and report.py's report. The build and
the GPU steps run only on the GPU machine (docs/gpu-machine.md, "Building the plugin package on a GPU")."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import yaml
from rattler_build import RenderConfig, Stage0Recipe, VariantConfig
from rattler_build.debug import DebugSession

import pack
import package
import pieces
import plan as plans
import report
import steps
from conftest import CONFIG, FLOOR_CORE_VERSION, NEWEST_CUDA_JOB, REPO
from feedstock.ci_support import job_file
from feedstock.inputs import load_bot_fields
from feedstock.shipped_manifest import manifest_path
from rattler_render import render
from standins.channel import build_channel, standins
from standins.downloads import BUILD_PLATFORM
from standins.environment import TOOL_WHEELS, machine_roots
from standins.evaluate import evaluate
from standins.resolve import render_with_solve, variant_file
from standins.sources import MIRROR_TREE_PATCHES, mirror_folder
from support import upstream_source
from support.pyenvs import core_env, run
from support.yaml_files import read_yaml
from test_build_scripts import shellcheck

DEVICE = REPO / "scripts" / "device"
# the GPU runs' commands, for whoever runs them
GPU_MACHINE_DOC = REPO / "docs" / "gpu-machine.md"


def run_sh(top: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GPU_RUN_DIR": str(top), "OUT": str(top / "out")}
    return subprocess.run(["bash", str(DEVICE / "run.sh"), *args], env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=timeout)


def ended_steps(top: Path) -> list[list[str]]:
    return [row.split("\t") for row in (top / "results" / "steps.tsv").read_text().splitlines()]


def mirror_with_sources() -> Path:
    """The mirror folder, when it has the sources of the recipe's version; a skip that says why otherwise."""
    mirror = mirror_folder(os.environ)
    if mirror is None:
        pytest.skip("no mirror folder (ORT_SOURCE_MIRROR, else ../shared/upstream): the bundles carry its files")
    try:
        pack.mirrored(mirror, pack.build_plan(REPO).version, trees=True)
    except pack.PackError as reason:
        pytest.skip(str(reason))
    return mirror


# pack.py over the mirror: the GPU run's bundles, a few hundred MB copied and downloaded, are the slow tier's
@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> Path:
    mirror = mirror_with_sources()
    dest = tmp_path_factory.mktemp("device") / "bundles"
    result = subprocess.run([sys.executable, str(DEVICE / "pack.py"), "--mirror", str(mirror), "--dest", str(dest)],
                            capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    return dest


def bundle_files(bundles: Path) -> dict[str, list[str]]:
    """Each bundle's files, by their path inside the bundle."""
    return {folder.name: sorted(str(f.relative_to(folder)) for f in folder.rglob("*") if f.is_file())
            for folder in sorted(bundles.iterdir())}


@pytest.mark.network
@pytest.mark.slow
def test_each_bundle_fits_one_transfer_beside_the_checkout(bundles: Path) -> None:
    for folder in bundles.iterdir():
        size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
        assert size <= pack.BUNDLE_LIMIT, f"{folder.name}: {size} bytes"
    checkout = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    tracked = sum((REPO / name).stat().st_size for name in checkout.decode().split("\0") if (REPO / name).is_file())
    assert tracked + pack.BUNDLE_LIMIT <= pack.CALL_LIMIT, f"the checkout is {tracked} bytes"



@pytest.mark.network
def test_the_speed_runs_profiler_is_a_wheel_whose_program_runs_on_the_machine(tmp_path: Path) -> None:
    """What package.py's chain_samples takes from the bundles: the one PROFILER wheel pack.py downloads for the
    machine's Python and platform (WHEEL_TAGS), with its program where chain_samples looks for it."""
    pack._download(pack.PROFILER, tmp_path / "profiler")
    (wheel,) = (tmp_path / "profiler").glob("py_spy-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        (member,) = [name for name in archive.namelist() if name.endswith(".data/scripts/py-spy")]
        program = tmp_path / "py-spy"
        program.write_bytes(archive.read(member))
    program.chmod(0o755)
    said = subprocess.run([str(program), "--version"], capture_output=True, text=True, check=True).stdout
    assert said.split() == ["py-spy", pack.PROFILER.split("==")[1]]

@pytest.mark.network
@pytest.mark.slow
def test_every_input_the_plan_names_is_in_exactly_one_bundle(bundles: Path) -> None:
    plan = plans.load(bundles / "bundle-1" / "plan.json")
    carried = [name for files in bundle_files(bundles).values() for name in files if name != "plan.json"]
    assert sorted(carried) == list(plan.inputs)


@pytest.mark.network
@pytest.mark.slow
def test_the_plan_carries_the_floor_and_the_newest_core_and_the_tools_for_rattler_build(bundles: Path) -> None:
    plan = plans.load(bundles / "bundle-1" / "plan.json")
    assert plan.cores == plans.Cores(FLOOR_CORE_VERSION, pack.NEWEST_CORE)
    carried = {folder: [name.removeprefix(f"{folder}/") for name in plan.inputs if name.startswith(f"{folder}/")]
               for folder in ("wheels", "rattler")}
    wheels = carried["wheels"]
    assert {w.split("-")[1] for w in wheels if w.startswith("onnxruntime-")} == {FLOOR_CORE_VERSION, pack.NEWEST_CORE}
    # the same versions as this machine's tests use, under the wheel's file name (dashes become underscores); what
    # run.sh installs before the steps in rattler/, alone there
    for folder, tools in (("wheels", TOOL_WHEELS), ("rattler", pack.RATTLER)):
        for tool in tools:
            name, version = tool.split("==")
            assert any(w.startswith(f"{name.replace('-', '_')}-{version}-") for w in carried[folder]), (tool, folder)
    assert len(carried["rattler"]) == len(pack.RATTLER)


@pytest.mark.network
@pytest.mark.slow
def test_the_plan_carries_the_operator_suite_its_tools_and_the_tarball_it_is_in(bundles: Path, tmp_path: Path) -> None:
    """The package run takes upstream's operator suite from the source tarball the bundles carry, by the path
    the plan names, and runs it with the pytest the plan names, which case_log.py's hooks need."""
    plan = plans.load(bundles / "bundle-1" / "plan.json")
    suite = plan.operator_suite
    tools = [Path(tool).name for tool in suite.tools]
    for tool in pack.SUITE_TOOLS:
        name, version = tool.split("==")
        assert [w for w in tools if w.startswith(f"{name.replace('-', '_')}-{version}-")], (tool, tools)
    assert set(suite.tools) <= set(plan.inputs)
    stage = tmp_path / "stage"
    for folder in bundles.iterdir():
        shutil.copytree(folder, stage, dirs_exist_ok=True)
    # and with the onnx whose models every core reads, which suite_site puts with pytest ahead of the environment's
    assert [w for w in tools if w.startswith(f"onnx-{pack.SUITE_ONNX}-")], tools
    steps.unpack(stage, tmp_path / "suite", str(Path(suite.path).parent))
    unpacked = tmp_path / "suite" / suite.path
    # the suite's folder, with the helper the suite imports, alone: the rest of the tree stays packed
    assert {"cuda_plugin_ep_helper.py", "test_cuda_plugin_ep.py"} <= {p.name for p in unpacked.parent.iterdir()}
    assert {p.parent for p in (tmp_path / "suite").rglob("*") if p.is_file()} <= {*unpacked.parent.rglob("*"),
                                                                                   unpacked.parent}
    assert "ORT_TEST_CUDA_PLUGIN_NO_CUDNN" in unpacked.read_text()
    assert report.contrib_cases(unpacked), "no case of the suite builds a com.microsoft node"


@pytest.mark.network
@pytest.mark.slow
def test_the_plan_carries_the_build_environment_rattler_build_renders(bundles: Path) -> None:
    plan = plans.load(bundles / "bundle-1" / "plan.json")
    # what build_ep_cuda.py reads from its environment beyond rattler-build's own variables
    assert {"CUDA_ARCHITECTURES", "ORT_MIN_CORE_VERSION", "PLUGIN_INSTALL_PATH", "PLUGIN_MANIFEST",
            "PLUGIN_MANIFEST_DIR", "NVCC_THREADS", "NVCC_GB_PER_THREAD", "CUDA_BUILD_JOBS",
            "SM90_TMA_JOBS"} <= set(plan.script_env)
    assert plan.script_env["ORT_MIN_CORE_VERSION"] == FLOOR_CORE_VERSION


@pytest.mark.network
@pytest.mark.slow
def test_a_cost_run_carries_what_rattler_build_configures_with_and_keeps_the_recipes_settings(tmp_path: Path) -> None:
    """pack.py --cost plans a cost run (scripts/buildcost.py): the inputs of the package build, whose environment
    rattler-build lays out from the stand-in channel, and no device overrides, so the sample compiles at the
    recipe's own architecture list."""
    mirror = mirror_with_sources()
    result = subprocess.run([sys.executable, str(DEVICE / "pack.py"), "--cost", "--mirror", str(mirror),
                             "--dest", str(tmp_path)], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                            timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    plan = plans.load(tmp_path / "bundle-1" / "plan.json")
    assert (plan.purpose, plan.overrides.env, plan.overrides.cmake, plan.operator_suite) == ("cost", (), (), None)
    # the recipe's own list and floor for the newest CUDA job, which it has not for the machine's CUDA 13.0
    context = {name: value for name, value, _ in plan.overrides.context}
    assert context["cuda_architectures"] == plan.script_env["CUDA_ARCHITECTURES"] == \
        pack.build_plan(REPO).script_env["CUDA_ARCHITECTURES"]
    recipe, _ = evaluate(REPO, steps.PLUGIN, plan.jobs[0].cuda, None)
    assert f"__cuda_arch >={context['cuda_arch_floor']}" in recipe["requirements"]["run_constraints"]
    carried = [name for files in bundle_files(tmp_path).values() for name in files if name != "plan.json"]
    assert sorted(carried) == list(plan.inputs)
    assert [n for n in carried if n.startswith("rattler/py_rattler_build-")], carried


def test_bundles_hold_every_input_once_and_none_is_over_the_limit(tmp_path: Path) -> None:
    sizes = {"source": 6, "mirror": 5, "trees": 3, "core": 4, "tool": 2}
    inputs = {}
    for name, size in sizes.items():
        (tmp_path / name).write_bytes(b"x" * size)
        inputs[name] = tmp_path / name
    packed = pack.bundles(inputs, limit=10)
    # first fit, largest first: source, then mirror (a bundle of its own), core beside source, trees and tool
    # beside mirror
    assert [sorted(bundle) for bundle in packed] == [["core", "source"], ["mirror", "tool", "trees"]]
    assert all(sum(path.stat().st_size for path in bundle.values()) <= 10 for bundle in packed)


def test_new_bundles_replace_the_old_ones_and_leave_the_rest_of_the_folder(tmp_path: Path) -> None:
    """A second pack.py with fewer bundles leaves no bundle of the first behind, and what else the folder holds
    (a package kept to be carried to a call) stays."""
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for name in ("a", "b", "c"):
        (inputs / name).write_bytes(b"x" * 4)
    dest = tmp_path / "device"
    (dest / "kept").mkdir(parents=True)
    (dest / "kept" / "package.conda").write_bytes(b"kept")
    first = {name: inputs / name for name in ("a", "b", "c")}
    pack.write(dest, pack.bundles(first, limit=5), pack.build_plan(REPO))
    assert sorted(p.name for p in dest.iterdir()) == ["bundle-1", "bundle-2", "bundle-3", "kept"]
    second = {"a": inputs / "a"}
    pack.write(dest, pack.bundles(second, limit=5), pack.build_plan(REPO))
    assert sorted(p.name for p in dest.iterdir()) == ["bundle-1", "kept"]
    assert plans.load(dest / "bundle-1" / "plan.json").inputs == ("a",)
    assert (dest / "kept" / "package.conda").read_bytes() == b"kept"


@pytest.mark.parametrize("purpose", ["package", "cost", "cpu", "speed"])
def test_the_plan_pack_writes_is_the_plan_the_gpu_machine_loads(tmp_path: Path, purpose: str) -> None:
    written = pack.build_plan(REPO, purpose, package="packages/plugin.conda",
                              core="packages/onnxruntime-1.30.0-py312h0_0_cpu.conda")
    written.write(tmp_path / "plan.json")
    assert plans.load(tmp_path / "plan.json") == written


@pytest.mark.parametrize("change, message", [
    (lambda plan: plan | {"purpose": "tests"}, "plan.json.purpose: 'tests' is none of package, cost, cpu, speed"),
    (lambda plan: {k: v for k, v in plan.items() if k != "jobs"}, "missing 1 required positional argument: 'jobs'"),
    (lambda plan: plan | {"cuda": "13.4"}, "plan.json: no such field cuda in Plan"),
    (lambda plan: plan | {"overrides": {"env": [["CUDA_BUILD_JOBS", "16"]]}},
     "plan.json.overrides.env[0]: 2 values, not 3 (name, value, reason)"),
    (lambda plan: plan | {"outputs": "onnxruntime-ep-cuda"}, "plan.json.outputs: 'onnxruntime-ep-cuda' is not tuple"),
], ids=["purpose", "missing", "unknown", "reasonless", "outputs"])
def test_a_plan_that_is_not_one_is_refused_saying_where(tmp_path: Path, change, message: str) -> None:
    pack.build_plan(REPO).write(tmp_path / "plan.json")
    broken = change(json.loads((tmp_path / "plan.json").read_text()))
    (tmp_path / "plan.json").write_text(json.dumps(broken))
    with pytest.raises(plans.PlanError) as refused:
        plans.load(tmp_path / "plan.json")
    assert message in str(refused.value)
    said = subprocess.run([sys.executable, str(DEVICE / "plan.py"), str(tmp_path / "plan.json"), "purpose"],
                          capture_output=True, text=True)
    assert said.returncode == 2 and message in said.stderr


def test_every_command_line_of_the_gpu_run_is_one_it_runs_or_its_doc_gives() -> None:
    """A script of scripts/device that neither run.sh, package.py nor docs/gpu-machine.md runs is dead, though the
    code its own command line calls looks alive. Run means launched: `"${here}/NAME"` in run.sh, `HERE / "NAME"` in
    the Python steps, `python3 scripts/device/NAME` in the doc; a comment or docstring that names it is not."""
    launched = set(re.findall(r'"\$\{here\}/([\w.]+\.py)"', (DEVICE / "run.sh").read_text()))
    for steps_file in ("package.py", "steps.py"):
        launched |= set(re.findall(r'HERE / "([\w.]+\.py)"', (DEVICE / steps_file).read_text()))
    launched |= set(re.findall(r"`python3 scripts/device/([\w.]+\.py)", GPU_MACHINE_DOC.read_text()))
    scripts = [path.name for path in DEVICE.glob("*.py") if 'if __name__ == "__main__":' in path.read_text()]
    assert "plan.py" in scripts and "report.py" in scripts
    assert [name for name in scripts if name not in launched] == []


def test_run_sh_asks_the_plan_through_its_command_line(tmp_path: Path) -> None:
    """What run.sh asks the plan (plan.py's commands), answered from the plan pack.py writes."""
    written = pack.build_plan(REPO, "cost")
    written.write(tmp_path / "plan.json")
    asked = set(re.findall(r"plan_says ([\w-]+)", (DEVICE / "run.sh").read_text()))
    assert asked == set(plans.ANSWERS), "a command of plan.py that run.sh does not use, or one it lacks"
    answers = {question: subprocess.run([sys.executable, str(DEVICE / "plan.py"), str(tmp_path / "plan.json"),
                                         question], capture_output=True, text=True, check=True).stdout
               for question in asked}
    assert answers == {"purpose": "cost\n", "build-dir": written.script_env["ORT_BUILD_DIR"] + "\n", "inputs": "",
                       "outputs": f"{CONFIG.outputs.plugin.name}\n"}


def test_the_package_run_plans_the_operator_suite_with_each_core_and_once_without_cudnn() -> None:
    """Upstream's suite runs with the floor core and the newest from PyPI, the newest with cuDNN hidden, and this
    feedstock's own onnxruntime where the run carries one (pack.py --core)."""
    runs = {run.name: run for run in pack.build_plan(REPO).operator_suite.runs}
    assert runs == {
        f"operators-{FLOOR_CORE_VERSION}": plans.SuiteRun(f"operators-{FLOOR_CORE_VERSION}", FLOOR_CORE_VERSION),
        f"operators-{pack.NEWEST_CORE}": plans.SuiteRun(f"operators-{pack.NEWEST_CORE}", pack.NEWEST_CORE),
        f"operators-without-cudnn-{pack.NEWEST_CORE}": plans.SuiteRun(f"operators-without-cudnn-{pack.NEWEST_CORE}",
                                                                      pack.NEWEST_CORE, cudnn=False)}
    version = load_bot_fields(REPO).version
    python = CONFIG.outputs.python
    for name in (python.name, python.novec_name):
        core = f"packages/{name}-{version}-py312h0_0_cpu.conda"
        with_core = pack.build_plan(REPO, core=core)
        feedstock = plans.SuiteRun(f"operators-feedstock-{name}-{version}", version, feedstock_core=True)
        assert feedstock in with_core.operator_suite.runs
        assert with_core.core == core and len(with_core.operator_suite.runs) == 4
        # the package run's cores are the stand-in channel's: a suite's core is one of them, or the feedstock's own
        assert {run.core for run in with_core.operator_suite.runs} == {*dataclasses.astuple(with_core.cores), version}
        # which package.py installs under the name of the file the plan carries
        assert plans.package_name(with_core.core) == name


def test_a_core_that_is_not_this_feedstocks_python_package_is_refused_by_name() -> None:
    for name in (CONFIG.outputs.plugin.name, CONFIG.outputs.cpp.name):
        core = f"packages/{name}-1.30.0-h0_0.conda"
        with pytest.raises(pack.PackError, match=re.escape(Path(core).name)):
            pack.build_plan(REPO, core=core)


def test_a_file_cut_into_pieces_for_the_transfers_is_put_together_again_as_it_was(tmp_path: Path) -> None:
    """pack.py --speed carries onnxruntime-gpu's wheel, larger than one call carries, in pieces that fit
    the bundles; package.py puts them together on the GPU machine."""
    whole = REPO / "recipe" / "recipe.yaml"
    cut = pieces.cut(whole, tmp_path / "compare", limit=4096)
    assert len(cut) - 1 == -(-whole.stat().st_size // 4096) > 2
    assert all(piece.stat().st_size <= 4096 for piece in cut)
    packed = pack.bundles({f"compare/{piece.name}": piece for piece in cut}, limit=4096)
    stage = tmp_path / "stage"
    for bundle in packed:
        for name, path in bundle.items():
            (stage / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, stage / name)
    (joined,) = pieces.join(stage / "compare", tmp_path / "work")
    assert joined.name == whole.name and joined.read_bytes() == whole.read_bytes()


def test_pieces_put_together_wrong_are_refused(tmp_path: Path) -> None:
    whole = REPO / "recipe" / "recipe.yaml"
    cut = pieces.cut(whole, tmp_path / "pieces", limit=4096)
    cut[1].write_bytes(cut[1].read_bytes()[:-1])
    with pytest.raises(pieces.PiecesError, match=f"{whole.name}: its {len(cut) - 1} pieces put together differ"):
        pieces.join(tmp_path / "pieces", tmp_path / "whole")
    assert not (tmp_path / "whole" / whole.name).exists()
    cut[1].unlink()  # a piece lost on the way
    result = subprocess.run([sys.executable, str(DEVICE / "pieces.py"), "join", str(tmp_path / "pieces"),
                             str(tmp_path / "whole")], capture_output=True, text=True)
    assert result.returncode == 1 and "differ from the file cut" in result.stderr


def test_a_command_past_its_limit_is_stopped_with_every_process_it_started(tmp_path: Path) -> None:
    """run_in at its limit ends the command's whole session: a suite's pytest-xdist workers go with it."""
    started = tmp_path / "child.pid"
    status = steps.run_in(tmp_path, ["bash", "-c", f"sleep 300 & echo $! > {started}; wait"], tmp_path / "log",
                          cwd=tmp_path, limit=2)
    assert status == 124 and "(stopped after 2 s)" in (tmp_path / "log").read_text()
    child = int(started.read_text())
    time.sleep(0.5)
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]


def test_each_step_keeps_the_results_so_far_in_package_json(tmp_path: Path) -> None:
    """A run that run.sh stops at its limit never reaches its end: each step writes what is known as it starts
    and as it ends."""
    run = steps.Run(pack.build_plan(REPO), tmp_path, tmp_path, tmp_path, toolkit=Path("/no/toolkit"), cuda="13.0",
                    python="3.12")
    journal = tmp_path / "package.json"
    with run.step("first") as record:
        record["said"] = "before"
    with run.step("second"):
        during = json.loads(journal.read_text())
        assert during["steps"]["first"] == {"said": "before", "seconds": during["steps"]["first"]["seconds"],
                                            "ok": True}
        assert during["steps"]["second"] == {}
    assert json.loads(journal.read_text())["steps"]["second"]["ok"] is True


def test_the_suites_and_speed_rounds_share_out_the_step_time_run_sh_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STEP_DEADLINE", raising=False)
    assert package.seconds_left() == float("inf")
    monkeypatch.setenv("STEP_DEADLINE", str(int(time.time()) + 1000))
    assert 1000 - package.WRITE_UP_S - 2 <= package.seconds_left() <= 1000 - package.WRITE_UP_S


def test_wait_brings_the_runs_files_back_when_the_report_cannot_be_made(tmp_path: Path) -> None:
    top = tmp_path / "run"
    (top / "stage").mkdir(parents=True)
    pack.build_plan(REPO).write(top / "stage" / "plan.json")
    (top / "results").mkdir()
    (top / "results" / "done").touch()
    (top / "results" / "package.json").write_text("{ cut short")
    (top / "out").mkdir()
    result = run_sh(top, "wait", "0")
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(p.name for p in (top / "out").iterdir()) == ["logs.tar.gz", "package.json", "report.md"]
    assert "report.py failed" in (top / "out" / "report.md").read_text()


def test_wait_returns_the_built_package_in_pieces_that_the_docs_command_joins(tmp_path: Path) -> None:
    """run.sh's `wait` cuts each built package into pieces a call brings back (16 MiB a file);
    docs/gpu-machine.md's command puts them together here."""
    top = tmp_path / "run"
    (top / "stage").mkdir(parents=True)
    pack.build_plan(REPO).write(top / "stage" / "plan.json")
    (top / "results").mkdir()
    (top / "results" / "done").touch()
    built = top / "work" / "output" / "linux-64" / "onnxruntime-ep-cuda-1.30.0-cuda13_0.conda"
    built.parent.mkdir(parents=True)
    built.write_bytes(os.urandom(17 * 1024 * 1024))
    (top / "out").mkdir()
    result = run_sh(top, "wait", "0")
    assert result.returncode == 0, result.stdout + result.stderr
    returned = sorted(p.name for p in (top / "out").iterdir())
    assert [p for p in returned if p.startswith(built.name)] == [
        f"{built.name}.part-000", f"{built.name}.part-001", f"{built.name}.sha256"]
    assert all((top / "out" / p).stat().st_size <= 16 * 1024 * 1024 for p in returned)
    joining = re.search(r"`python3 scripts/device/pieces\.py join (\S+) (\S+)`", GPU_MACHINE_DOC.read_text())
    assert joining, "docs/gpu-machine.md gives no command that joins the pieces"
    joined = subprocess.run([sys.executable, str(DEVICE / "pieces.py"), "join", str(top / "out"),
                             str(tmp_path / "here")], capture_output=True, text=True)
    assert joined.returncode == 0, joined.stderr
    assert (tmp_path / "here" / built.name).read_bytes() == built.read_bytes()


def test_a_file_larger_than_one_transfer_is_refused_by_name(tmp_path: Path) -> None:
    big = tmp_path / "big.whl"
    big.write_bytes(b"x" * 11)
    with pytest.raises(pack.PackError, match="big.whl: 11 bytes, more than one call carries"):
        pack.bundles({"wheels/big.whl": big}, limit=10)


@pytest.mark.parametrize("purpose, overrides", [("package", pack.DEVICE_OVERRIDES),
                                                ("speed", pack.SPEED_PLUGIN_OVERRIDES)])
def test_the_device_copy_of_the_recipe_carries_each_override_and_renders_for_the_machines_cuda(
        tmp_path: Path, purpose: str, overrides: dict) -> None:
    """package.py builds from a copy of the recipe with the plan's overrides put in: rattler-build renders the
    plugin from it for the machine's CUDA (13.0, which the committed recipe skips), with each override in
    place, the source from the machine's tree, and each CMake override in the toolchain file its env names.
    The speed comparison builds the plugin with its own overrides."""
    plan = pack.build_plan(REPO, purpose)
    assert plan.purpose == purpose and plan.overrides == overrides
    src, mirror = tmp_path / "src", tmp_path / "mirror"
    recipe_dir, diff = steps.device_recipe(plan, tmp_path, src, tmp_path, configure_only=False, cuda="13.0")
    job = NEWEST_CUDA_JOB
    lists = read_yaml(job) | {"cuda_compiler_version": ["13.0"], "python": ["3.12.* *_cpython"]}
    for key in ("channel_sources", "channel_targets"):
        lists.pop(key)
    rendered = {r.name: r.recipe for r in render(recipe_dir / "recipe.yaml", lists, "linux-64", "linux-64")}
    plugin = rendered[steps.PLUGIN]
    committed = render(REPO / "recipe" / "recipe.yaml", lists, "linux-64", "linux-64")
    assert not any(r.name == steps.PLUGIN for r in committed)
    env = plugin["build"]["script"]["env"]
    context = dict((name, value) for name, value, _ in overrides.context)
    assert env["CUDA_ARCHITECTURES"] == context["cuda_architectures"]
    assert f"__cuda_arch >={context['cuda_arch_floor']}" in plugin["requirements"]["run_constraints"]
    for name, value, _ in overrides.env:
        assert env[name] == value and f"+        {name}: '{value}'" in diff
    assert plugin["source"][0]["path"] == str(src)
    toolchain = Path(env["CMAKE_TOOLCHAIN_FILE"]).read_text()
    for name, value, _ in overrides.cmake:
        assert f'set({name} "{value}" CACHE STRING "" FORCE)' in toolchain
    assert str(mirror) in toolchain
    # everything else is the committed recipe's: the other outputs render as they do from it
    assert {r.name for r in committed} == set(rendered) - {steps.PLUGIN}



@pytest.mark.parametrize(("novec", "suffix", "outputs"), [
    (False, "", {CONFIG.outputs.cpp.name, CONFIG.outputs.python.name}),
    (True, "-novec", {CONFIG.outputs.cpp.novec_name, CONFIG.outputs.python.novec_name})], ids=["vectorized", "novec"])
def test_the_cpu_packages_copy_builds_them_offline_with_the_cpu_overrides_and_leaves_the_plugin_as_committed(
        tmp_path: Path, novec: bool, suffix: str, outputs: set[str]) -> None:
    """pack.py --cpu [--novec]: the CPU outputs of the (-novec) CPU job (Python: the machine's 3.12) take the
    toolchain file with the CPU overrides and the mirror, and no cutlass tree; the plugin renders as the
    committed recipe has it."""
    plan = pack.build_plan(REPO, "cpu", novec=novec)
    assert plan.jobs[0].file == str(job_file(REPO, "linux-64", None, suffix).relative_to(REPO))
    recipe_dir, _ = steps.device_recipe(plan, tmp_path, tmp_path / "src", tmp_path, configure_only=False,
                                        cuda="13.0")
    lists = read_yaml(job_file(REPO, "linux-64", None, suffix)) | {"python": ["3.12.* *_cpython"]}
    for key in ("channel_sources", "channel_targets"):
        lists.pop(key)
    rendered = {r.name: r.recipe for r in render(recipe_dir / "recipe.yaml", lists, "linux-64", "linux-64")}
    assert set(rendered) == set(plan.outputs) == outputs
    for name in plan.outputs:
        toolchain = Path(rendered[name]["build"]["script"]["env"]["CMAKE_TOOLCHAIN_FILE"]).read_text()
        assert 'set(onnxruntime_BUILD_UNIT_TESTS "OFF" CACHE STRING "" FORCE)' in toolchain
        assert str(tmp_path / "mirror") in toolchain and "CUTLASS" not in toolchain
        assert rendered[name]["tests"], name
    cuda_lists = read_yaml(NEWEST_CUDA_JOB)
    for key in ("channel_sources", "channel_targets"):
        cuda_lists.pop(key)
    plugins = [r.recipe for r in render(recipe_dir / "recipe.yaml", cuda_lists, "linux-64", "linux-64")
               if r.name == steps.PLUGIN]
    assert plugins and all("CMAKE_TOOLCHAIN_FILE" not in plugin["build"]["script"]["env"] for plugin in plugins)


def test_a_speed_run_builds_the_plugin_with_the_patches_it_carries_after_the_recipes(tmp_path: Path) -> None:
    """pack.py --speed --patch P: the plugin measured is built with P on top of the recipe's patches, and the
    report says so; the committed recipe stays without it."""
    patch = tmp_path / "patches" / "0001-fewer-calls-a-node.patch"
    patch.parent.mkdir()
    patch.write_text("--- a/x\n+++ b/x\n")
    plan = pack.build_plan(REPO, "speed", core="packages/onnxruntime-1.30.0-py312h0_0_cpu.conda",
                           patches=(f"patches/{patch.name}",))
    recipe_dir, diff = steps.device_recipe(plan, tmp_path / "work", tmp_path / "src", tmp_path, configure_only=False,
                                           cuda="13.0")
    source = yaml.safe_load((recipe_dir / "recipe.yaml").read_text())["source"]
    committed = yaml.safe_load((REPO / "recipe" / "recipe.yaml").read_text())["source"]["patches"]
    assert source["patches"] == [*committed, *(p.name for p in MIRROR_TREE_PATCHES), patch.name]
    assert (recipe_dir / patch.name).read_text() == patch.read_text()
    assert f"+  - {patch.name}" in diff
    said = report._overrides(plan)
    assert [line for line in said if patch.name in line] == [
        f"- patch `{patch.name}`, on top of the recipe's: measured here, not in the recipe"]


def test_a_speed_run_without_an_earlier_core_measures_the_plugin_in_pypis_core_of_the_compared_version() -> None:
    """pack.py --speed alone: the stand-in channel carries PyPI's onnxruntime of the recipe's version, the one the
    compared wheel is, and the stand-ins of the run's jobs offer it to the user's environment."""
    plan = pack.build_plan(REPO, "speed")
    assert plan.core is None
    assert plan.cores.newest == plan.version and plan.compare.requirement.endswith(f"=={plan.version}")
    run = steps.Run(plan, Path("stage"), Path("work"), Path("results"), toolkit=Path("toolkit"), cuda="13.0",
                    python="3.12")
    values = {"min_core_version": plan.cores.floor, "newest_core_version": plan.cores.newest}
    offered = {s.version for job in plan.jobs for s in standins([REPO / job.file], values, overrides=run.variant(job))
               if s.name == package.STAND_IN_CORE}
    assert offered == {plan.cores.floor, plan.version}


@pytest.mark.parametrize("core", [None, "packages/onnxruntime-novec-1.30.0-py312h0_0_cpu.conda"],
                         ids=["pypi-core", "feedstock-core"])
def test_the_speed_step_installs_the_plans_core_and_asks_its_hook_only_of_this_feedstocks(
        core: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """package.speed, whose install and measurement need the GPU machine: PyPI's core of the recipe's version from
    the stand-in channel, without user_check.py (that core has no hook that registers the plugin), or an earlier
    run's core from its own channel, with it."""
    plan = pack.build_plan(REPO, "speed", core=core)
    run = steps.Run(plan, tmp_path / "stage", tmp_path / "work", tmp_path / "results", toolkit=tmp_path / "toolkit",
                    cuda="13.0", python="3.12")
    run.results_dir.mkdir(parents=True)
    plugin_channel, earlier, asked = tmp_path / "plugin-channel", tmp_path / "earlier-core", []
    monkeypatch.setattr(package, "plugin_package", lambda _run: (None, plugin_channel))
    monkeypatch.setattr(steps.Run, "earlier", lambda _self, key: earlier)
    monkeypatch.setattr(package, "user_check", lambda prefix, _results: asked.append(prefix) or 0)
    monkeypatch.setattr(package, "compare_speed", lambda prefix, _run: {"ok": True})

    def installed(_run, channels: list[Path], specs: list[str], uses) -> Path:
        installed.called = (channels, specs, uses(tmp_path / "env", {}))
        return tmp_path / "env"

    monkeypatch.setattr(package, "installed", installed)
    package.speed(run)
    channels, specs, runs = installed.called
    if core is None:
        assert (channels, specs) == ([plugin_channel], [f"{package.STAND_IN_CORE} =={plan.version}"])
        assert runs == {} and asked == []
    else:
        assert (channels, specs) == ([plugin_channel, earlier], ["onnxruntime-novec"])
        assert runs == {"user-python": 0} and asked == [tmp_path / "env"]


@pytest.mark.parametrize("arguments", [["--patch", "p.patch"], ["--cpu", "--patch", "p.patch"],
                                       ["--speed", "--core", "x.conda", "--package", "y.conda", "--patch", "p.patch"]],
                         ids=["package", "cpu", "speed-of-a-built-plugin"])
def test_patch_goes_with_a_speed_run_that_builds_the_plugin(arguments: list[str],
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        pack.main(arguments)
    assert stopped.value.code == 2
    assert "--patch builds the plugin a speed run measures with a patch" in capsys.readouterr().err


def test_two_patches_of_one_name_are_refused_as_one_would_replace_the_other(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    core, patches = tmp_path / "onnxruntime-1.30.0-py312h0_0_cpu.conda", [tmp_path / "a" / "p.patch",
                                                                          tmp_path / "b" / "p.patch"]
    for path in (core, *patches):
        path.parent.mkdir(exist_ok=True)
        path.write_text("x")
    arguments = ["--speed", "--core", str(core), "--dest", str(tmp_path / "out")]
    assert pack.main([*arguments, *(a for p in patches for a in ("--patch", str(p)))]) == 2
    assert f"pack: --patch: two patches named alike: {patches[0]} {patches[1]}" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("purpose", [[], ["--cost"], ["--speed", "--core", "x.conda"]],
                         ids=["package", "cost", "speed"])
def test_novec_goes_with_the_cpu_packages_alone(purpose: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        pack.main(["--novec", *purpose])
    assert stopped.value.code == 2
    assert "--novec builds the -novec CPU packages: it goes with --cpu" in capsys.readouterr().err


@pytest.mark.slow
def test_rattler_build_configures_onnxruntime_cpp_here_in_its_environment_of_stand_ins_with_this_machines_files(
        tmp_path: Path) -> None:
    """package.py's build path, which the GPU machine runs, on this machine: the CPU job's stand-ins that
    rattler-build's solver picks for onnxruntime-cpp, built with this machine's compilers, Python, and the
    CMake, ninja and protoc that pack.py gathers as contents, then `rattler-build build` of the device copy
    of the recipe with the build script stopped at its build step (configure only)."""
    mirror = mirror_with_sources()
    job = job_file(REPO, "linux-64", None)
    # this machine's Python, as the GPU machine's run puts its own in the variant
    overrides = {"python": f"{sys.version_info.major}.{sys.version_info.minor}.* *_cpython"}
    chosen = standins([job], {}, overrides=overrides)
    metadata = tmp_path / "metadata"
    build_channel(chosen, metadata)
    rendered = render_with_solve(REPO / "recipe" / "recipe.yaml", variant_file(job, tmp_path, overrides), metadata)
    (cpp,) = [entry for entry in rendered if entry["recipe"]["package"]["name"] == "onnxruntime-cpp"]
    solved = {record["name"] for section in ("build", "host")
              for record in (cpp["finalized_dependencies"].get(section) or {}).get("resolved", [])}
    assert {"gcc_linux-64", "gxx_linux-64", "cmake", "ninja", "libprotobuf"} <= solved
    plan = dataclasses.replace(pack.build_plan(REPO, "cpu"), outputs=("onnxruntime-cpp",))
    (tmp_path / "gathered").mkdir()
    plan, gathered = pack.gather(mirror, plan, tmp_path / "gathered")
    stage = tmp_path / "stage"
    for name, path in gathered.items():
        (stage / name).parent.mkdir(parents=True, exist_ok=True)
        (stage / name).symlink_to(path)
    work = tmp_path / "work"
    (work / "results").mkdir(parents=True)
    roots = machine_roots(stage / "wheels", sorted(stage.glob("debs/*.deb")), work)
    build_channel([s for s in chosen if s.name in solved], work / "channel", roots)
    # the CPU job's variant with this machine's Python (Run.variant), as `overrides` above
    run = steps.Run(plan, stage, work, work / "results", toolkit=Path("/no/toolkit"), cuda="13.0",
                    python=f"{sys.version_info.major}.{sys.version_info.minor}")
    assert plan.jobs[0] == plans.Job(str(job.relative_to(REPO))) and run.variant(plan.jobs[0]) == overrides
    steps.build_outputs(run, configure_only=True)
    assert run.results["steps"]["build onnxruntime-cpp"]["ok"], run.results
    # the script reached its build step: configured, with ninja's build file written, and said what it builds
    assert (work / "build_targets.txt").read_text().split()
    build_dir = work / "output" / "bld" / "rattler-build_onnxruntime-cpp" / "work" / "build-cpp"
    assert (build_dir / "build.ninja").is_file()
    cache = (build_dir / "CMakeCache.txt").read_text()
    # the compiler stand-in's program, under conda's name, in rattler-build's build environment
    assert re.search(r"^CMAKE_CXX_COMPILER:\w+=\S+/build_env/bin/x86_64-conda-linux-gnu-c\+\+$", cache, re.M), cache
    # the compilers' activation roots CMake's searches in the environments, as conda-forge's does: this
    # machine's zlib, which a search of the system's folders would find, stays unfound
    assert "ZLIB_INCLUDE_DIR:PATH=ZLIB_INCLUDE_DIR-NOTFOUND" in cache


def test_run_sh_passes_shellcheck() -> None:
    result = subprocess.run([str(shellcheck()), "--external-sources", "--source-path=SCRIPTDIR", "run.sh"],
                            capture_output=True, text=True, cwd=DEVICE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_staging_copies_a_bundle_and_start_needs_the_plan(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle-2" / "mirror"
    bundle.mkdir(parents=True)
    (bundle / "archive.zip").write_text("zip")
    assert run_sh(tmp_path / "run", "stage", str(tmp_path / "bundle-2")).returncode == 0
    assert (tmp_path / "run" / "stage" / "mirror" / "archive.zip").read_text() == "zip"
    result = run_sh(tmp_path / "run", "start")
    assert result.returncode == 2
    assert f"{tmp_path / 'run' / 'stage' / 'plan.json'} is missing: stage bundle-1 first" in result.stderr


def test_start_leaves_a_pipeline_waiting_for_its_inputs_and_refuses_a_second_one(tmp_path: Path) -> None:
    top = tmp_path / "run"
    bundle = tmp_path / "bundle-1"
    bundle.mkdir()
    dataclasses.replace(pack.build_plan(REPO), inputs=("sources/not-staged-yet.tar.zst",)).write(bundle / "plan.json")
    assert run_sh(top, "stage", str(bundle)).returncode == 0
    try:
        assert run_sh(top, "start").returncode == 0
        deadline = time.monotonic() + 30
        # the missing input is named as soon as the pipeline starts waiting for it
        while "waiting for 1 inputs, the first sources/not-staged-yet.tar.zst" not in \
                (top / "results" / "progress.txt").read_text():
            assert time.monotonic() < deadline, (top / "results" / "progress.txt").read_text()
            time.sleep(0.5)
        second = run_sh(top, "start")
        assert second.returncode == 2
        assert f"a pipeline is running in {top} already" in second.stderr
    finally:
        subprocess.run(["pkill", "-f", f"{top}/repo/scripts/device/run.sh pipeline"], check=False)


@pytest.mark.parametrize("args", [["stage", "/no/such/bundle"], ["wait", "soon"], ["step", "x", "y", "true"],
                                  ["bogus"], []], ids=lambda args: " ".join(args) or "nothing")
def test_bad_arguments_get_the_usage_and_exit_2(tmp_path: Path, args: list[str]) -> None:
    result = run_sh(tmp_path, *args)
    assert result.returncode == 2
    assert result.stderr.startswith("usage: ")


def test_a_step_records_its_command_exit_status(tmp_path: Path) -> None:
    assert run_sh(tmp_path, "step", "passes", "30", "true").returncode == 0
    assert run_sh(tmp_path, "step", "fails", "30", "false").returncode == 0
    assert [row[:2] for row in ended_steps(tmp_path)] == [["passes", "0"], ["fails", "1"]]


def test_a_step_log_stamps_each_line_with_the_seconds_since_the_step_started(tmp_path: Path) -> None:
    script = "import time\nprint('first')\ntime.sleep(2)\nprint('second', end='')"
    assert run_sh(tmp_path, "step", "slow", "30", sys.executable, "-c", script).returncode == 0
    first, second = (tmp_path / "results" / "slow.log").read_text().splitlines()
    assert first.endswith(" first") and int(first[1:first.index("s ")]) <= 1
    assert second.endswith(" second") and int(second[1:second.index("s ")]) >= 2
    assert ended_steps(tmp_path)[0][:2] == ["slow", "0"]


def test_a_step_past_its_limit_is_stopped_with_its_python_stack(tmp_path: Path) -> None:
    started = time.monotonic()
    result = run_sh(tmp_path, "step", "hangs", "2", sys.executable, "-c", "import time\ntime.sleep(300)")
    assert result.returncode == 0 and time.monotonic() - started < 60
    assert ended_steps(tmp_path)[0][:2] == ["hangs", "124"]
    log = (tmp_path / "results" / "hangs.log").read_text()
    assert "Fatal Python error: Aborted" in log and 'File "<string>", line 2' in log
    assert log.rstrip().endswith("hangs: timed out after 2 s")


CASE_BODIES = {"passed": "pass", "failed": "print('FAIL (the core said no)'); assert 1 == 2, 'wrong'",
               "skipped": "raise unittest.SkipTest('no')", "hangs": "time.sleep(300)",
               # what a case of upstream's suite finds in its environment
               "finds the plugin": "assert os.environ['ORT_CUDA_PLUGIN_PATH'].endswith('/libplugin.so') and "
                                   "os.environ['ORT_TEST_CUDA_PLUGIN_EP'] == '1' and "
                                   "os.environ['ONNXRUNTIME_DISABLE_EP_AUTOREGISTRATION'] == '1'",
               "has no cudnn": "assert os.environ.get('ORT_TEST_CUDA_PLUGIN_NO_CUDNN') == '1'",
               "imports the machine's torch": "import machine_torch"}


def run_suite(folder: Path, name: str, cases: dict[str, str], limit: int = 3, workers: int = 1,
              suite_run: plans.SuiteRun | None = None, machine_site: Path | None = None) -> Path:
    """CASES (name -> one of CASE_BODIES) as one unittest class, run with package.py's command for upstream's
    operator suite in a bare environment (run_in), with a plugin library `libplugin.so`, as `suite_run` says,
    `limit` s a case; returns the log case_log.py wrote."""
    folder.mkdir(parents=True, exist_ok=True)
    suite = folder / "test_cuda_plugin_ep.py"
    suite.write_text("import os, time, unittest\nclass TestCudaPluginEP(unittest.TestCase):\n" + "".join(
        f"    def {case}(self):\n        {CASE_BODIES[outcome]}\n" for case, outcome in cases.items()))
    # no wheels: this machine's Python has pytest and its plugins
    site = package.suite_site(folder / "site", [], str(machine_site or folder / "no-machine-site"))
    log = folder / f"{name}.cases"
    argv, env = package.suite_command(suite, suite_run or plans.SuiteRun(name, "1.0"), Path(sys.executable),
                                      folder / "libplugin.so", site, log, case_limit=limit, workers=workers)
    assert steps.run_in(folder / "env", argv, folder / f"{name}.log", env=env, cwd=folder, limit=240) in (0, 1)
    return log


def test_the_case_log_keeps_each_failure_and_a_hung_case_stacks_and_the_suite_goes_on(tmp_path: Path) -> None:
    log = run_suite(tmp_path, "operators", {"test_a": "failed", "test_b": "hangs", "test_c": "passed"}, limit=2)

    assert report.case_outcomes(log) == {
        "TestCudaPluginEP.test_a": ("failed", "AssertionError: wrong"),
        "TestCudaPluginEP.test_b": ("failed", "still running after 2 s"),
        "TestCudaPluginEP.test_c": ("passed", "")}
    text = log.read_text()
    assert "    FAIL (the core said no)" in text  # what the failing case printed
    assert 'test_cuda_plugin_ep.py", line 6 in test_b' in text  # the hung case's Python stack


def test_cases_stuck_in_two_workers_at_once_each_keep_their_own_stacks(tmp_path: Path) -> None:
    log = run_suite(tmp_path, "operators", {"test_a": "hangs", "test_b": "hangs"}, limit=2, workers=2)

    # each case's header, then its stacks, up to the next case's line
    blocks = re.split(r"^(?=\S*test_cuda_plugin_ep\.py::)", log.read_text(), flags=re.MULTILINE)
    stuck = {re.search(r"::(test_\w+) is still running", block)[1]: block for block in blocks
             if " is still running after 2 s" in block}
    assert set(stuck) == {"test_a", "test_b"}
    for case, block in stuck.items():
        assert re.findall(r'test_cuda_plugin_ep\.py", line \d+ in (test_\w+)', block) == [case]


def test_the_suite_command_gives_the_cases_the_plugin_the_cudnn_switch_and_the_machines_torch(tmp_path: Path) -> None:
    """package.py's command for upstream's suite: the cases find the plugin's library to register, this feedstock's
    auto-registration off, upstream's switch that hides cuDNN in the run that hides it alone, and the machine's own
    packages (torch) after the environment's."""
    machine = tmp_path / "machine-site"
    machine.mkdir()
    (machine / "machine_torch.py").write_text("")
    cases = {"test_plugin": "finds the plugin", "test_cudnn": "has no cudnn",
             "test_torch": "imports the machine's torch"}
    with_cudnn = run_suite(tmp_path / "with", "with", cases, suite_run=plans.SuiteRun("with", "1.32.0"),
                           machine_site=machine)
    without = run_suite(tmp_path / "without", "without", cases,
                        suite_run=plans.SuiteRun("without", "1.32.0", cudnn=False), machine_site=machine)

    assert {case: outcome for case, (outcome, _) in report.case_outcomes(with_cudnn).items()} == {
        "TestCudaPluginEP.test_plugin": "passed", "TestCudaPluginEP.test_cudnn": "failed",
        "TestCudaPluginEP.test_torch": "passed"}
    assert {outcome for outcome, _ in report.case_outcomes(without).values()} == {"passed"}


def test_the_report_tabulates_the_operator_suite_per_core_and_lists_the_overrides_once(tmp_path: Path) -> None:
    plan = pack.build_plan(REPO, core="packages/onnxruntime-1.30.0-py312h0_0_cpu.conda")
    floor, feedstock, newest, hidden = plan.operator_suite.runs
    (tmp_path / "stage").mkdir()
    plan.write(tmp_path / "stage" / "plan.json")
    suite = tmp_path / "work" / "suite" / plan.operator_suite.path
    suite.parent.mkdir(parents=True)
    suite.write_text('def make(): return "com.microsoft"\n'
                     "class T:\n    def test_contrib(self): make()\n    def test_plain(self): pass\n")
    results = tmp_path / "results"
    run_suite(results, floor.name, {"test_contrib": "failed", "test_plain": "passed"})
    run_suite(results, newest.name, {"test_contrib": "passed", "test_plain": "skipped"})
    (results / "steps.tsv").write_text("binary\t0\t1\n")
    (results / "binary.log").write_text("+0s ok: exports CreateEpFactories, ReleaseEpFactory\n")
    (results / "progress.txt").write_text("10:00:00 binary: started, limit 120 s\n10:00:01 binary: exit 0 after 1 s\n"
                                          "10:00:01 package: started, limit 1700 s\n")
    (results / "package.json").write_text(json.dumps({"cuda": "13.0", "python": "3.12", "steps": {
        "channel": {"ok": True, "seconds": 80.0}, "operator suites": {"ok": False, "seconds": 420.0,
                                                                      "error": "ValueError: no environment"}}}))

    assert report.main([str(tmp_path)]) == 0

    text = (results / "report.md").read_text()
    for name, value, reason in [*plan.overrides.context, *plan.overrides.env, *plan.overrides.cmake]:
        assert text.count(f"`{name}` = `{value}`: {reason}") == 1
    assert "| binary | 0 | 1 | ok: exports CreateEpFactories, ReleaseEpFactory |" in text
    assert "| package | running | | (no log) |" in text  # started, not ended when the report was made
    assert "| operator suites | False | 420.0 |" in text and "operator suites: ValueError: no environment" in text
    assert f"| {floor.name} | {floor.core} (PyPI) | yes | 1 | 1 | 0 | 0 of 1 |" in text
    assert f"| {feedstock.name} | {feedstock.core} (this feedstock) | yes | not run | | | |" in text
    assert f"| {newest.name} | {newest.core} (PyPI) | yes | 1 | 0 | 1 | 1 of 1 |" in text
    assert f"| {hidden.name} | {hidden.core} (PyPI) | hidden | not run | | | |" in text
    assert "Cases whose outcome differs between runs: 2 of 2" in text
    assert f"- TestCudaPluginEP.test_contrib: {floor.name}: failed; {newest.name}: passed" in text
    assert f"Failing in {floor.name}:\n\n- TestCudaPluginEP.test_contrib: AssertionError: wrong" in text
    assert f"Failing in {newest.name}" not in text


def test_a_configure_only_copy_stops_the_build_script_at_its_build_step_and_drops_the_empty_packages_tests(
        tmp_path: Path) -> None:
    """A cost run builds with --configure-only: the script writes the build step's targets and stops, so the
    package is empty, and the tests that would fail on it (the strict contents test first) are not in the copy."""
    plan = pack.build_plan(REPO)
    job = NEWEST_CUDA_JOB
    lists = read_yaml(job) | {"cuda_compiler_version": ["13.0"], "python": ["3.12.* *_cpython"]}
    for key in ("channel_sources", "channel_targets"):
        lists.pop(key)
    plugins = {}
    for configure_only in (False, True):
        recipe_dir, _ = steps.device_recipe(plan, tmp_path / str(configure_only), tmp_path / "src", tmp_path,
                                            configure_only=configure_only, cuda="13.0")
        plugins[configure_only] = next(r.recipe for r in render(recipe_dir / "recipe.yaml", lists, "linux-64",
                                                                "linux-64") if r.name == steps.PLUGIN)
    assert plugins[False].get("tests") and not plugins[True].get("tests")
    assert "REHEARSAL_TARGETS_FILE" not in plugins[False]["build"]["script"]["env"]
    targets = plugins[True]["build"]["script"]["env"]["REHEARSAL_TARGETS_FILE"]
    assert targets == str(tmp_path / "True" / "build_targets.txt")


IOBINDING_CHECK = """
import importlib.util, sys
import onnxruntime as ort

def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

# the tree's Python layer over the PyPI core of the same version
ort.InferenceSession = load("onnxruntime.capi.onnxruntime_inference_collection", sys.argv[1]).InferenceSession
load("test_python_cpu", sys.argv[2]).check_iobinding_names_nvidia_for_cuda()
"""


@pytest.mark.network
def test_the_mirror_trees_iobinding_names_nvidia_once_rattler_build_has_applied_its_patch(tmp_path: Path) -> None:
    """The package run builds from the mirror's tree, which is older than the recipe's tarball: rattler-build
    applies MIRROR_TREE_PATCHES to it, without which the recipe's IOBinding check fails."""
    if mirror_folder(os.environ) is None:
        pytest.skip("no mirror: a downloaded source is the tag's tarball, which has the tag's IOBinding")
    member = Path("onnxruntime", "python", "onnxruntime_inference_collection.py")
    tree = upstream_source.unpack(tmp_path / "src", member.as_posix())
    recipe = tmp_path / "recipe"
    recipe.mkdir()
    for patch in MIRROR_TREE_PATCHES:
        shutil.copyfile(patch, recipe / patch.name)
    (recipe / "recipe.yaml").write_text(yaml.safe_dump({
        "package": {"name": "tree", "version": "1"}, "build": {"script": "true"},
        "source": {"path": str(tree), "patches": [patch.name for patch in MIRROR_TREE_PATCHES]}}))
    channel = tmp_path / "channel"
    for subdir in ("noarch", BUILD_PLATFORM):
        (channel / subdir).mkdir(parents=True)
        (channel / subdir / "repodata.json").write_text(json.dumps({"info": {"subdir": subdir}, "packages": {}}))
    [variant] = Stage0Recipe.from_file(recipe / "recipe.yaml").render(VariantConfig(), RenderConfig())
    patched = DebugSession.create(variant, output_dir=tmp_path / "out", channels=[channel.as_uri()]).work_dir / member
    version = load_bot_fields(REPO).version
    python = core_env(version)
    check = REPO / "recipe" / "test_python_cpu.py"

    before = run(python, "-c", IOBINDING_CHECK, str(tree / member), str(check))
    after = run(python, "-c", IOBINDING_CHECK, str(patched), str(check))

    assert before.returncode == 1 and "not NVIDIA's 0x10de" in before.stderr, before.stdout + before.stderr
    assert after.returncode == 0, after.stdout + after.stderr
    assert "is NVIDIA's (0x10de)" in after.stdout


def test_a_speed_run_measures_graphs_profiles_nsys_and_samples_after_its_first_round_and_rounds_while_time_is_left(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The speed step's schedule on the GPU machine, whose commands cannot run here: every command, `measure`,
    nsys, py-spy or the table, stands in as one that takes 100 s of a clock the step's deadline is read from (and
    writes its --out or --output file). After the first round come the CUDA graph runs, the profiles, nsys (in the
    toolkit) and py-spy (in the bundles), then more rounds while one fits with half a round to spare; the table is
    made from the rounds that ran, no command is given more time than the step has left, and the report lists every
    run with its exit status and each side's samples summed."""
    plan = pack.build_plan(REPO, "speed", core="packages/onnxruntime-1.30.0-py312h0_0_cpu.conda")
    run = steps.Run(plan, tmp_path / "stage", tmp_path / "work", tmp_path / "results", toolkit=tmp_path / "toolkit",
                    cuda="13.0", python="3.12")
    for folder in (run.stage, run.results_dir, run.toolkit / "bin", run.work / "models"):
        folder.mkdir(parents=True)
    (run.toolkit / "bin" / "nsys").touch()
    (run.work / "models" / package.CHAIN_FILE).touch()
    wheel = tmp_path / "onnxruntime_gpu-1.30.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("onnxruntime/__init__.py", "")
    (run.stage / plan.compare.folder).mkdir(parents=True)
    pieces.cut(wheel, run.stage / plan.compare.folder, 1 << 20)
    (run.stage / "profiler").mkdir()
    with zipfile.ZipFile(run.stage / "profiler" / "py_spy-0.4.3-py2.py3-none-manylinux1_x86_64.whl", "w") as archive:
        archive.writestr("py_spy-0.4.3.data/scripts/py-spy", "")
    plan.write(run.stage / "plan.json")
    # the plugin's manifest in the user's environment, whose library the plugin's side registers
    manifest = tmp_path / "env" / manifest_path(steps.PLUGIN, "unix")
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"library": "lib/libplugin.so"}))
    clock, deadline, calls, summed, registered, sampled_out = [0.0], 1500.0, [], [], {}, ["{}"]

    def command(prefix: Path, argv: list[str], log: Path, limit: int = 600, **_) -> int:
        assert limit <= max(1, deadline - clock[0] - package.WRITE_UP_S)
        kind = next(a for a in argv if a in ("export", "record", "measure", "table", "profile", "stats", "hot"))
        calls.append(f"{kind} {log.stem}")
        if kind in ("measure", "record", "profile"):
            registered[log.stem] = argv[argv.index("--library") + 1] if "--library" in argv else None
        if kind == "hot":
            summed.append(Path(argv[-1]).name)
        for option in ("--out", "--output"):
            if option in argv:
                Path(argv[argv.index(option) + 1]).write_text(sampled_out[0] if kind == "record" else "{}")
        log.write_text(f"{kind} ran\n")
        clock[0] += 100
        return 0

    monkeypatch.setattr(package, "run_in", command)
    monkeypatch.setattr(package, "time", type("Clock", (), {"monotonic": staticmethod(lambda: clock[0])}))
    monkeypatch.setattr(package, "seconds_left", lambda: deadline - clock[0] - package.WRITE_UP_S)

    with run.step("speed") as record:
        record |= package.compare_speed(tmp_path / "env", run)

    assert calls == ["export speed-export", "measure speed-plugin-1", "measure speed-compared-1",
                     "measure speed-plugin-graph", "measure speed-plugin-profile",
                     "measure speed-compared-graph", "measure speed-compared-profile",
                     "profile speed-plugin-chain-nsys", "stats speed-plugin-chain-stats",
                     "profile speed-compared-chain-nsys", "stats speed-compared-chain-stats",
                     "record speed-plugin-chain-py-spy", "hot speed-plugin-chain-hot",
                     "record speed-compared-chain-py-spy", "hot speed-compared-chain-hot",
                     # 1500 - 1500 (clock) - 60 < 300: no second round
                     "table speed"]
    assert record["ok"] and set(record["findings"]) == {
        "speed-plugin-graph", "speed-compared-graph", "speed-plugin-chain-nsys", "speed-plugin-chain-stats",
        "speed-compared-chain-nsys", "speed-compared-chain-stats", "speed-plugin-chain-py-spy",
        "speed-plugin-chain-hot", "speed-compared-chain-py-spy", "speed-compared-chain-hot"}
    # the plugin's side registers the manifest's library where its core has not, onnxruntime-gpu's side nothing
    assert registered == {name: str(tmp_path / "env" / "lib" / "libplugin.so") if "plugin" in name else None
                          for name in registered} and len(registered) == 10
    # each side's samples summed at its first round's median, which no sampler slowed
    assert set(record["hot"]) == {"speed-plugin", "speed-compared"}
    assert summed == ["speed-plugin-1.json", "speed-compared-1.json"]
    assert report.main([str(tmp_path)]) == 0
    text = (run.results_dir / "report.md").read_text()
    for name in [*record["runs"], *record["findings"]]:
        if name != "speed-table" and not name.endswith("-chain-hot"):
            assert f"{name}: exit 0\n```\n" in text, name
    assert text.count("hot ran\n") == 2  # each side's summary once, under its heading
    for side in record["hot"]:
        assert f"### Where {side}'s host time goes in a run of the chain (py-spy)\n\nhot ran\n" in text

    # a profiler that cannot be unpacked is a finding, and the rounds and the table go on
    wheel = next((run.stage / "profiler").glob("*.whl"))
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("py_spy-0.4.3.dist-info/METADATA", "")
    clock[0] = 0.0
    broken = package.compare_speed(tmp_path / "env", run)
    assert broken["findings"]["chain-py-spy"] == -1 and broken["ok"] and not broken["hot"]
    assert "ValueError" in (run.results_dir / "chain-py-spy.log").read_text()
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("py_spy-0.4.3.data/scripts/py-spy", "")

    # py-spy exits 0 when the sampled case fails or overruns: its `measure` result says so, and that is a finding
    assert {name: record["findings"][name] for name in record["findings"] if name.endswith("-py-spy")} == {
        "speed-plugin-chain-py-spy": 0, "speed-compared-chain-py-spy": 0}
    sampled_out[0] = json.dumps({"cases": [{"model": "add-chain-500", "error": "exit -9: (stopped after 60 s)"}]})
    clock[0] = 0.0
    overran = package.compare_speed(tmp_path / "env", run)
    assert overran["ok"] and overran["findings"]["speed-compared-chain-py-spy"] == 1
    assert overran["findings"]["speed-plugin-chain-py-spy"] == 1
    sampled_out[0] = "{}"

    calls.clear()
    clock[0], deadline = 0.0, 2400.0
    package.compare_speed(tmp_path / "env", run)
    # 2400 - 1500 - 60 = 840 s left after the first round's extras: rounds 2 to 4, the sides in alternation
    assert calls[15:] == ["measure speed-compared-2", "measure speed-plugin-2", "measure speed-plugin-3",
                          "measure speed-compared-3", "measure speed-compared-4", "measure speed-plugin-4",
                          "table speed"]
