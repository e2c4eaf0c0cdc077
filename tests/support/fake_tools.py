"""Recording stand-ins for the programs the recipe's scripts call (cmake, ctest, python, nvidia-smi,
powershell, a package's console scripts), first on PATH, so that a test runs a script and looks at what it did."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

# Appends one JSON line per call to $FAKE_TOOL_LOG and answers the few questions the scripts ask
# (`python -c ...`, `nvidia-smi -L`, PowerShell's free memory in KiB: $FAKE_FREE_MEMORY_KIB). The python
# stand-in hands the script named in $FAKE_PYTHON_RUNS to the real interpreter.
FAKE_TOOL = """#!{python}
import json, os, sys

tool, args = os.path.basename(sys.argv[0]), sys.argv[1:]
with open(os.environ["FAKE_TOOL_LOG"], "a") as log:
    watched = ("GTEST_FILTER", "LD_PRELOAD", "LDFLAGS")
    log.write(json.dumps({{"tool": tool, "args": args, "cwd": os.getcwd(),
                           "env": {{name: os.environ.get(name) for name in watched}}}}) + "\\n")
if tool == "nvidia-smi":
    print(os.environ.get("FAKE_GPU_LIST", ""))
elif tool == "powershell":
    print(os.environ.get("FAKE_FREE_MEMORY_KIB", ""))
elif args[:1] == ["-c"] and "ctypes" in args[1]:
    sys.exit(0 if os.environ.get("FAKE_DRIVER") == "1" else 1)
elif args[:1] == ["-c"]:
    print("/fake/answer/to/" + args[1].split(";")[0])
elif args and os.path.basename(args[0]) == os.environ.get("FAKE_PYTHON_RUNS"):
    os.execv(sys.executable, [sys.executable, *args])
"""


class FakeTools:
    """A directory of recording stand-ins, first on PATH, and what they recorded."""

    def __init__(self, directory: Path, *names: str) -> None:
        self.bin = directory / "bin"
        self.bin.mkdir(parents=True)
        self.log = directory / "calls.jsonl"
        for name in names:
            tool = self.bin / name
            tool.write_text(FAKE_TOOL.format(python=sys.executable))
            tool.chmod(0o755)

    def env(self, **variables: str) -> dict[str, str]:
        return {"PATH": f"{self.bin}{os.pathsep}{os.environ['PATH']}", "HOME": os.environ.get("HOME", "/"),
                "FAKE_TOOL_LOG": str(self.log), **variables}

    def calls(self, tool: str) -> list[dict]:
        if not self.log.exists():
            return []
        calls = [json.loads(line) for line in self.log.read_text().splitlines()]
        return [call for call in calls if call["tool"] == tool]
