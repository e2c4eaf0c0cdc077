"""A feedstock tree's files as a render leaves them, to tell a render that wrote nothing."""

from __future__ import annotations

import hashlib
from pathlib import Path

from feedstock.files import LOCK


def snapshot(root: Path) -> dict[str, str]:
    """Every file of the tree outside scripts/ and .venv/, but for the render's lock, with its hash: what
    'untouched' means."""
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and not {"scripts", ".venv", LOCK} & set(p.parts)}
