"""The jobs conda-smithy wrote (.ci_support/) against what the config asks for.

The files are conda-smithy's output (test_conda_smithy.py shows a rerender leaves them unchanged);
these tests check that the recipe and conda-forge.yml steer it where the config says.
"""

from __future__ import annotations

from collections import Counter


from conftest import CONFIG, REPO
from support.yaml_files import read_yaml

CI_SUPPORT = REPO / ".ci_support"
FORGE = read_yaml(REPO / "conda-forge.yml")


def jobs() -> dict[str, dict]:
    return {p.stem: read_yaml(p) for p in sorted(CI_SUPPORT.glob("*.yaml"))}


def test_jobs_run_for_the_configs_platforms_and_no_other() -> None:
    assert {job["target_platform"][0] for job in jobs().values()} == set(CONFIG.platforms)


def test_each_cuda_platform_gets_one_job_per_cuda_version_and_one_cpu_job() -> None:
    found = Counter((job["target_platform"][0], job["cuda_compiler_version"][0]) for job in jobs().values())
    expected = Counter({(name, version): 1 for name, platform in CONFIG.platforms.items()
                        for version in ["None", *(CONFIG.cuda.versions if platform.cuda else [])]})
    assert found == expected


def test_cross_compiled_platforms_build_in_their_build_machines_image() -> None:
    images = {job["target_platform"][0]: job.get("docker_image") for job in jobs().values()}
    for target, build in (FORGE.get("build_platform") or {}).items():
        assert images[target.replace("_", "-", 1)] == images[build.replace("_", "-", 1)]
