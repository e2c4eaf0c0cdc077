"""Shared fixtures: the repository, ../shared beside it, and a scratch copy of the feedstock."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from feedstock.ci_support import job_file, load_jobs, newest_cuda
from feedstock.inputs import load_config

if TYPE_CHECKING:
    from support.smithy import Smithy

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"


# The feedstock's config, as the generator reads and validates it
CONFIG = load_config(REPO)
# The oldest core the plugin supports, as the feedstock's config states it
FLOOR_CORE_VERSION = CONFIG.min_core_version
# the job file of osx-arm64's (vectorized) CPU job, as conda-smithy names it
OSX_CPU_JOB = job_file(REPO, "osx-arm64", None).relative_to(REPO).as_posix()
# the job file of linux-64's newest CUDA job: the one the rehearsal and the GPU run build
NEWEST_CUDA_JOB = job_file(REPO, "linux-64", newest_cuda(load_jobs(REPO), "linux-64"))


@pytest.fixture
def shared() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is not here: the schemas and facts it holds are needed")
    return SHARED


@pytest.fixture(scope="session")
def gcc() -> str:
    """The C compiler that builds the ELF libraries some tests load or audit."""
    compiler = shutil.which("gcc")
    if compiler is None or sys.platform != "linux":
        pytest.skip("needs gcc on linux to build ELF libraries")
    return compiler


@pytest.fixture(scope="session")
def gxx() -> str:
    """The C++ compiler that compiles the programs users build against the packages."""
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("needs a C++ compiler")
    return compiler


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that needs the real conda-smithy (installed from source, then run for seconds a call) is slow:
    `scripts/run_tests.py --fast` leaves it out. The rehearsals and channel builds carry the mark themselves."""
    for item in items:
        if "conda_smithy" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def conda_smithy(request: pytest.FixtureRequest) -> "Smithy":
    """The real conda-smithy in its own cached environment (tests/support/smithy.py)."""
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is not here: conda-smithy's sources and conda-forge's pinning are in it")
    from support.smithy import install

    smithy = install(SHARED / "thirdparty", REPO / ".cache")
    took = f"installed in {smithy.install_seconds:.1f} s" if smithy.install_seconds else "reused from the cache"
    # said past pytest's capture, so that every run shows what the conda-smithy tests cost
    with request.config.pluginmanager.getplugin("capturemanager").global_and_fixture_disabled():
        print(f"\nconda-smithy: {took} ({smithy.env.relative_to(REPO)})")
    return smithy


@pytest.fixture
def feedstock(tmp_path: Path) -> Path:
    """A copy of the generator's inputs and outputs that a test may change freely."""
    root = tmp_path / "feedstock"
    for name in ("config", "recipe", ".ci_support", "scripts"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("README.md", "conda-forge.yml"):
        shutil.copy2(REPO / name, root / name)
    return root
