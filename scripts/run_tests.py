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

import sys
from pathlib import Path

import bootstrap

bootstrap.ensure(bootstrap.REPO / "tests" / "requirements.txt", always_venv=True)

import pytest


def pytest_args(argv: list[str]) -> list[str]:
    fast = ["-m", "not slow"] if "--fast" in argv else []
    given = [arg for arg in argv if arg != "--fast"]
    named = any(not arg.startswith("-") and Path(arg.split("::")[0]).exists() for arg in given)
    return [*fast, *given] if named else [*fast, str(bootstrap.REPO / "tests"), *given]


def main() -> int:
    # one worker per CPU (pytest-xdist): most tests wait on a compiler, pip or a download, one process
    # at a time. worksteal: a worker that runs out takes tests from the end of another's share, so the
    # long rehearsals do not leave the other CPU idle. Workers share .cache/ (bootstrap.cache_lock).
    return pytest.main(["-ra", "-n", "auto", "--dist", "worksteal", *pytest_args(sys.argv[1:])])


if __name__ == "__main__":
    sys.exit(main())
