#!/usr/bin/env python3
"""Rehearse one output's build script against ONNX Runtime's real source, on linux-64 for PLATFORM.

    python3 scripts/rehearse.py onnxruntime-cpp --workdir DIR
    python3 scripts/rehearse.py onnxruntime --workdir DIR
    python3 scripts/rehearse.py onnxruntime-ep-cuda --cuda 13.4 --workdir DIR
    python3 scripts/rehearse.py onnxruntime-ep-cuda --cuda 13.4 --platform linux-aarch64 --workdir DIR

The recipe is evaluated by rattler-build's engine for the PLATFORM (default linux-64) variant in
.ci_support/, with this machine's Python, built on linux-64: linux-aarch64 is cross-compiled, as
conda-forge.yml's build_platform has conda-forge build it. rattler-build makes its build and host
environments from the stand-in channel of scripts/standins/standins.yaml, built with this machine's files
(scripts/standins/environment.py), and runs the build script in them up to its build step, where it stops
and names the targets that step builds; a sample of their build graph is then compiled and audited as the
recipe audits the plugin (see scripts/rehearsal.py). ORT's source and the archives its CMake fetches
come from the mirror folder that ORT_SOURCE_MIRROR names, or are downloaded by the recipe's URL and sha256
and deps.txt's URLs and SHA1s into the cache (scripts/standins/sources.py). DIR ends up with the recipe's
copy, rattler-build's work folder (DIR/src links to its source tree, where the build tree is) and
report.txt/report.json.
Exit 0 when configure and every sampled compile succeeded, 1 when not, 2 on bad input or when the
sources cannot be had.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import bootstrap

bootstrap.ensure(bootstrap.REPO / "scripts" / "requirements.txt")

from feedstock.ci_support import job_file, load_jobs
from feedstock.errors import InputError
from feedstock.inputs import load_config
from standins import StandinError, cache_folder
from rehearsal import dependencies, rehearse
from standins.evaluate import evaluate
from standins.channel import load_standins
from standins.downloads import BUILD_PLATFORM, PLATFORMS
from standins.sources import SourcesUnavailable, WrongHash, locate

def without_nvcc(feedstock: Path, platform: str = BUILD_PLATFORM) -> list[str]:
    """The platform's jobs' CUDA versions that no rehearsal can take: standins.yaml has no nvcc for them."""
    nvcc = load_standins()["cuda-nvcc_linux-64"]["pypi"]
    versions = sorted({job.cuda_version for job in load_jobs(feedstock)
                       if job.platform == platform and job.cuda_version})
    return [f"CUDA {v}: scripts/standins/standins.yaml has no nvcc for it" for v in versions if v not in nvcc]


def sass_architectures(rendered: dict) -> list[str]:
    """The plugin's SASS architectures (`75-real;...;121-real;121-virtual` -> 75 ... 121)."""
    listed = str(rendered["build"]["script"]["env"]["CUDA_ARCHITECTURES"]).split(";")
    return [a.removesuffix("-real") for a in listed if not a.endswith("-virtual")]


def sampled_architectures(feedstock: Path, plugin: str, rendered: dict, cuda: str) -> tuple[list[str], str]:
    """The architectures only this platform's list of the `plugin` output has (none on linux-64), and the list's
    newest."""
    own = sass_architectures(rendered)
    linux_64 = sass_architectures(evaluate(feedstock, plugin, cuda, None)[0])
    return [a for a in own if a not in linux_64], own[-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output", help="the package to rehearse, by its name in config/feedstock.yaml's outputs")
    parser.add_argument("--cuda", help="the CUDA version (the plugin only)")
    parser.add_argument("--platform", default=BUILD_PLATFORM, choices=sorted(PLATFORMS),
                        help="the target platform (default linux-64); the build machine is linux-64")
    parser.add_argument("--workdir", required=True, type=Path)
    parser.add_argument("--feedstock", type=Path, default=bootstrap.REPO,
                        help="the feedstock to rehearse (default: this one)")
    parser.add_argument("--cache", type=Path, default=cache_folder(bootstrap.REPO),
                        help="downloads kept between rehearsals")
    parser.add_argument("--no-sample", action="store_true", help="configure and record the graph, compile nothing")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.feedstock)
        outputs = config.outputs
        try:
            key = outputs.key(args.output)
        except KeyError as error:
            raise StandinError(error.args[0]) from None
        if (key == "plugin") != (args.cuda is not None):
            raise StandinError(f"--cuda is required for {outputs.plugin.name} and means nothing for the CPU outputs")
        sources = locate(args.feedstock.resolve(), args.cache.resolve(), dependencies(key, args.platform))
        python = f"{sys.version_info.major}.{sys.version_info.minor}"
        rendered, variant = evaluate(args.feedstock.resolve(), args.output, args.cuda, python, args.platform)
        without_file = {entry.dep for entry in config.license.vendored if not entry.file}
        architectures, newest = (sampled_architectures(args.feedstock.resolve(), args.output, rendered, args.cuda)
                                 if args.cuda else ([], ""))
        report = rehearse(args.output, key, rendered, variant, args.feedstock.resolve() / "recipe",
                          job_file(args.feedstock.resolve(), args.platform, args.cuda), python, sources,
                          args.workdir.resolve(), args.cache.resolve(), without_file, sample=not args.no_sample,
                          not_rehearsed=without_nvcc(args.feedstock, args.platform) if args.cuda else [],
                          architectures=architectures, newest=newest)
    except (StandinError, InputError, SourcesUnavailable, WrongHash) as error:
        print(f"rehearse: {error}", file=sys.stderr)
        return 2
    print((args.workdir / "report.txt").read_text(), end="")
    return (0 if report.configure_ok and all(s.ok for s in report.sample) and (report.audit_ok or not report.sample)
            else 1)


if __name__ == "__main__":
    sys.exit(main())
