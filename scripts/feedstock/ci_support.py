"""Read the CI jobs conda-smithy wrote (`.ci_support/*.yaml`), for the README's build matrix.

conda-smithy owns those files: it writes one per job on every rerender, from conda-forge's pinning,
its migrations and `recipe/variants.yaml`. The generator only reads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict

from .errors import InputError
from .inputs import text
from .reader import validated, version_tuple

CI_SUPPORT = ".ci_support"
MIGRATIONS = f"{CI_SUPPORT}/migrations"
NO_CUDA = "None"  # how conda-forge spells "no CUDA" in cuda_compiler_version


@dataclass(frozen=True)
class CiJob:
    """One `.ci_support/<name>.yaml`: one CI job."""

    name: str
    platform: str
    cuda_version: str | None
    pythons: tuple[str, ...]  # every Python the file lists, as python_label() names it
    suffix: str  # "" or "-novec": the CPU outputs' build with Eigen's vectorization off (recipe/variants.yaml)


def _single(values: list[str]) -> str:
    if len(values) != 1:
        raise ValueError(f"a job's file holds one value here, not {len(values)}")
    return values[0]


class _JobFile(BaseModel):
    """The keys of a job's file the matrix reads; conda-smithy writes many more."""

    model_config = ConfigDict(strict=True, frozen=True)
    target_platform: Annotated[list[str], AfterValidator(_single)]
    cuda_compiler_version: Annotated[list[str], AfterValidator(_single)] = NO_CUDA
    python: list[str] = []
    suffix: Annotated[list[str], AfterValidator(_single)] = ""


class _Migration(BaseModel):
    """The key of a migration the matrix reads; conda-forge's files hold many more."""

    model_config = ConfigDict(strict=True, frozen=True)
    cuda_compiler_version: list[text(rf"{NO_CUDA}|\d{{1,3}}\.\d{{1,3}}", "a CUDA version like 13.0")] = []


def python_label(spec: str) -> str:
    """`3.13.* *_cp313` -> `3.13`; a free-threaded build (`3.14.* *_cp314t`) -> `3.14t`."""
    version, _, build = spec.partition(" ")
    return version.split(".*")[0] + ("t" if build.endswith("t") else "")


def load_jobs(root: Path) -> list[CiJob]:
    folder = root / CI_SUPPORT
    paths = sorted(folder.glob("*.yaml")) if folder.is_dir() else []
    if not paths:
        raise InputError(CI_SUPPORT, "(folder)", "holds no job files; run conda-smithy rerender")
    jobs = []
    for path in paths:
        job = validated(_JobFile, path, f"{CI_SUPPORT}/{path.name}")
        cuda = None if job.cuda_compiler_version == NO_CUDA else job.cuda_compiler_version
        jobs.append(CiJob(path.stem, job.target_platform, cuda, tuple(map(python_label, job.python)), job.suffix))
    return jobs


def migrated_cuda_versions(root: Path) -> dict[str, list[str]]:
    """The CUDA versions each migration in `.ci_support/migrations/` adds, by file: how a new CUDA version
    arrives (conda-forge's bot puts the file there and rerenders)."""
    found = {}
    for path in sorted((root / MIGRATIONS).glob("*.yaml")):
        # conda-forge's file, not ours: read every scalar as the text it is (13.10 stays 13.10), as conda-smithy does
        migration = validated(_Migration, path, f"{MIGRATIONS}/{path.name}", as_text=True)
        if migration.cuda_compiler_version:
            found[f"{MIGRATIONS}/{path.name}"] = [v for v in migration.cuda_compiler_version if v != NO_CUDA]
    return found


def newest_cuda(jobs: list[CiJob], platform: str) -> str | None:
    """The newest CUDA version `platform`'s jobs build: the one the rehearsal and the GPU run take."""
    versions = [job.cuda_version for job in jobs if job.platform == platform and job.cuda_version]
    return max(versions, key=version_tuple, default=None)


def job_file(root: Path, platform: str, cuda: str | None, suffix: str = "") -> Path:
    """The `.ci_support` file of `platform`'s one job that builds `cuda` (None: its CPU job, vectorized unless
    `suffix` names the -novec one)."""
    found = [job for job in load_jobs(root)
             if job.platform == platform and job.cuda_version == cuda and job.suffix == suffix]
    if len(found) != 1:
        raise InputError(CI_SUPPORT, platform, f"{len(found)} jobs build CUDA {cuda or NO_CUDA} with suffix "
                                               f"{suffix!r}; expected one")
    return root / CI_SUPPORT / f"{found[0].name}.yaml"
