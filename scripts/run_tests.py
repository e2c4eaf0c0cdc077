#!/usr/bin/env python3
"""Run the feedstock's test suite inside `.venv/` (created on first use).

    python3 scripts/run_tests.py            the full suite (what CI runs)
    python3 scripts/run_tests.py --fast     all but the `slow` tests: the rehearsals, the real conda-smithy
                                            and the stand-in channel builds
    python3 scripts/run_tests.py tests/test_render.py -k manifest    only what is named

Arguments other than --fast go to pytest; without a test file or folder among them, it runs tests/.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bootstrap  # noqa: E402

bootstrap.ensure(bootstrap.REPO / "tests" / "requirements.txt", always_venv=True)

import pytest  # noqa: E402


def pytest_args(argv: list[str]) -> list[str]:
    fast = ["-m", "not slow"] if "--fast" in argv else []
    given = [arg for arg in argv if arg != "--fast"]
    named = any(not arg.startswith("-") and Path(arg.split("::")[0]).exists() for arg in given)
    return [*fast, *given] if named else [*fast, str(bootstrap.REPO / "tests"), *given]


if __name__ == "__main__":
    # one worker per CPU (pytest-xdist): most tests wait on a compiler, pip or a download, one process
    # at a time. worksteal: a worker that runs out takes tests from the end of another's share, so the
    # long rehearsals do not leave the other CPU idle. Workers share .cache/ (bootstrap.cache_lock).
    sys.exit(pytest.main(["-ra", "-n", "auto", "--dist", "worksteal", *pytest_args(sys.argv[1:])]))
