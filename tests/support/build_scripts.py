"""The recipe's build scripts run here as rattler-build runs them, with the stand-in tools of
support/fake_tools.py, and what those tools were asked to do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support.fake_tools import FakeTools


def run_build_script(script: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A build script run with Python, as rattler-build runs a .py script, with warnings as errors so that
    nothing it does only warns about passes here. For a Windows target every name in the environment is in
    capitals, as Windows' os.environ has them (target_platform too)."""
    if env.get("target_platform", "").startswith("win-"):
        env = {name.upper(): value for name, value in env.items()}
    return subprocess.run([sys.executable, "-W", "error", str(script)], env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=60)


def configure_args(tools: FakeTools) -> list[str]:
    """The arguments of the one `cmake -S ...` (configure) the script ran."""
    (configure,) = [call["args"] for call in tools.calls("cmake") if call["args"][:1] == ["-S"]]
    return configure


def build_targets(tools: FakeTools) -> list[str]:
    """The targets of every `cmake --build DIR --target T... [--option ...]`, in order."""
    targets = []
    for call in tools.calls("cmake"):
        if "--build" in call["args"]:
            after = call["args"][call["args"].index("--target") + 1:]
            targets += after[:next((i for i, arg in enumerate(after) if arg.startswith("--")), len(after))]
    return targets


def parallel_jobs(tools: FakeTools) -> int:
    """The `--parallel N` of the one `cmake --build` the script ran."""
    (build,) = [call["args"] for call in tools.calls("cmake") if "--build" in call["args"]]
    assert build[-2] == "--parallel", build
    return int(build[-1])
