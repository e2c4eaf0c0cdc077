"""The measuring half of scripts/buildcost.py: sorting nvcc units into kinds, choosing the sample, and
compiling it one piece per GPU target with CUDA 13.0's real nvcc from PyPI."""

from __future__ import annotations

import dataclasses
import json
import platform
import re
import shlex
import shutil
import time
from pathlib import Path

import pytest

import buildcost
from feedstock.architectures import NVCC_RELEASES
from feedstock.cuda_targets import nvcc_targets
from predict_build_cost import HOST_FILE, host_cost, measurements_file
from support.wheels import unpacked_wheel

# NVIDIA's wheels that together make a toolkit nvcc compiles with: each unpacks to nvidia/cu13/{bin,include,lib,nvvm}.
# nvvm and crt come with nvcc, at its release
TOOLKIT_WHEELS = [*(f"{name}=={NVCC_RELEASES['13.0']}"
                    for name in ("nvidia-cuda-nvcc", "nvidia-nvvm", "nvidia-cuda-crt")),
                  "nvidia-cuda-runtime==13.0.96"]
TARGETS = ["sm_75", "sm_90a", "compute_121"]  # two SASS targets and one PTX, as the recipe's list mixes them
GOOD = """
__global__ void scale(float* x, float a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a; }
void launch(float* x, float a, int n) { scale<<<(n + 255) / 256, 256>>>(x, a, n); }
"""
BROKEN = "__global__ void fill(float* x) { x[0] = undefined_thing; }\n"
FATBIN_MAGIC = bytes.fromhex("50ed55ba")  # 0xBA55ED50, little-endian


def generate_code(target: str) -> str:
    return f'"--generate-code=arch=compute_{target.split("_", 1)[1]},code=[{target}]"'


def onnxruntime_command(nvcc: str, gcc: str, source: str, targets: list[str]) -> str:
    """An nvcc command as ONNX Runtime's build writes it into the compile database."""
    return (f"{shlex.quote(nvcc)} -ccbin {shlex.quote(gcc)} -forward-unknown-to-host-compiler -Xfatbin=-compress-all "
            f"-compress-mode=size -O3 {' '.join(map(generate_code, targets))} -Xcompiler=-fPIC --threads 1 "
            f"-MD -MT x.o -MF x.o.d -x cu -c {shlex.quote(source)} -o x.o")


def entry(build: Path, source: Path, command: str) -> dict[str, str]:
    return {"directory": str(build), "file": str(source), "command": command, "output": "x.o"}


# --- sorting and sampling

def test_each_unit_takes_the_first_kind_whose_pattern_matches_its_path_and_its_commands_targets(tmp_path: Path) -> None:
    """classify keeps the .cu entries only, gives each the first kind of KINDS its path matches (where a later,
    broader kind matches too), reads its GPU targets in the command's order, and lists the units by path."""
    root = tmp_path / "src"
    expected = {  # path: (its kind, a later kind that matches it as well)
        "onnxruntime/contrib_ops/cuda/llm/moe_gemm/launchers/moe_gemm_tma_ws_sm90_fp4_x.generated.cu":
            ("SM90 FP4 MoE GEMM", "SM90 MoE GEMM"),
        "onnxruntime/contrib_ops/cuda/llm/moe_gemm/launchers/moe_gemm_tma_ws_sm90_bf16.generated.cu":
            ("SM90 MoE GEMM", "MoE kernels"),
        "onnxruntime/contrib_ops/cuda/llm/fpA_intB_gemm/launchers/fpA_intB_launcher_1.generated.cu":
            ("fpA_intB GEMM launchers", "fpA_intB GEMM and GEMV"),
        "onnxruntime/contrib_ops/cuda/bert/flash_attention/flash_fwd_hdim128_fp16_sm80.cu":
            ("flash attention", "contrib bert"),
        "onnxruntime/core/providers/cuda/tensor/cast_op.cu": ("core providers", None),
    }
    patterns = dict(buildcost.KINDS)
    for path, (_, broader) in expected.items():
        assert broader is None or re.search(patterns[broader], path), f"{broader} should match {path} too"
    targets = {path: TARGETS[i % 3:] + TARGETS[:i % 3] for i, path in enumerate(expected)}  # differing orders
    compiles = [entry(tmp_path, root / path, onnxruntime_command("nvcc", "gcc", str(root / path), targets[path]))
                for path in reversed(expected)]
    host = root / "onnxruntime/core/providers/cuda/cuda_execution_provider.cc"
    compiles.append(entry(tmp_path, host, f"g++ -c {host} -o x.o"))

    units = buildcost.classify(compiles, root)

    assert [u.source for u in units] == sorted(expected)
    assert {u.source: u.kind for u in units} == {path: kind for path, (kind, _) in expected.items()}
    assert {u.source: u.targets for u in units} == targets


