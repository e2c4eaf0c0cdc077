"""The tools as pyproject.toml declares them: each console script is installed in the suite's venv and starts."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from conftest import REPO

SCRIPTS = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_each_console_script_is_installed_and_answers_help(name: str) -> None:
    command = Path(sys.prefix) / "bin" / name
    assert command.is_file(), f"{name} is not in {command.parent}: is the project installed (scripts/bootstrap.py)?"
    done = subprocess.run([str(command), "--help"], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "usage:" in done.stdout

