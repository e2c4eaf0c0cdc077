#!/usr/bin/env python3
"""Predict each CUDA job's plugin build: wall time, library size and memory, from measured compiles.

    python3 scripts/predict_build_cost.py --graph DIR [DIR ...] [--measurements FILE]
    python3 scripts/predict_build_cost.py --kinds [--measurements FILE]

FILE is a measurement file written on the GPU machine (scripts/buildcost.py; README.md, "What a release
costs", gives the run), by default the newest under docs/build-cost/. Every nvcc unit of the graph is
priced by its kind's measured cost per GPU target, for each CUDA job's architecture list and the job
sizing in config/feedstock.yaml (--kinds: what each kind of the measured graph costs instead); the host
objects and the library's host code by docs/build-cost/host.json. Each DIR is a rehearsal of the plugin
for one platform (scripts/rehearse.py onnxruntime-ep-cuda --cuda VERSION [--platform linux-aarch64]
--no-sample --workdir DIR): the graph of the recipe as it is now. A platform's jobs are priced from its own
graph; one without a rehearsal (win-64) from linux-64's, and the table's `graph` column says which. Prints
one Markdown table, then each job whose build is predicted less than MARGIN times under the runner's time
limit, or whose jobs at their peak would need more memory than the runner has free; exit 0 when there is
none, 1 when there is, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import bootstrap

bootstrap.ensure(bootstrap.REPO / "scripts" / "requirements.txt")

import buildcost
from feedstock.cuda_targets import nvcc_targets
from feedstock.errors import InputError
from feedstock.inputs import load_config

# the build machine of every linux job (conda-forge.yml's build_platform), whose graph prices the platforms
# that have no rehearsal of their own
BUILD_PLATFORM = "linux-64"
# what every prediction must leave free of each limit
MARGIN = 1.5
# the figures of the prediction that the measurement file does not hold, each with where it comes from
HOST_FILE = bootstrap.REPO / "docs" / "build-cost" / "host.json"


def measurements_file(folder: Path) -> Path:
    found = sorted(folder.glob("*-measurements.json"))
    if not found:
        raise buildcost.CostError(f"{folder}: no *-measurements.json; name one with --measurements")
    return found[-1]


def host_cost(path: Path) -> buildcost.HostCost:
    try:
        return buildcost.host_cost(json.loads(path.read_text()))
    except (KeyError, TypeError, ZeroDivisionError) as error:
        raise buildcost.CostError(f"{path}: {error!r} missing or unusable: not a host figures file") from None


def graph_platform(rehearsal: Path) -> str:
    """The target platform a rehearsal's graph is for (its report.json; linux-64 when it names none)."""
    report = rehearsal / "report.json"
    return json.loads(report.read_text()).get("target_platform", BUILD_PLATFORM) if report.is_file() else BUILD_PLATFORM


def load_graph(rehearsal: Path) -> tuple[list[buildcost.Unit], int]:
    """The nvcc units and the number of host compiles of a rehearsal's graph."""
    database = rehearsal / "compile_commands.json"
    if not database.is_file():
        raise buildcost.CostError(f"{database}: missing; rehearse with --no-sample --workdir {rehearsal} first")
    compiles = json.loads(database.read_text())
    units = buildcost.classify(compiles, (rehearsal / "src").resolve())
    return units, len(compiles) - len(units)


