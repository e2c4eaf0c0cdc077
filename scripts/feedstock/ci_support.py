"""Read the CI jobs conda-smithy wrote (`.ci_support/*.yaml`), for the README's build matrix.

conda-smithy owns those files: it writes one per job on every rerender, from conda-forge's pinning,
its migrations and `recipe/variants.yaml`. The generator only reads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .errors import InputError
from .reader import Node, load_yaml

CI_SUPPORT = ".ci_support"
NO_CUDA = "None"  # how conda-forge spells "no CUDA" in cuda_compiler_version


@dataclass(frozen=True)
class CiJob:
    """One `.ci_support/<name>.yaml`: one CI job."""

    name: str
    platform: str
    cuda_version: str | None
    pythons: tuple[str, ...]  # every Python the file lists, `3.13` for `3.13.* *_cp313`


def _single(entries: dict[str, Node], key: str) -> str:
    values = entries[key].items()
    if len(values) != 1:
        # a Node without a problem list raises on its first report
        entries[key].report(f"a job's file holds one value here, not {len(values)}")
    return values[0].text()


def load_jobs(root: Path) -> list[CiJob]:
    folder = root / CI_SUPPORT
    paths = sorted(folder.glob("*.yaml")) if folder.is_dir() else []
    if not paths:
        raise InputError(CI_SUPPORT, "(folder)", "holds no job files; run conda-smithy rerender")
    jobs = []
    for path in paths:
        shown = f"{CI_SUPPORT}/{path.name}"
        top = Node(load_yaml(path, shown), shown, "")
        keys = set(top.value) if isinstance(top.value, dict) else set()
        entries = top.mapping(keys | {"target_platform"}, optional=keys - {"target_platform"})
        cuda = _single(entries, "cuda_compiler_version") if "cuda_compiler_version" in entries else NO_CUDA
        pythons = tuple(v.text().split(".*")[0] for v in entries["python"].items()) if "python" in entries else ()
        jobs.append(CiJob(path.stem, _single(entries, "target_platform"), None if cuda == NO_CUDA else cuda, pythons))
    return jobs
