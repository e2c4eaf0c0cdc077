"""ONNX Runtime's source for the tests, from where the rehearsal gets it (scripts/standins/sources.py):
the mirror ORT_SOURCE_MIRROR names, or a download into .cache/rehearsal/. Without either, the test skips
with the reason."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from conftest import REPO
from standins import cache_folder
from standins.sources import Sources, SourcesUnavailable, locate

CACHE = cache_folder(REPO)


@cache
def _located(dependencies: tuple[str, ...]) -> Sources | str:
    try:
        return locate(REPO, CACHE, dependencies)
    except SourcesUnavailable as reason:
        return str(reason)


def sources(*dependencies: str) -> Sources:
    """The source tarball and these deps.txt archives, or a skip that says why they cannot be had."""
    located = _located(dependencies)
    if isinstance(located, str):
        pytest.skip(f"ONNX Runtime's source: {located}")
    return located


def read(member: str) -> str:
    """One file of the source tree, by its path below the tree's top folder."""
    return sources().read(member)


def exists(member: str) -> bool:
    return sources().exists(member)


def unpack(into: Path, *members: str) -> Path:
    """Some folders and files of the source tree, with its top folder dropped, in `into`."""
    return sources().unpack(into, *members)


def archives_cmake_took(source_tree: Path) -> set[Path]:
    """The archive each of FetchContent's downloads in the source tree's build folders came from."""
    stamps = source_tree.glob("*/_deps/*-subbuild/*-populate-prefix/src/*-populate-stamp/*-populate-urlinfo.txt")
    return {Path(url) for stamp in stamps for url in re.findall(r"^url\(s\)=(.+)$", stamp.read_text(), re.MULTILINE)}
