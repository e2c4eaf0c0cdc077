#!/usr/bin/env python3
"""Resolve every linux-64 job's requirements against the stand-in channel.

    python3 scripts/resolve.py [--feedstock DIR] [--channel DIR]

The stand-in channel (scripts/standins/channel.py: one package of metadata for each conda-forge package
scripts/standins/standins.yaml describes) is built into DIR (default .cache/channel), then each
linux-64 `.ci_support` file is rendered by rattler-build with its build and host environments solved,
and each test section's environment is solved by rattler's solver (scripts/standins/resolve.py).
Exit 0 when every environment resolves, 1 when one does not (it is named), 2 on bad input.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import bootstrap

bootstrap.ensure(bootstrap.REPO / "scripts" / "requirements.txt")

from cores import NEWEST_CORE
from feedstock.errors import InputError
from feedstock.inputs import load_config
from standins.channel import build_channel, standins
from standins import StandinError
from standins.resolve import describe, resolve_job


def job_files(feedstock: Path) -> list[Path]:
    return sorted((feedstock / ".ci_support").glob("linux_64_*.yaml"))


def core_versions(feedstock: Path) -> dict[str, str]:
    """The cores the recipe's tests ask for: the floor (the config's) and the newest (scripts/cores.py)."""
    return {"min_core_version": load_config(feedstock).min_core_version, "newest_core_version": NEWEST_CORE}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--feedstock", type=Path, default=bootstrap.REPO)
    parser.add_argument("--channel", type=Path, default=bootstrap.REPO / ".cache" / "channel")
    args = parser.parse_args(argv)
    feedstock = args.feedstock.resolve()
    try:
        jobs = job_files(feedstock)
        if not jobs:
            raise StandinError(f"{feedstock / '.ci_support'}: no linux-64 job files")
        build_channel(standins(jobs, core_versions(feedstock)), args.channel.resolve())
        ok = True
        for job in jobs:
            ok &= describe(job, resolve_job(feedstock / "recipe" / "recipe.yaml", job, args.channel.resolve()))
    except StandinError as error:
        print(f"resolve: {error}", file=sys.stderr)
        return 1
    except InputError as error:
        print(f"resolve: {error}", file=sys.stderr)
        return 2
    return 0 if ok else 1


def command() -> None:
    """`feedstock-resolve`, and this file run as a script."""
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # no interpreter shutdown: rattler-build's and rattler's worker threads can abort it (PyGILState_Release,
    # once under load), which would turn this exit status into SIGABRT
    os._exit(status)


if __name__ == "__main__":
    command()
