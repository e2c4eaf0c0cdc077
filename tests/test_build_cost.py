"""The measuring half of scripts/buildcost.py: sorting nvcc units into kinds, choosing the sample, and
compiling it one piece per GPU target with CUDA 13.0's real nvcc from PyPI."""

from __future__ import annotations

import platform
import re
import shlex
import shutil
import time
from pathlib import Path

import pytest

import buildcost
from support.wheels import unpacked_wheel

# NVIDIA's wheels that together make a toolkit nvcc compiles with: each unpacks to nvidia/cu13/{bin,include,lib,nvvm}
TOOLKIT_WHEELS = ["nvidia-cuda-nvcc==13.0.88", "nvidia-nvvm==13.0.88", "nvidia-cuda-crt==13.0.88",
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
    (found,) = [f for f in scratch.iterdir() if f.name.startswith(f"{Path(piece.unit).name}.{piece.target}.")
                and f.name.endswith(suffix)]
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