def test_a_unit_of_no_known_kind_stops_classify_and_names_its_path(tmp_path: Path) -> None:
    """A new family of .cu files upstream is not priced as some other kind: classify refuses it by path."""
    path = "onnxruntime/core/providers/webgpu/unknown_kernels.cu"
    compiles = [entry(tmp_path, tmp_path / path, onnxruntime_command("nvcc", "gcc", path, ["sm_80"]))]
    with pytest.raises(buildcost.CostError, match=re.escape(path)):
        buildcost.classify(compiles, tmp_path)


def test_the_sample_takes_one_unit_in_sample_every_at_least_sample_at_least_spread_over_each_kind() -> None:
    """choose_sample takes one unit in SAMPLE_EVERY of a large kind, SAMPLE_AT_LEAST of a middling one and all
    of a small one; the picks are distinct, the large kind's i-th pick lies in its i-th stretch of SAMPLE_EVERY
    units, and the first round holds one unit of every kind."""
    every, least = buildcost.SAMPLE_EVERY, buildcost.SAMPLE_AT_LEAST
    sizes = {"large": 10 * every, "middling": least + 2, "small": least - 1}
    wanted = {"large": 10, "middling": least, "small": least - 1}
    units = sorted((buildcost.Unit(f"{kind}/{i:04d}.cu", kind, ["sm_80"]) for kind, n in sizes.items()
                    for i in range(n)), key=lambda u: u.source)

    sample = buildcost.choose_sample(units)

    assert {kind: sum(u.kind == kind for u in sample) for kind in sizes} == wanted
    assert len({u.source for u in sample}) == len(sample)
    large = sorted(int(Path(u.source).stem) for u in sample if u.kind == "large")
    assert [index // every for index in large] == list(range(10))
    assert {u.kind for u in sample[:len(sizes)]} == set(sizes)


def test_a_piece_keeps_its_own_target_and_drops_the_dependency_file_and_output_flags() -> None:
    """piece_command keeps the unit's command but for the other targets' --generate-code, -MD/-MT/-MF and
    its -o; the first target still compiles with -c, every other with -fatbin; the piece's output and
    nvcc's --time file come last."""
    command = onnxruntime_command("nvcc", "gcc", "k.cu", TARGETS)
    words = shlex.split(command)
    others = {shlex.split(generate_code(t))[0] for t in TARGETS if t != "sm_90a"}
    dropped = {"-MD", "-MT", "x.o", "-MF", "x.o.d", "-o"} | others
    for first, compile_flag in ((True, "-c"), (False, "-fatbin")):
        made = buildcost.piece_command(command, "sm_90a", first, Path("/out/k.fatbin"), Path("/out/k.csv"))
        kept = [compile_flag if w == "-c" else w for w in words if w not in dropped]
        assert made == [*kept, "-o", "/out/k.fatbin", "--time", "/out/k.csv"]
        assert [w for w in made if w.startswith("--generate-code")] == [shlex.split(generate_code("sm_90a"))[0]]


# --- measuring with the real nvcc

@pytest.fixture(scope="session")
def nvcc(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """CUDA 13.0's nvcc: NVIDIA's PyPI wheels for it merged into one toolkit folder."""
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        pytest.skip("the nvcc wheels used here are for linux x86_64")
    tree = tmp_path_factory.mktemp("cuda-13.0")
    for requirement in TOOLKIT_WHEELS:  # skips when the package index offers nothing
        shutil.copytree(unpacked_wheel(requirement, "manylinux2014_x86_64") / "nvidia" / "cu13", tree,
                        dirs_exist_ok=True)
    for program in [*(tree / "bin").iterdir(), *(tree / "nvvm" / "bin").iterdir()]:
        if program.is_file():
            program.chmod(0o755)  # zipfile drops the executable bit
    return tree / "bin" / "nvcc"


@pytest.fixture(scope="module")
def measured(nvcc: Path, gcc: str, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A compiling unit and a broken one, measured in a build folder of their own."""
    top = tmp_path_factory.mktemp("measure")
    root, build, scratch = top / "src", top / "build", top / "scratch"
    build.mkdir()
    compiles = []
    for path, text in (("onnxruntime/core/providers/cuda/good.cu", GOOD),
                       ("onnxruntime/contrib_ops/cuda/broken.cu", BROKEN)):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
        compiles.append(entry(build, root / path, onnxruntime_command(str(nvcc), gcc, str(root / path), TARGETS)))
    units = buildcost.classify(compiles, root)
    by_source = {str(Path(e["file"]).relative_to(root)): e for e in compiles}
    pieces = buildcost.measure(units, by_source, scratch, seconds=300, jobs=2)
    return {"units": units, "pieces": pieces, "scratch": scratch, "build": build}


def pieces_of(measured: dict, name: str) -> list[buildcost.Piece]:
    return [p for p in measured["pieces"] if Path(p.unit).name == name]


def made_by(scratch: Path, piece: buildcost.Piece, suffix: str) -> Path:
    """The file of `suffix` that the piece left in the scratch folder."""
    output = buildcost.piece_file(scratch, piece)
    found = output if output.name.endswith(suffix) else output.with_suffix(suffix)
    present = sorted(f.name for f in scratch.iterdir())
    assert found.is_file(), f"{piece.unit} {piece.target}: no {found.name} in {present}"
    return found


@pytest.mark.network
def test_measure_makes_one_piece_per_unit_and_target_the_first_an_object_file(measured: dict) -> None:
    """Each unit becomes one piece per target of its command, in order; the first piece compiles the unit's
    object file (an ELF relocatable), every other piece a fatbin whose bytes are the ones recorded."""
    assert [(p.unit, p.target, p.first) for p in measured["pieces"]] == [
        (u.source, t, i == 0) for u in measured["units"] for i, t in enumerate(u.targets)]
    first, *others = pieces_of(measured, "good.cu")
    header = made_by(measured["scratch"], first, ".o").read_bytes()[:18]
    assert header[:4] == b"\x7fELF" and int.from_bytes(header[16:18], "little") == 1  # ET_REL
    for piece in others:
        fatbin = made_by(measured["scratch"], piece, ".fatbin")
        assert fatbin.read_bytes()[:4] == FATBIN_MAGIC
        assert fatbin.stat().st_size == piece.fatbin_bytes


@pytest.mark.network
def test_a_compiling_units_pieces_record_their_cost_and_the_host_work_falls_on_the_first(measured: dict) -> None:
    """Every piece of the compiling unit succeeds with CPU time, peak memory, device time and fatbin bytes;
    the host work (cudafe++, the host compiler) is in the first piece alone, so its host time is far above
    the fatbin pieces'."""
    pieces = pieces_of(measured, "good.cu")
    assert [p.target for p in pieces] == TARGETS
    for piece in pieces:
        assert (piece.exit, piece.error) == (0, ""), piece
        assert piece.cpu_s > 0 and piece.wall_s > 0 and piece.peak_mib > 0, piece
        assert piece.device_s > 0 and piece.fatbin_bytes > 0, piece
    first, *others = pieces
    assert all(first.host_s > 4 * p.host_s for p in others), pieces


@pytest.mark.network
def test_a_ptx_target_runs_no_ptxas(measured: dict) -> None:
    """The compute_121 piece only makes PTX: nvcc's phase times show cicc but no ptxas, where the sm_90a
    piece has both."""
    tools = {}
    for piece in pieces_of(measured, "good.cu")[1:]:
        rows = made_by(measured["scratch"], piece, ".time.csv").read_text().splitlines()[1:]
        tools[piece.target] = {row.split(",")[1].strip() for row in rows}
    assert {"cicc", "ptxas"} <= tools["sm_90a"]
    assert "cicc" in tools["compute_121"] and "ptxas" not in tools["compute_121"]


@pytest.mark.network
def test_a_broken_units_pieces_fail_with_the_compilers_error(measured: dict) -> None:
    """Every piece of the unit that does not compile records a nonzero exit and the line of nvcc's
    error that names the undefined identifier."""
    pieces = pieces_of(measured, "broken.cu")
    assert len(pieces) == len(TARGETS)
    for piece in pieces:
        assert piece.exit not in (None, 0), piece
        assert "error" in piece.error and "undefined_thing" in piece.error, piece


@pytest.mark.network
def test_measuring_writes_nothing_into_the_build_folder(measured: dict) -> None:
    """The pieces drop the unit's -MD/-MF dependency file and its own -o: neither x.o.d nor x.o appears in
    the folder the compile database runs the command in."""
    assert sorted(f.name for f in measured["build"].iterdir()) == []


# --- the deadline

def test_nothing_starts_after_the_deadline(tmp_path: Path) -> None:
    """With no time left, no piece starts: each is recorded as not started, and no compile left a file."""
    units = [buildcost.Unit("a.cu", "core providers", TARGETS)]
    entries = {"a.cu": entry(tmp_path, tmp_path / "a.cu", onnxruntime_command("nvcc", "gcc", "a.cu", TARGETS))}
    pieces = buildcost.measure(units, entries, tmp_path / "scratch", seconds=0, jobs=2)
    assert [(p.exit, p.error) for p in pieces] == [(None, "not started before the deadline")] * len(TARGETS)
    assert list((tmp_path / "scratch").iterdir()) == []


def test_a_piece_still_running_at_the_deadline_is_stopped(tmp_path: Path) -> None:
    """A compile that would run for 30 s is killed soon after a 2 s deadline and recorded as stopped; the
    piece queued behind it is not started."""
    slow = tmp_path / "slow-nvcc"
    slow.write_text("#!/bin/sh\nsleep 30\n")
    slow.chmod(0o755)
    units = [buildcost.Unit("a.cu", "core providers", ["sm_75", "sm_90a"])]
    command = onnxruntime_command(str(slow), "gcc", "a.cu", ["sm_75", "sm_90a"])
    entries = {"a.cu": entry(tmp_path, tmp_path / "a.cu", command)}
    start = time.monotonic()
    pieces = buildcost.measure(units, entries, tmp_path / "scratch", seconds=2, jobs=1)
    assert time.monotonic() - start < 15
    assert [(p.exit, p.error) for p in pieces] == [(None, "stopped at the deadline"),
                                                   (None, "not started before the deadline")]


@pytest.mark.network
def test_two_units_of_one_file_name_keep_their_own_files(nvcc: Path, gcc: str, tmp_path: Path) -> None:
    """ONNX Runtime has units that share a file name in different folders (activations_impl.cu twice):
    measured together, each piece writes its own files, so no piece reads another's results."""
    root, build = tmp_path / "src", tmp_path / "build"
    build.mkdir()
    compiles = []
    for folder, body in (("onnxruntime/contrib_ops/cuda/activation", GOOD),
                         ("onnxruntime/core/providers/cuda/activation", GOOD + "\nvoid more() {}\n")):
        source = root / folder / "activations_impl.cu"
        source.parent.mkdir(parents=True)
        source.write_text(body)
        compiles.append(entry(build, source, onnxruntime_command(str(nvcc), gcc, str(source), ["sm_75"])))
    units = buildcost.classify(compiles, root)
    by_source = {u.source: c for u, c in zip(units, compiles, strict=True)}
    pieces = buildcost.measure(units, by_source, tmp_path / "scratch", 300, 2)
    files = [buildcost.piece_file(tmp_path / "scratch", p) for p in pieces]
    assert [p.exit for p in pieces] == [0, 0] and len(set(files)) == 2 and all(f.is_file() for f in files)


# --- predicting, from the measurement file the GPU machine wrote

MEASUREMENTS = measurements_file(Path(__file__).resolve().parents[1] / "docs" / "build-cost")
HOST = host_cost(HOST_FILE)


@pytest.fixture(scope="module")
def recorded() -> tuple[list[buildcost.Unit], dict[str, buildcost.KindCost], dict]:
    record = json.loads(MEASUREMENTS.read_text())
    return [buildcost.Unit(**u) for u in record["units"]], buildcost.kind_costs(record["pieces"]), record


def test_every_kind_of_the_recorded_graph_was_measured(recorded) -> None:
    """The recorded run compiled at least one unit of every kind of its graph for all of the unit's
    targets, each piece with its costs, and the kinds it recorded are the ones KINDS gives now."""
    units, _, record = recorded
    assert all(u.kind == buildcost.kind_of(u.source) for u in units)
    compiled = {(p["unit"], p["target"]) for p in record["pieces"]
                if p["exit"] == 0 and p["cpu_s"] > 0 and p["peak_mib"] > 0 and p["fatbin_bytes"] > 0}
    whole = {u.kind for u in units if all((u.source, t) in compiled for t in u.targets)}
    assert whole == {u.kind for u in units}


def test_a_unit_costs_its_host_part_once_and_each_target_its_own(recorded) -> None:
    """A unit's price is its kind's host part plus the measured part of each target; a target the run did
    not measure takes the nearest measured one of its sort (sm_70 as sm_75, PTX as the measured PTX)."""
    _, costs, _ = recorded
    cost = costs["flash attention"]
    one, _ = buildcost.unit_cost(cost, ["sm_80"])
    two, _ = buildcost.unit_cost(cost, ["sm_80", "sm_90a"])
    assert one == pytest.approx(cost.host_s + cost.target_s["sm_80"])
    assert two - one == pytest.approx(cost.target_s["sm_90a"])
    core = costs["core providers"]
    assert buildcost.unit_cost(core, ["sm_70"]) == buildcost.unit_cost(core, ["sm_75"])
    assert buildcost.unit_cost(cost, ["compute_90"]) == buildcost.unit_cost(cost, ["compute_121"])


def test_a_unit_limited_to_a_range_of_the_list_keeps_that_range_in_another_list() -> None:
    """Units ORT compiles for part of the list keep that part in another job's list: SM90-only units stay
    SM90-only, 120-and-up units take 120 and 121, and units of the whole list take the whole other list."""
    graph = ["sm_75", "sm_80", "sm_90a", "sm_120a", "compute_121"]
    job = nvcc_targets(["70-real", "75-real", "80-real", "90-real", "110-real", "120-real", "121"])
    assert job == ["sm_70", "sm_75", "sm_80", "sm_90a", "sm_110a", "sm_120a", "sm_121a", "compute_121"]
    whole = buildcost.Unit("a.cu", "core providers", graph)
    hopper = buildcost.Unit("b.cu", "SM90 MoE GEMM", ["sm_90a"])
    blackwell = buildcost.Unit("c.cu", "SM120 FP4 MoE GEMM", ["sm_120a", "compute_121"])
    assert buildcost.unit_targets(whole, graph, job) == job
    assert buildcost.unit_targets(hopper, graph, job) == ["sm_90a"]
    assert buildcost.unit_targets(blackwell, graph, job) == ["sm_120a", "sm_121a", "compute_121"]
    assert buildcost.unit_targets(hopper, graph, nvcc_targets(["80-real", "89"])) == []
    assert buildcost.unit_targets(blackwell, graph, nvcc_targets(["80-real", "90"])) == []


def test_the_predicted_build_follows_the_work_and_the_jobs(recorded) -> None:
    """Fewer targets or fewer units predict a shorter build and a smaller library; fewer jobs a longer
    build; with every unit the same kind, the build is exactly total / jobs + (1 - 1 / jobs) x the longest."""
    units, costs, record = recorded
    graph = buildcost.graph_targets(units)
    sizing = buildcost.Sizing(16, 60, 8, 1, 7, 2)
    full = buildcost.predict(units, graph, costs, record["host_compiles"], sizing, HOST)
    fewer_targets = buildcost.predict(units, [t for t in graph if t != "sm_86"], costs,
                                      record["host_compiles"], sizing, HOST)
    fewer_units = buildcost.predict([u for u in units if u.kind != "flash attention"], graph, costs,
                                    record["host_compiles"], sizing, HOST)
    fewer_jobs = buildcost.predict(units, graph, costs, record["host_compiles"],
                                   buildcost.Sizing(16, 60, 8, 1, 10, 2), HOST)
    # worked by hand from the sizing, not from the rule under test: 60 GB free hold 6 jobs of 1 x 10 GB
    assert fewer_jobs.jobs == 6 and fewer_jobs.build_s > full.build_s
    for smaller in (fewer_targets, fewer_units):
        assert smaller.build_s < full.build_s and smaller.library_bytes < full.library_bytes
    assert full.by_kind["flash attention"][0] == sum(u.kind == "flash attention" for u in units)
    same = [u for u in units if u.kind == "core providers"]
    one = buildcost.predict(same, graph, costs, 0, sizing, HOST)
    total, jobs = one.nvcc_cpu_s, sizing.build_jobs
    assert one.jobs == jobs  # its memory and cores allow more
    assert one.build_s == pytest.approx(total / jobs + (1 - 1 / jobs) * one.longest_unit_s)


def test_the_pool_bounds_the_memory_of_the_heaviest_units(recorded) -> None:
    """With the SM90 TMA units in a pool, the worst case is the pool's jobs at their peak beside the other
    jobs at the next heaviest; without the pool (a pool as large as the jobs), every job at the heaviest peak."""
    units, costs, record = recorded
    graph = buildcost.graph_targets(units)
    sizing = buildcost.Sizing(16, 60, 8, 1, 7, 2)
    pooled = buildcost.predict(units, graph, costs, 0, sizing, HOST)
    unpooled = buildcost.predict(units, graph, costs, 0, dataclasses.replace(sizing, pool_jobs=sizing.build_jobs),
                                 HOST)
    heavy = max(costs[k].peak_mib for k in buildcost.POOLED_KINDS if k in costs) / 1024
    rest = max(c.peak_mib for k, c in costs.items() if k not in buildcost.POOLED_KINDS) / 1024
    jobs, pool = sizing.build_jobs, sizing.pool_jobs
    assert pooled.jobs == unpooled.jobs == jobs  # its memory and cores allow more
    assert unpooled.worst_gib == pytest.approx(jobs * heavy)
    assert pooled.worst_gib == pytest.approx(pool * heavy + (jobs - pool) * rest)
    assert pooled.worst_gib < unpooled.worst_gib


def test_the_host_objects_and_the_host_code_are_priced_from_the_host_file(recorded, tmp_path: Path) -> None:
    """host.json's figures reach the prediction: each host compile costs its CPU seconds over its count, and the
    library holds its bytes less its fatbin besides the units' fatbins; a file without them is refused by name."""
    units, costs, record = recorded
    graph = buildcost.graph_targets(units)
    sizing = buildcost.Sizing(16, 60, 8, 1, 7, 2)
    figures = json.loads(HOST_FILE.read_text())
    edited = tmp_path / "host.json"
    figures["host_objects"]["cpu_s"] *= 2
    figures["library"]["bytes"] += 10**6
    edited.write_text(json.dumps(figures))
    before = buildcost.predict(units, graph, costs, record["host_compiles"], sizing, HOST)
    after = buildcost.predict(units, graph, costs, record["host_compiles"], sizing, host_cost(edited))
    assert after.host_cpu_s == pytest.approx(2 * before.host_cpu_s) and before.host_cpu_s > 0
    assert after.library_bytes - before.library_bytes == pytest.approx(10**6)
    assert after.nvcc_cpu_s == before.nvcc_cpu_s
    del figures["library"]
    edited.write_text(json.dumps(figures))
    with pytest.raises(buildcost.CostError, match=f"{re.escape(str(edited))}.*library"):
        host_cost(edited)


def test_a_kind_without_a_measurement_stops_the_prediction(recorded) -> None:
    """A graph with a kind the run never measured (a new kernel family) is refused, by name."""
    units, costs, record = recorded
    graph = buildcost.graph_targets(units)
    partial = {k: c for k, c in costs.items() if k != "XQA"}
    with pytest.raises(buildcost.CostError, match="XQA"):
        buildcost.predict(units, graph, partial, 0, buildcost.Sizing(16, 60, 8, 1, 7, 2), HOST)


def test_the_command_tables_every_cuda_job_and_fails_on_the_ones_too_close_to_the_limit(
        recorded, tmp_path: Path) -> None:
    """predict_build_cost.py prints one row per CUDA job of the config, names each job whose build is
    predicted under 1.5 x the runner's limit, and exits 1 exactly when there is one; a file that is not
    a measurement file gets exit 2 and its name."""
    import subprocess
    import sys

    from conftest import CONFIG, REPO

    units, _, record = recorded
    graph = tmp_path / "rehearsal"  # laid out as a rehearsal leaves it: the measured units, a few host compiles
    entries = [{"file": str(graph / "src" / u.source), "output": "x.o",
                "command": " ".join(f"--generate-code=arch=compute_{t.split('_')[1]},code=[{t}]" for t in u.targets)}
               for u in units] + [{"file": str(graph / "src" / f"h{i}.cc"), "output": "x.o", "command": "c++"}
                                  for i in range(3)]
    graph.mkdir()
    (graph / "compile_commands.json").write_text(json.dumps(entries))
    command = [sys.executable, str(REPO / "scripts" / "predict_build_cost.py"), "--measurements", str(MEASUREMENTS),
               "--graph", str(graph)]
    done = subprocess.run(command, capture_output=True, text=True)
    rows = [line.split(" | ") for line in done.stdout.splitlines() if re.match(r"\| \d+\.\d+ \|", line)]
    assert sorted((r[0].strip("| "), r[1]) for r in rows) == sorted(
        (v, p) for v in CONFIG.cuda.versions for p in CONFIG.cuda_platforms)
    close = [f"CUDA {r[0].strip('| ')} {r[1]}" for r in rows if float(r[9]) < 1.5]
    named = [line.split(": ")[1] for line in done.stdout.splitlines()
             if line.startswith("too close to the runner's") and line.endswith(" h")]
    assert named == close and close, done.stdout
    assert done.returncode == (1 if close else 0), done.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    refused = subprocess.run([*command[:2], "--measurements", str(bad), "--graph", str(graph)],
                             capture_output=True, text=True)
    assert refused.returncode == 2 and str(bad) in refused.stderr and refused.stdout == ""
    no_graph = subprocess.run(command[:2], capture_output=True, text=True)
    assert no_graph.returncode == 2 and "--graph" in no_graph.stderr
