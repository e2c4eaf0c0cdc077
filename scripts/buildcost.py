"""What a release costs on conda-forge's runners: the plugin's nvcc units, measured and extrapolated.

Standard library only, as feedstock/cuda_targets.py is: the measuring half runs on the GPU machine (a cost run
of scripts/device/run.sh), the predicting half here (scripts/predict_build_cost.py). The steps:

1. `classify` sorts every nvcc unit of the plugin's build graph into a kind by its source path (KINDS).
2. `choose_sample` picks some units of each kind (SAMPLE_EVERY), spread over the kind's sorted list.
3. `measure` compiles each sampled unit once per GPU target of its own command, with nvcc's --time, and
   records CPU seconds, wall seconds, the largest process's peak memory and the target's fatbin bytes.
   The first target is compiled to the object file as the build would (host code included); every other
   target with `nvcc -fatbin`, which compiles the device code alone. A unit's cost at the recipe's list is
   then its host part once plus its device part for each target.
4. `predict` prices every unit of a build graph by its kind's measured cost per target and turns the sum,
   with the host objects' measured cost, into the wall time of a job under the recipe's job sizing.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import shlex
import signal
import subprocess
import threading
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from feedstock.cuda_targets import number
from ninja_graph import run_generators, target_compiles
from recipe_code import recipe_module

# the recipe's own rule for how many compiles run at once, from the plugin's build script
_PLUGIN_BUILD = recipe_module("build_ep_cuda.py")
KIB_PER_GB, build_jobs = _PLUGIN_BUILD.KIB_PER_GB, _PLUGIN_BUILD.build_jobs

# (kind, a pattern its source paths match): the first kind that matches a unit is its kind. The
# paths are ONNX Runtime's at 1.30.0; a unit that matches none stops `classify`, so a new family
# upstream cannot be priced as some other one.
KINDS = [
    ("SM90 FP4 MoE GEMM", r"contrib_ops/cuda/llm/moe_gemm/launchers/moe_gemm_tma_ws_sm90_fp4_"),
    ("SM90 MoE GEMM", r"contrib_ops/cuda/llm/moe_gemm/launchers/moe_gemm_tma_ws_sm90_"),
    ("SM120 FP4 MoE GEMM", r"contrib_ops/cuda/llm/moe_gemm/launchers/moe_gemm_tma_ws_sm120_"),
    ("SM80 MoE GEMM", r"contrib_ops/cuda/llm/moe_gemm/launchers/fused_moe_gemm_sm80_"),
    ("fpA_intB GEMM launchers", r"contrib_ops/cuda/llm/fpA_intB_gemm/launchers/"),
    ("fpA_intB GEMM and GEMV", r"contrib_ops/cuda/llm/fpA_intB_gem"),
    ("MoE kernels", r"contrib_ops/cuda/(llm/moe_gemm|moe)/"),
    ("other llm", r"contrib_ops/cuda/llm/"),
    ("flash attention", r"contrib_ops/cuda/bert/flash_attention/"),
    ("lean attention", r"contrib_ops/cuda/bert/lean_attention/"),
    ("XQA", r"contrib_ops/cuda/bert/xqa/"),
    ("cutlass_fmha", r"contrib_ops/cuda/bert/cutlass_fmha/"),
    ("contrib bert", r"contrib_ops/cuda/bert/"),
    ("quantization", r"contrib_ops/cuda/quantization/"),
    ("other contrib", r"contrib_ops/cuda/"),
    ("core providers", r"core/providers/cuda/"),
]
# a kind's sample: one unit in SAMPLE_EVERY of it, at least SAMPLE_AT_LEAST (or all it has)
SAMPLE_EVERY, SAMPLE_AT_LEAST = 12, 3
# nvcc --time phases that compile device code for one target; every other phase is host work (the host
# preprocessing, cudafe++, the host compiler) or fatbinary, done once per unit
DEVICE_PHASES = {"gcc (preprocessing 1)", "cicc", "ptxas", ""}
TARGET = re.compile(r"^--generate-code=arch=compute_\w+,code=\[(\w+)\]$")


class CostError(Exception):
    pass


@dataclass
class Unit:
    source: str  # relative to the source tree
    kind: str
    targets: list[str]  # sm_80, sm_90a, compute_121 ...


@dataclass
class Piece:
    number: int  # its place in the run, which also names its files (two units may share a file name)
    unit: str
    kind: str
    target: str
    first: bool  # compiled to the object file, host code included
    exit: int | None = None  # None: not started, or stopped at the deadline
    cpu_s: float = 0.0
    wall_s: float = 0.0
    peak_mib: float = 0.0  # the largest single process of the compile (cicc, ptxas or the host compiler)
    device_s: float = 0.0  # nvcc --time: this target's preprocessing, cicc and ptxas
    host_s: float = 0.0  # nvcc --time: the rest
    fatbin_bytes: int = 0
    error: str = ""


def kind_of(source: str) -> str:
    for kind, pattern in KINDS:
        if re.search(pattern, source):
            return kind
    raise CostError(f"{source}: an nvcc unit that matches no kind in KINDS (scripts/buildcost.py); add its kind")


def targets_of(command: str) -> list[str]:
    return [m.group(1) for m in map(TARGET.match, shlex.split(command)) if m]


def classify(compiles: list[dict[str, str]], source_root: Path) -> list[Unit]:
    """Every nvcc unit of a compile database (`ninja -t compdb`), with its kind and GPU targets."""
    units = []
    for entry in compiles:
        if not entry["file"].endswith(".cu"):
            continue
        source = str(Path(entry["file"]).relative_to(source_root))
        units.append(Unit(source, kind_of(source), targets_of(entry["command"])))
    return sorted(units, key=lambda u: u.source)


def choose_sample(units: list[Unit]) -> list[Unit]:
    """Each kind's sample, evenly spread over its sorted list, in rounds: the first unit of every kind
    comes before any kind's second, so a run stopped early has measured each kind at least once."""
    by_kind: dict[str, list[Unit]] = {}
    for unit in units:
        by_kind.setdefault(unit.kind, []).append(unit)
    rounds: dict[int, list[Unit]] = {}
    for members in by_kind.values():
        count = min(len(members), max(SAMPLE_AT_LEAST, round(len(members) / SAMPLE_EVERY)))
        for i in range(count):
            rounds.setdefault(i, []).append(members[int((i + 0.5) * len(members) / count)])
    return [unit for i in sorted(rounds) for unit in rounds[i]]


