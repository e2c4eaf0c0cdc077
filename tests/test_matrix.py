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


def test_each_platform_gets_a_cpu_job_and_a_novec_one_and_each_cuda_platform_one_job_per_cuda_version() -> None:
    """Which CUDA versions there are is the pinning's and its migrations' to say; each CUDA job is one of them
    that the config lists or derives a list for on that platform, and no two jobs build the same. Every
    platform's CPU outputs are built twice, vectorized and -novec, the plugin once."""
    found = Counter((job["target_platform"][0], job["cuda_compiler_version"][0], job["suffix"][0])
                    for job in jobs().values())
    assert [key for key, count in found.items() if count > 1] == []
    for suffix in ("", "-novec"):
        assert sorted(p for p, v, s in found if v == "None" and s == suffix) == sorted(CONFIG.platforms), suffix
    cuda_jobs = [(p, v, s) for p, v, s in found if v != "None"]
    assert {p for p, _, _ in cuda_jobs} == set(CONFIG.cuda_platforms)
    assert {s for _, _, s in cuda_jobs} == {""}
    assert [(p, v) for p, v, _ in cuda_jobs if not CONFIG.cuda_lists.get(v, p)] == []


def test_each_cross_compiled_job_builds_in_the_image_of_its_build_machines_job() -> None:
    """A job of a cross-compiled platform runs in the image of the build platform's job with its CUDA version
    and suffix, job for job."""
    images = {(job["target_platform"][0], job["cuda_compiler_version"][0], job["suffix"][0]): job.get("docker_image")
              for job in jobs().values()}
    for target, build in (FORGE.get("build_platform") or {}).items():
        target, build = target.replace("_", "-", 1), build.replace("_", "-", 1)
        variants = [(cuda, suffix) for platform, cuda, suffix in images if platform == target]
        assert variants, target
        for cuda, suffix in variants:
            assert images[target, cuda, suffix] == images[build, cuda, suffix], (target, cuda, suffix)