def table(measurements: dict, graphs: dict[str, tuple[list[buildcost.Unit], int]], root: Path,
          host: buildcost.HostCost) -> tuple[str, list[str]]:
    """The Markdown table, and the jobs too close to the runner's limit. `graphs`: units and host compiles
    by the platform whose rehearsal they come from."""
    config = load_config(root)
    # conda-forge's Namespace runners, as config/feedstock.yaml's runner_size has them
    runner = config.runner_size
    limit_s = runner.hours * 3600
    sizing = buildcost.Sizing(runner.cores, runner.free_gib, config.cuda.build_jobs, config.cuda.nvcc_threads,
                              config.cuda.nvcc_gb_per_thread, config.cuda.sm90_tma_jobs)
    costs = buildcost.kind_costs(measurements["pieces"])
    short = []
    lines = ["| CUDA | platform | GPU targets | jobs | nvcc units | nvcc CPU-h | host CPU-h | longest unit, s "
             f"| build, h | × under {runner.hours} h | library, MB | largest process, GiB "
             "| all jobs at their peak, GiB | graph |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for version in sorted(config.cuda.versions):
        for platform in config.cuda_platforms:
            graph = platform if platform in graphs else BUILD_PLATFORM
            if graph not in graphs:
                raise buildcost.CostError(
                    f"no rehearsal's graph for {platform} or {BUILD_PLATFORM}: give one with --graph")
            units, host_compiles = graphs[graph]
            targets = nvcc_targets(list(config.cuda_lists.get(version, platform)))
            p = buildcost.predict(units, targets, costs, host_compiles, sizing, host)
            margin = round(limit_s / p.build_s, 2)
            if margin < MARGIN:
                short.append(f"CUDA {version} {platform}: {p.build_s / 3600:.2f} h, under {MARGIN} x {runner.hours} h")
            if p.worst_gib > runner.free_gib:
                short.append(
                    f"CUDA {version} {platform}: {p.worst_gib:.0f} GiB at the jobs' peak, over {runner.free_gib}")
            lines.append(f"| {version} | {platform} | {len(targets)} | {p.jobs} | {p.units} "
                         f"| {p.nvcc_cpu_s / 3600:.1f} "
                         f"| {p.host_cpu_s / 3600:.1f} | {p.longest_unit_s:.0f} | {p.build_s / 3600:.2f} "
                         f"| {margin:.2f} | {p.library_bytes / 1e6:.0f} | {p.peak_gib:.1f} "
                         f"| {p.worst_gib:.0f} of {runner.free_gib} | {graph} |")
    return "\n".join(lines) + "\n", short


def kinds_table(measurements: dict, units: list[buildcost.Unit]) -> str:
    """What each kind of unit costs at the graph's own list: measured units, CPU-s, peak and bytes."""
    costs = buildcost.kind_costs(measurements["pieces"])
    buildcost.check_measured(units, costs)
    whole = {p["unit"] for p in measurements["pieces"]} - {p["unit"] for p in measurements["pieces"] if p["exit"] != 0}
    lines = ["| kind | units in the graph | measured whole | CPU-s per unit | largest process, GiB "
             "| fatbin per unit, kB |",
             "|---|---|---|---|---|---|"]
    for kind, _ in buildcost.KINDS:
        members = [u for u in units if u.kind == kind]
        if not members:
            continue
        priced = [buildcost.unit_cost(costs[kind], u.targets) for u in members]
        lines.append(f"| {kind} | {len(members)} | {len({u.source for u in members} & whole)} "
                     f"| {sum(s for s, _ in priced) / len(priced):.0f} | {costs[kind].peak_mib / 1024:.1f} "
                     f"| {sum(b for _, b in priced) / len(priced) / 1e3:.0f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graph", type=Path, nargs="+", help="plugin rehearsals' work folders, one per platform")
    parser.add_argument("--measurements", type=Path, help="a measurement file (default: the newest in docs/build-cost)")
    parser.add_argument("--kinds", action="store_true", help="print what each kind of unit costs instead")
    args = parser.parse_args(argv)
    if (args.graph is None) != args.kinds:
        parser.error("give --graph DIR, or --kinds")
    try:
        path = args.measurements or measurements_file(bootstrap.REPO / "docs" / "build-cost")
        measurements = json.loads(path.read_text())
        missing = [key for key in ("units", "pieces", "host_compiles") if key not in measurements]
        if missing:
            raise buildcost.CostError(f"{path}: no {', '.join(missing)}: not a file `buildcost.py measure` wrote")
        if args.kinds:
            print(kinds_table(measurements, [buildcost.Unit(**u) for u in measurements["units"]]), end="")
            return 0
        graphs = {}
        for rehearsal in args.graph:
            platform = graph_platform(rehearsal)
            if platform in graphs:
                raise buildcost.CostError(f"{rehearsal}: a second graph for {platform}")
            graphs[platform] = load_graph(rehearsal)
        text, short = table(measurements, graphs, bootstrap.REPO, host_cost(HOST_FILE))
    except (InputError, buildcost.CostError, OSError, ValueError, KeyError, TypeError) as error:
        print(f"predict_build_cost: {error}", file=sys.stderr)
        return 2
    print(text, end="")
    for job in short:
        print(f"too close to the runner's limit: {job}")
    return 1 if short else 0


if __name__ == "__main__":
    sys.exit(main())
