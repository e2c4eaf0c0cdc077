#!/usr/bin/env python3
"""Run the feedstock's test suite inside `.venv/` (created on first use).

Extra arguments go to pytest, e.g. `python3 scripts/run_tests.py -k manifest -x`.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bootstrap  # noqa: E402

bootstrap.ensure(bootstrap.REPO / "tests" / "requirements.txt", always_venv=True)

import pytest  # noqa: E402

if __name__ == "__main__":
    # one worker per CPU (pytest-xdist): most tests wait on a compiler, pip or a download, one process
    # at a time. worksteal: a worker that runs out takes tests from the end of another's share, so the
    # long rehearsals do not leave the other CPU idle. Workers share .cache/ (bootstrap.cache_lock).
    sys.exit(pytest.main(["-ra", "-n", "auto", "--dist", "worksteal", str(bootstrap.REPO / "tests"), *sys.argv[1:]]))
