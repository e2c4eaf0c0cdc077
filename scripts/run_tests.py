#!/usr/bin/env python3
"""Run the feedstock's test suite inside `.venv/` (created on first use).

    python3 scripts/run_tests.py            the full suite (what CI runs)
    python3 scripts/run_tests.py --fast     all but the `slow` tests: the rehearsals, the real conda-smithy,
                                            the stand-in channel builds, the GPU run's bundles and bootstrap's
                                            venv tests
    python3 scripts/run_tests.py tests/test_render.py -k manifest    only what is named

Arguments other than --fast go to pytest; without a test file or folder among them, it runs tests/.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import bootstrap

bootstrap.ensure(bootstrap.REPO / "tests" / "requirements.txt", always_venv=True)

import pytest


# the most that the full suite of a fresh clone has held under .cache/ and .venv/ at once (28.2 GB,
# docs/test-runs.md), and a margin
SUITE_DISK_GB = 30


def _named(argv: list[str]) -> bool:
    return any(not arg.startswith("-") and Path(arg.split("::")[0]).exists() for arg in argv)


def pytest_args(argv: list[str]) -> list[str]:
    fast = ["-m", "not slow"] if "--fast" in argv else []
    given = [arg for arg in argv if arg != "--fast"]
    return [*fast, *given] if _named(given) else [*fast, str(bootstrap.REPO / "tests"), *given]


def disk_warning(argv: list[str], free_bytes: int) -> str:
    """A warning, before the full suite starts, that its disk may fill: rattler-build and CMake then fail
    with errors that do not name the cause ("Could not open or create, or write to file")."""
    if "--fast" in argv or _named(argv) or free_bytes >= SUITE_DISK_GB * 10**9:
        return ""
    return (f"run_tests.py: warning: {free_bytes / 10**9:.1f} GB free on the disk of {bootstrap.REPO}; the full "
            f"suite of a fresh clone writes up to {SUITE_DISK_GB} GB into .cache/ and .venv/ (less what they hold "
            "already), and a full disk fails its rehearsals and channel builds")


def main() -> int:
    warning = disk_warning(sys.argv[1:], shutil.disk_usage(bootstrap.REPO).free)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    # one worker per CPU (pytest-xdist): most tests wait on a compiler, pip or a download, one process
    # at a time. worksteal: a worker that runs out takes tests from the end of another's share, so the
    # long rehearsals do not leave the other CPU idle. Workers share .cache/ (bootstrap.cache_lock).
    return pytest.main(["-ra", "-n", "auto", "--dist", "worksteal", *pytest_args(sys.argv[1:])])


if __name__ == "__main__":
    sys.exit(main())
