"""No code in the feedstock that nothing uses."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO


def test_vulture_finds_no_unused_code() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "vulture", "scripts", "recipe", "tests", "tests/dead_code_allowlist.py",
         "--min-confidence", "60"],
        cwd=REPO, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False,
    )
    assert (result.returncode, result.stdout) == (0, ""), result.stdout + result.stderr
