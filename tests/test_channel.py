"""Every linux-64 job's requirements resolve against the stand-in channel (scripts/resolve.py).

rattler-build renders each `.ci_support` file and solves its build and host environments against a
channel of stand-ins built by rattler-build from scripts/rehearsal/standins.yaml; rattler's solver
solves each test section's environment. A requirement the channel cannot meet fails the command and
is named, whether misspelled, mis-pinned or asked for by a test.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
RESOLVE = REPO / "scripts" / "resolve.py"


def resolve(feedstock: Path, channel: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(RESOLVE), "--feedstock", str(feedstock), "--channel", str(channel)],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600)


@pytest.fixture(scope="module")
def channel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("channel")


def test_every_linux_64_job_resolves_its_build_host_and_test_environments(channel: Path) -> None:
    done = resolve(REPO, channel)
    assert done.returncode == 0, done.stdout + done.stderr
    jobs = sorted(p.name for p in (REPO / ".ci_support").glob("linux_64_*.yaml"))
    said = {line.split(":")[0] for line in done.stdout.splitlines() if not line.startswith(" ")}
    assert said == set(jobs), done.stdout
    environments = re.findall(r"^  (build|host|test \d+): (\d+) packages$", done.stdout, re.MULTILINE)
    assert environments and all(int(count) > 0 for _, count in environments), done.stdout
    # every output a job builds shows its build and host environments, and the plugin its test environments
    for block in re.split(r"^(?=\S)", done.stdout, flags=re.MULTILINE):
        if block.strip():
            assert "  build: " in block and "  host: " in block, block
            if "onnxruntime-ep-cuda" in block.splitlines()[0]:
                assert re.search(r"^  test \d+: ", block, re.MULTILINE), block


@pytest.mark.parametrize(("before", "after", "named"), [
    ("        - libcublas-dev\n", "        - libcublass-dev\n", "libcublass-dev"),
    ("        - cmake >=3.28,<4\n", "        - cmake >=5\n", "cmake >=5"),
], ids=["misspelled", "mis-pinned"])
def test_a_build_or_host_requirement_the_channel_cannot_meet_fails_naming_it(
        feedstock: Path, channel: Path, before: str, after: str, named: str) -> None:
    recipe = feedstock / "recipe" / "recipe.yaml"
    text = recipe.read_text()
    assert before in text
    recipe.write_text(text.replace(before, after, 1))
    done = resolve(feedstock, channel)
    assert done.returncode == 1, done.stdout + done.stderr
    assert named in done.stderr, done.stderr


def test_a_test_requirement_the_channel_cannot_meet_fails_naming_it(feedstock: Path, channel: Path) -> None:
    recipe = feedstock / "recipe" / "recipe.yaml"
    text = recipe.read_text()
    assert text.count("            - onnxruntime ==1.24.4\n") == 1
    recipe.write_text(text.replace("            - onnxruntime ==1.24.4\n", "            - onnxruntime ==1.24.5\n"))
    done = resolve(feedstock, channel)
    assert done.returncode == 1, done.stdout + done.stderr
    failed = [line for line in done.stdout.splitlines() if "FAILED" in line]
    assert failed and all("onnxruntime" in line for line in failed), done.stdout
    # only the floor's load test fails, once for each CUDA job
    cuda_jobs = [p for p in (REPO / ".ci_support").glob("linux_64_*.yaml") if "cuda_compiler_versionNone" not in p.name]
    assert len(failed) == len(cuda_jobs), done.stdout
