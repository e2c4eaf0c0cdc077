"""A CMake-generated build graph, read with ninja's own tools. Standard library only: the rehearsal uses
it here, and buildcost.py on the GPU machine."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path


def ninja(build: Path, *args: str) -> str:
    return subprocess.run(["ninja", "-C", str(build), *args], check=True, capture_output=True, text=True).stdout


def target_compiles(build: Path, targets: list[str]) -> tuple[list[str], list[dict[str, str]]]:
    """Every command that building `targets` runs, and the compile database's entries of its compiles."""
    commands = [line for line in ninja(build, "-t", "commands", *targets).splitlines() if line.strip()]
    wanted = set(commands)
    database = json.loads(ninja(build, "-t", "compdb"))
    compiles = [entry for entry in database if entry["command"] in wanted and " -c " in entry["command"]]
    return commands, compiles


def order_deps(build: Path, output: str) -> list[str]:
    """A compile's implicit and order-only inputs (generated headers and the like), built before it."""
    query = ninja(build, "-t", "query", output)
    inputs = query.split("input:", 1)[1].split("outputs:", 1)[0].splitlines()[1:]
    return [line.strip().lstrip("|").strip() for line in inputs if line.strip().startswith("|")]
