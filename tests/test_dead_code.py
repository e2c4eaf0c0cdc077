"""No code in the feedstock that nothing uses, and none that only the tests use."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO


def vulture(*paths: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vulture", *paths, "tests/dead_code_allowlist.py", "--min-confidence", "60"],
        cwd=REPO, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False,
    )


def test_vulture_finds_no_unused_code() -> None:
    result = vulture("scripts", "recipe", "tests")
    assert (result.returncode, result.stdout) == (0, ""), result.stdout + result.stderr


def test_vulture_finds_no_code_that_only_the_tests_use() -> None:
    """The feedstock's code read without its tests: a function that only a test calls is dead too, unless the
    allowlist names it with what else reads it (a field a file or a template reads)."""
    result = vulture("scripts", "recipe")
    assert (result.returncode, result.stdout) == (0, ""), result.stdout + result.stderr
