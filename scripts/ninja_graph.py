"""A CMake-generated build graph, read with ninja's own tools. Standard library only: the rehearsal uses
it here, and buildcost.py on the GPU machine."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import TextIO


def ninja(build: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """ninja's answer, from the ninja on env's PATH (the build's own: Debian 12's ninja 1.11 leaves protoc's
    outputs out of `-t inputs`, 1.13 lists them); this process's PATH without env."""
    return subprocess.run(["ninja", "-C", str(build), *args], check=True, capture_output=True, text=True,
                          env=env).stdout


def target_compiles(build: Path, targets: list[str]) -> tuple[list[str], list[dict[str, str]]]:
    """Every command that building `targets` runs, and the compile database's entries of its compiles."""
    commands = [line for line in ninja(build, "-t", "commands", *targets).splitlines() if line.strip()]
    wanted = set(commands)
    database = json.loads(ninja(build, "-t", "compdb"))
    compiles = [entry for entry in database if entry["command"] in wanted and " -c " in entry["command"]]
    return commands, compiles


def generating_commands(build: Path, outputs: list[str], env: dict[str, str]) -> list[str]:
    """The commands of the custom steps (code generators such as protoc's) that `outputs` need, in build
    order: without the compiles and archives ninja would run first as well, for the libraries that CMake
    makes the generators' targets wait on (protobuf-lite's, for ONNX's generated sources)."""
    custom = {line.rsplit(": ", 1)[0] for line in ninja(build, "-t", "targets", "all", env=env).splitlines()
              if line.endswith(": CUSTOM_COMMAND")}
    needed = [path for path in ninja(build, "-t", "inputs", *outputs, env=env).splitlines() if path in custom]
    if not needed:
        return []
    # -s: each output's own command, not the chain before it
    wanted = set(ninja(build, "-t", "commands", "-s", *needed, env=env).splitlines())
    return [command for command in dict.fromkeys(ninja(build, "-t", "commands", *outputs, env=env).splitlines())
            if command in wanted]


def run_generators(build: Path, outputs: list[str], env: dict[str, str], out: TextIO) -> int:
    """Each of generating_commands in turn, in the build folder, its command line and output written to
    `out`: the first failing one's exit status, 0 when every one ran."""
    for command in generating_commands(build, outputs, env):
        out.write(f"\n$ {command}\n")
        out.flush()
        status = subprocess.run(command, shell=True, cwd=build, stdout=out, stderr=subprocess.STDOUT,
                                env=env).returncode
        if status:
            return status
    return 0
