"""A maintainer's edits of a feedstock copy's config/feedstock.yaml that take jobs away."""

from __future__ import annotations

import re
from pathlib import Path


def drop(root: Path, pattern: str, replacement: str = "") -> None:
    """Replace every line the multi-line `pattern` matches in the config; it must match."""
    config = root / "config" / "feedstock.yaml"
    text, count = re.subn(pattern, replacement, config.read_text(), flags=re.MULTILINE)
    assert count, pattern
    config.write_text(text)


def drop_cuda_version(root: Path, version: str) -> None:
    """cuda.versions without `version` and its architecture lists."""
    drop(root, rf'^    "{re.escape(version)}":\n(?:(?:      |        |        #).*\n)+')


def drop_win_64(root: Path) -> None:
    """The config without win-64: the platform, its architecture lists, its runner and its vendored licence."""
    drop(root, r"^  win-64:\n")
    drop(root, r"^        win-64: .*\n")
    drop(root, r"^  win: namespace-profile.*\n")
    drop(root, r"^    - \{dep: microsoft_wil.*\n")
