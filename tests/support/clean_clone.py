"""The working tree as a clean clone of it would hold it, and git run in such a copy."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from conftest import REPO

GIT_IDENTITY = {"GIT_AUTHOR_NAME": "test", "GIT_AUTHOR_EMAIL": "test@localhost",
                "GIT_COMMITTER_NAME": "test", "GIT_COMMITTER_EMAIL": "test@localhost"}


def git(root: Path, *args: str) -> str:
    result = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True,
                            env={**os.environ, **GIT_IDENTITY}, stdin=subprocess.DEVNULL)
    return result.stdout


def clean_copy(tmp_path: Path) -> Path:
    """The working tree as a fresh one-commit repository: what a clean clone of it would hold.

    The folder is named like the feedstock's repository, as a clone of it would be."""
    root = tmp_path / "onnxruntime-feedstock"
    for name in git(REPO, "ls-files", "--cached", "--others", "--exclude-standard", "-z").split("\0"):
        if name and (REPO / name).is_file():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, root / name)
    git(root, "init", "--quiet")
    git(root, "add", "--all")
    git(root, "commit", "--quiet", "-m", "snapshot")
    return root
