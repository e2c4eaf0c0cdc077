"""The tools' code meets the lint settings in pyproject.toml, which the code is written to."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO


def ruff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ruff", *args], capture_output=True, text=True, cwd=REPO,
                          stdin=subprocess.DEVNULL, timeout=120, check=False)


def test_ruff_finds_nothing_in_the_feedstocks_python() -> None:
    checked = ruff("check", "--no-cache", "--output-format", "concise", ".")
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_no_noqa_comment_is_left_that_the_settings_make_unneeded() -> None:
    """A `noqa` for a rule that is not selected, or that a per-file setting already ignores, says nothing."""
    checked = ruff("check", "--no-cache", "--output-format", "concise", "--extend-select", "RUF100", ".")
    unused = [line for line in checked.stdout.splitlines() if "RUF100" in line]
    assert unused == []
