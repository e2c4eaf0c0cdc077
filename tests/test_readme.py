"""The README and the GPU machine's guide stay true where a test can tell: every file of the repository they
name is there."""

from __future__ import annotations

import re

import pytest

from conftest import REPO

# A path in backquotes under one of the repository's own folders; a placeholder (DATE, <package>) is not a file.
NAMED_PATH = re.compile(r"`((?:\.ci|config|docs|recipe|scripts|tests)/[^`\s<>]*)`")


@pytest.mark.parametrize("page", ["README.md", "docs/gpu-machine.md"])
def test_every_file_and_folder_the_page_names_exists(page: str) -> None:
    """A report moved or renamed under docs/, or a script moved, leaves no link pointing at nothing; a name
    with a wildcard must match at least one file."""
    named = {path for path in NAMED_PATH.findall((REPO / page).read_text()) if not re.search(r"[A-Z]{4}", path)}
    missing = [path for path in sorted(named) if not (any(REPO.glob(path)) if "*" in path else (REPO / path).exists())]
    assert named and not missing, missing
