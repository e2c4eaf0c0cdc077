"""The plugin's GPU coverage as a conda solver sees it: `__cuda_arch` (CEP 46), the lowest compute
capability of the machine's GPUs, which conda's CONDA_OVERRIDE_CUDA_ARCH sets by hand.

Each linux-64 CUDA job's plugin, with the run constraints rattler-build renders for it, is put in a
local channel and solved by py-rattler (rattler's solver, which implements CEP 46) for GPUs below,
at and above the oldest architecture of the job's list.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import rattler
from rattler.exceptions import SolverError
from rattler import VirtualPackage, VirtualPackageOverrides

from conftest import CONFIG, REPO
from feedstock.ci_support import load_jobs
from feedstock.rendering import lowest_compute_capability
from rattler_render import render
from support.yaml_files import read_yaml

PLATFORM = "linux-64"
JOBS = [job for job in load_jobs(REPO) if job.platform == PLATFORM and job.cuda_version]


def plugin_record(job_name: str) -> dict:
    """The plugin of one job as a channel's repodata holds it: its real run constraints. Of its run
    requirements only the driver's virtual package, which the other packages it needs would not change."""
    variants = read_yaml(REPO / ".ci_support" / f"{job_name}.yaml")
    # rendered once per Python of the job's file, the same package each time
    (plugin,) = {r.build_string: r for r in render(REPO / "recipe" / "recipe.yaml", variants, PLATFORM, PLATFORM)
                 if r.name == CONFIG.outputs.plugin.name}.values()
    requirements = plugin.recipe["requirements"]
    assert "__cuda" in requirements["run"]
    return {"name": plugin.name, "version": plugin.recipe["package"]["version"], "build": plugin.build_string,
            "build_number": 0, "depends": ["__cuda"], "constrains": [str(c) for c in requirements["run_constraints"]],
            "subdir": PLATFORM, "sha256": "0" * 64, "md5": "0" * 32, "size": 1}


def installable(channel: Path, gpu: str | None, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Whether the solver installs the plugin on a machine whose GPUs' lowest compute capability is `gpu`
    (None: conda finds no GPU architecture), given as conda's overrides give it."""
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA", "13.0")
    monkeypatch.setenv("CONDA_OVERRIDE_CUDA_ARCH", gpu or "")
    detected = VirtualPackage.detect(VirtualPackageOverrides.from_env())
    assert ("__cuda_arch" in {str(v.into_generic().name.normalized) for v in detected}) == (gpu is not None)
    try:
        asyncio.run(rattler.solve(sources=[channel.as_uri()], specs=[CONFIG.outputs.plugin.name],
                                  platforms=[PLATFORM, "noarch"], virtual_packages=detected,
                                  gateway=rattler.Gateway(cache_dir=channel.parent / "cache")))
    except SolverError:
        return False
    return True


@pytest.fixture(params=[job.name for job in JOBS])
def channel(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, str]:
    """A local channel holding one job's plugin, and the oldest architecture of the job's list."""
    record = plugin_record(request.param)
    for subdir, packages in ((PLATFORM, {f"{record['name']}-{record['version']}-{record['build']}.conda": record}),
                             ("noarch", {})):
        (tmp_path / "channel" / subdir).mkdir(parents=True)
        (tmp_path / "channel" / subdir / "repodata.json").write_text(
            json.dumps({"info": {"subdir": subdir}, "packages": {}, "packages.conda": packages}))
    (job,) = [j for j in JOBS if j.name == request.param]
    return tmp_path / "channel", lowest_compute_capability(CONFIG.cuda_lists.get(job.cuda_version, PLATFORM))


def test_the_solver_refuses_the_plugin_below_its_oldest_architecture(channel: tuple[Path, str],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    folder, oldest = channel
    major, minor = map(int, oldest.split("."))
    below = f"{major}.{minor - 1}" if minor else f"{major - 1}.9"
    assert not installable(folder, below, monkeypatch)


@pytest.mark.parametrize("above", [None, "oldest", "12.1", "13.0"])
def test_the_solver_installs_the_plugin_from_its_oldest_architecture_up_or_without_one(
        channel: tuple[Path, str], monkeypatch: pytest.MonkeyPatch, above: str | None) -> None:
    """From the oldest listed GPU up, a future one included (the newest's PTX), and where conda finds no
    GPU architecture (no __cuda_arch: a machine without a GPU, or a conda without CEP 46)."""
    folder, oldest = channel
    assert installable(folder, oldest if above == "oldest" else above, monkeypatch)
