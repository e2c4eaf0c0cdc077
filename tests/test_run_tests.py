"""scripts/run_tests.py: the one command for the suite, its fast tier, or what it is given."""

from __future__ import annotations

import re
import subprocess
import sys

import run_tests
from conftest import REPO


def collected(*args: str) -> set[str]:
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "run_tests.py"), "--collect-only", "-q", "-n", "0",
                           *args], capture_output=True, text=True, cwd=REPO, stdin=subprocess.DEVNULL,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return set(re.findall(r"(?m)^(tests/\S+::\S+)", done.stdout))


def test_a_named_file_runs_alone_and_the_fast_tier_leaves_the_slow_tests_out() -> None:
    everything = collected()
    fast = collected("--fast")
    named = collected("tests/test_matrix.py")
    assert named and all(test.startswith("tests/test_matrix.py::") for test in named)
    assert named < everything
    assert fast < everything
    slow = everything - fast
    assert any(test.startswith("tests/test_rehearsal.py::") for test in slow)
    assert any("conda_smithy" in test or test.startswith("tests/test_conda_smithy.py::test_rerender") for test in slow)
    assert not any(test.startswith("tests/test_rehearsal.py::") for test in fast)


def test_the_full_suite_alone_warns_of_a_disk_with_less_room_than_it_writes() -> None:
    short = (run_tests.SUITE_DISK_GB - 1) * 10**9
    warning = run_tests.disk_warning([], short)
    assert f"{short / 10**9:.1f} GB free" in warning and str(REPO) in warning
    assert run_tests.disk_warning([], run_tests.SUITE_DISK_GB * 10**9) == ""
    # the fast tier of a fresh clone writes 3.2 GB (docs/test-runs.md), a named file less
    assert run_tests.disk_warning(["--fast"], short) == ""
    assert run_tests.disk_warning([str(REPO / "tests" / "test_matrix.py")], short) == ""