# --- measuring (on the GPU machine)

def piece_command(command: str, target: str, first: bool, output: Path, times: Path) -> list[str]:
    """The unit's own nvcc command for one of its targets: its other --generate-code, its dependency
    file flags and its output replaced; -fatbin instead of -c for every target but the first."""
    words, kept, skip = shlex.split(command), [], False
    for word in words:
        if skip:
            skip = False
            continue
        match = TARGET.match(word)
        if match and match.group(1) != target:
            continue
        if word in ("-MT", "-MF", "-o"):
            skip = True
            continue
        if word == "-MD":
            continue
        kept.append("-fatbin" if word == "-c" and not first else word)
    return [*kept, "-o", str(output), "--time", str(times)]


def _phase_seconds(times: Path) -> tuple[float, float]:
    device = host = 0.0
    with times.open(newline="") as handle:
        for row in csv.reader(handle):
            if len(row) < 8 or row[7].strip() != "ms":
                continue
            seconds = float(row[6]) / 1000
            if row[1].strip() in DEVICE_PHASES:
                device += seconds
            else:
                host += seconds
    return device, host


def _fatbin_bytes(path: Path, first: bool) -> int:
    if not first:
        return path.stat().st_size
    sections = subprocess.run(["size", "-A", str(path)], capture_output=True, text=True, check=True).stdout
    return sum(int(line.split()[1]) for line in sections.splitlines() if line.startswith(".nv_fatbin "))


def piece_file(scratch: Path, piece: Piece) -> Path:
    """Where a piece's output goes; its nvcc --time table and log go beside it."""
    return scratch / f"{piece.number:04d}-{Path(piece.unit).stem}.{piece.target}{'.o' if piece.first else '.fatbin'}"


