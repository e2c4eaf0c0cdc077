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
    sys.exit(pytest.main(["-ra", str(bootstrap.REPO / "tests"), *sys.argv[1:]]))