def _run_piece(piece: Piece, entry: dict[str, str], scratch: Path, deadline: float, running: dict) -> Piece:
    if time.monotonic() >= deadline:
        piece.error = "not started before the deadline"
        return piece
    output = piece_file(scratch, piece)
    times, log = output.with_suffix(".time.csv"), output.with_suffix(".log")
    command = piece_command(entry["command"], piece.target, piece.first, output, times)
    start = time.monotonic()
    with log.open("w") as out:
        process = subprocess.Popen(command, cwd=entry["directory"], stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    running[process.pid] = piece
    _, status, usage = os.wait4(process.pid, 0)
    running.pop(process.pid, None)
    process.returncode = os.waitstatus_to_exitcode(status)
    piece.wall_s = round(time.monotonic() - start, 2)
    piece.cpu_s = round(usage.ru_utime + usage.ru_stime, 2)
    piece.peak_mib = round(usage.ru_maxrss / 1024, 1)  # kilobytes on Linux
    if time.monotonic() >= deadline and process.returncode < 0:
        piece.error = "stopped at the deadline"
        return piece
    piece.exit = process.returncode
    if piece.exit != 0:
        said = log.read_text(errors="replace").splitlines()
        piece.error = next((line for line in said if "error" in line), said[-1] if said else f"exit {piece.exit}")
        return piece
    piece.device_s, piece.host_s = (round(s, 2) for s in _phase_seconds(times))
    piece.fatbin_bytes = _fatbin_bytes(output, piece.first)
    return piece


def measure(sample: list[Unit], entries: dict[str, dict[str, str]], scratch: Path, seconds: float,
            jobs: int) -> list[Piece]:
    """Every (unit, target) piece of the sample, `jobs` at a time, in the sample's order; what still runs
    after `seconds` is stopped and recorded as stopped."""
    scratch.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + seconds
    pairs = [(unit, i) for unit in sample for i in range(len(unit.targets))]
    pieces = [Piece(n, u.source, u.kind, u.targets[i], i == 0) for n, (u, i) in enumerate(pairs)]
    running: dict[int, Piece] = {}

    def stop_at_deadline() -> None:
        while any(p.exit is None and not p.error for p in pieces):
            if time.monotonic() >= deadline:
                for pid in list(running):
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(pid, signal.SIGKILL)
            time.sleep(1)

    threading.Thread(target=stop_at_deadline, daemon=True).start()
    with ThreadPoolExecutor(jobs) as pool:
        return list(pool.map(lambda p: _run_piece(p, entries[p.unit], scratch, deadline, running), pieces))


def write_measurements(path: Path, header: dict, units: list[Unit], pieces: list[Piece]) -> None:
    record = header | {"units": [asdict(u) for u in units], "pieces": [asdict(p) for p in pieces]}
    path.write_text(json.dumps(record, indent=1) + "\n")



# --- predicting (here)

@dataclass
class HostCost:
    """What the prediction takes from outside the measurement file (docs/build-cost/host.json says where
    each figure comes from): a host object's CPU time, and what the library holds besides its fatbins."""
    object_s: float
    code_bytes: float


def host_cost(record: dict) -> HostCost:
    objects, library = record["host_objects"], record["library"]
    return HostCost(objects["cpu_s"] / objects["count"], library["bytes"] - library["fatbin_bytes"])


# The units of ORT's onnxruntime_providers_cuda_plugin_sm90_tma target, which the recipe compiles in a
# ninja pool of their own (recipe/cmake/sm90_tma_job_pool.cmake)
POOLED_KINDS = {"SM90 FP4 MoE GEMM", "SM90 MoE GEMM", "fpA_intB GEMM launchers"}


@dataclass
class Sizing:
    """A runner and the recipe's rule for how many compiles run at once (build_ep_cuda.py's build_jobs)."""
    cores: int
    memory_gib: float
    build_jobs: int
    nvcc_threads: int
    gb_per_thread: int
    pool_jobs: int  # of them, the most that compile POOLED_KINDS

    @property
    def jobs(self) -> int:
        env = {"CUDA_BUILD_JOBS": str(self.build_jobs), "CPU_COUNT": str(self.cores),
               "NVCC_THREADS": str(self.nvcc_threads), "NVCC_GB_PER_THREAD": str(self.gb_per_thread)}
        return build_jobs(env, int(self.memory_gib * KIB_PER_GB))


def unit_targets(unit: Unit, graph: list[str], job: list[str]) -> list[str]:
    """The targets a unit compiles for in a job: those of the job's list within the unit's own range in
    the measured graph, open-ended where the unit went to the graph's end (most units take the whole
    list; ORT limits some to a range, such as SM90 or 120 and up)."""
    own = [number(t) for t in unit.targets if t.startswith("sm_")]
    whole = [number(t) for t in graph if t.startswith("sm_")]
    low = float("-inf") if min(own) == min(whole) else min(own)
    high = float("inf") if max(own) == max(whole) else max(own)
    kept = [t for t in job if t.startswith("sm_") and low <= number(t) <= high]
    if kept and any(t.startswith("compute_") for t in unit.targets):  # none kept: ORT leaves the unit out
        kept += [t for t in job if t.startswith("compute_")]
    return kept


def graph_targets(units: list[Unit]) -> list[str]:
    """The graph's own list: the targets of its widest unit."""
    return max((u.targets for u in units), key=len)


@dataclass
class KindCost:
    host_s: float  # the unit's host part, once
    target_s: dict[str, float]  # CPU-s of one target's device code
    target_bytes: dict[str, float]
    peak_mib: float


def kind_costs(pieces: list[dict]) -> dict[str, KindCost]:
    done = [p for p in pieces if p["exit"] == 0]
    costs = {}
    for kind in {p["kind"] for p in done}:
        mine = [p for p in done if p["kind"] == kind]
        firsts = [p["host_s"] for p in mine if p["first"]] or [0.0]
        per_target: dict[str, list[dict]] = {}
        for piece in mine:
            per_target.setdefault(piece["target"], []).append(piece)
        costs[kind] = KindCost(
            sum(firsts) / len(firsts),
            {t: sum(p["cpu_s"] - (p["host_s"] if p["first"] else 0) for p in ps) / len(ps)
             for t, ps in per_target.items()},
            {t: sum(p["fatbin_bytes"] for p in ps) / len(ps) for t, ps in per_target.items()},
            max(p["peak_mib"] for p in mine))
    return costs


def _measured(cost: KindCost, target: str) -> str:
    """The measured target nearest to `target` of the same sort (SASS or PTX)."""
    same = [t for t in cost.target_s if t.startswith(target.split("_")[0])] or list(cost.target_s)
    return min(same, key=lambda t: (abs(number(t) - number(target)), t))


def unit_cost(cost: KindCost, targets: list[str]) -> tuple[float, float]:
    """CPU-s and fatbin bytes of one unit compiled for `targets`."""
    chosen = [_measured(cost, t) for t in targets]
    return cost.host_s + sum(cost.target_s[t] for t in chosen), sum(cost.target_bytes[t] for t in chosen)


@dataclass
class Prediction:
    jobs: int
    units: int
    nvcc_cpu_s: float
    host_cpu_s: float
    longest_unit_s: float
    # every compile, `jobs` at a time, in the worst order (Graham): total / jobs + (1 - 1 / jobs) x the longest unit
    build_s: float
    library_bytes: float
    peak_gib: float  # the largest process of any unit
    worst_gib: float  # every job's threads at their largest process at once, the pool's with the pooled kinds'
    by_kind: dict[str, tuple[int, float, float]]  # units, CPU-s, fatbin bytes


def check_measured(units: list[Unit], costs: dict[str, KindCost]) -> None:
    missing = sorted({u.kind for u in units} - set(costs))
    if missing:
        raise CostError(f"no measurement of the kind(s) {', '.join(missing)}: measure them before predicting")


def predict(units: list[Unit], job: list[str], costs: dict[str, KindCost], host_compiles: int,
            sizing: Sizing, host: HostCost) -> Prediction:
    """One job's build of the graph `units` for the job's list of targets."""
    check_measured(units, costs)
    graph = graph_targets(units)
    by_kind: dict[str, tuple[int, float, float]] = {}
    longest = 0.0
    for unit in units:
        targets = unit_targets(unit, graph, job)
        if not targets:
            continue
        seconds, size = unit_cost(costs[unit.kind], targets)
        longest = max(longest, seconds)
        count, total, total_bytes = by_kind.get(unit.kind, (0, 0.0, 0.0))
        by_kind[unit.kind] = (count + 1, total + seconds, total_bytes + size)
    nvcc = sum(v[1] for v in by_kind.values())
    host_s = host_compiles * host.object_s
    jobs = sizing.jobs
    pooled = min(sizing.pool_jobs, jobs)
    peaks = [max([costs[k].peak_mib / 1024 for k in by_kind if (k in POOLED_KINDS) == inside] or [0.0])
             for inside in (True, False)]
    worst = sizing.nvcc_threads * max(pooled * peaks[0] + (jobs - pooled) * peaks[1], jobs * peaks[1])
    return Prediction(jobs, sum(v[0] for v in by_kind.values()), nvcc, host_s, longest,
                      (nvcc + host_s) / jobs + (1 - 1 / jobs) * longest,
                      host.code_bytes + sum(v[2] for v in by_kind.values()), max(peaks), worst, by_kind)

# --- fatbin compression (on the GPU machine)

COMPRESS_MODES = ["none", "speed", "balance", "size"]


def _load_seconds(fatbin: Path, repeats: int = 5) -> float:
    """The median time the driver takes to load `fatbin` as a module on GPU 0 and unload it again."""
    import ctypes

    cuda = ctypes.CDLL("libcuda.so.1")

    def check(result: int, what: str) -> None:
        if result != 0:
            raise CostError(f"{what} returned CUDA error {result} for {fatbin}")

    device, context, module = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p()
    check(cuda.cuInit(0), "cuInit")
    check(cuda.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
    check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device), "cuDevicePrimaryCtxRetain")
    check(cuda.cuCtxSetCurrent(context), "cuCtxSetCurrent")
    image = ctypes.create_string_buffer(fatbin.read_bytes())
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        check(cuda.cuModuleLoadData(ctypes.byref(module), image), "cuModuleLoadData")
        seconds.append(time.perf_counter() - start)
        check(cuda.cuModuleUnload(module), "cuModuleUnload")
    return sorted(seconds)[len(seconds) // 2]


def compression(unit: str, pieces: list[Piece], scratch: Path) -> list[dict]:
    """One unit's images (every target's cubin and the PTX, as cuobjdump extracts them from the measured
    pieces) packed into one fatbin by each of fatbinary's compression modes: bytes, and load time on GPU 0."""
    folder = scratch / "compression" / f"{pieces[0].number:04d}"
    folder.mkdir(parents=True, exist_ok=True)
    for piece in pieces:
        for flag in ("-xelf", "-xptx"):
            subprocess.run(["cuobjdump", flag, "all", str(piece_file(scratch, piece))], cwd=folder, check=True,
                           capture_output=True)
    images = []
    for image in sorted(folder.glob("*.cubin")) + sorted(folder.glob("*.ptx")):
        arch = re.search(r"sm_(\d+a?)", image.name)
        if arch:
            kind = "elf" if image.suffix == ".cubin" else "ptx"
            images.append(f"--image3=kind={kind},sm={arch.group(1)},file={image}")
    results = []
    for mode in COMPRESS_MODES:
        packed = folder / f"{mode}.fatbin"
        flags = ["-compress-all", f"-compress-mode={mode}"] if mode != "none" else ["-compress-mode=none"]
        subprocess.run(["fatbinary", "-64", f"--create={packed}", *flags, *images], check=True, capture_output=True)
        results.append({"unit": unit, "mode": mode, "images": len(images), "bytes": packed.stat().st_size,
                        "load_s": round(_load_seconds(packed), 4)})
    return results


# --- the GPU machine's command line

def measure_main(args: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="buildcost.py measure")
    parser.add_argument("--build", type=Path, required=True, help="the configured build folder")
    parser.add_argument("--source", type=Path, required=True, help="the source tree it was configured from")
    parser.add_argument("--target", action="append", required=True, help="a target of the build step")
    parser.add_argument("--out", type=Path, required=True, help="the measurement file to write")
    parser.add_argument("--seconds", type=float, required=True, help="time for the sample's compiles")
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    options = parser.parse_args(args)
    _, compiles = target_compiles(options.build, options.target)
    units = classify(compiles, options.source.resolve())
    sample = choose_sample(units)
    by_source = {str(Path(e["file"]).relative_to(options.source.resolve())): e
                 for e in compiles if e["file"].endswith(".cu")}
    start = time.monotonic()
    print(f"{len(units)} nvcc units, {len(compiles) - len(units)} host compiles; sample of {len(sample)}", flush=True)
    # the code generators the sample's objects need, as the rehearsal runs them (in the build script's environment)
    if status := run_generators(options.build, [by_source[u.source]["output"] for u in sample], dict(os.environ),
                                sys.stdout):
        raise CostError(f"a code generator the sample needs exited {status}")
    prerequisites_s = round(time.monotonic() - start, 1)
    print(f"code generators run in {prerequisites_s} s; compiling the sample", flush=True)
    scratch = options.build / "cost-pieces"
    pieces = measure(sample, by_source, scratch, options.seconds, options.jobs)
    nvcc = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    header = {"nvcc": nvcc,
              "cores": os.cpu_count(), "jobs": options.jobs, "host_compiles": len(compiles) - len(units),
              "prerequisites_s": prerequisites_s, "compression": []}
    write_measurements(options.out, header, units, pieces)
    done = [u for u in sample if all(p.exit == 0 for p in pieces if p.unit == u.source)]
    for unit in done[:2]:
        try:
            header["compression"] += compression(unit.source, [p for p in pieces if p.unit == unit.source], scratch)
        except (CostError, subprocess.CalledProcessError, OSError) as error:
            header["compression"].append({"unit": unit.source, "error": str(error)})
        write_measurements(options.out, header, units, pieces)
    print(f"{sum(p.exit == 0 for p in pieces)} of {len(pieces)} pieces compiled; {options.out}", flush=True)
    return 0


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] != ["measure"]:
        sys.exit("usage: buildcost.py measure --build DIR --source DIR --target T --out FILE --seconds N [--jobs J]")
    sys.exit(measure_main(sys.argv[2:]))
