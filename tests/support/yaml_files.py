"""YAML files read the way the generator reads its inputs: a key given twice is an error, not last-wins."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from feedstock.reader import load_yaml


def read_yaml(path: Path) -> Any:
    return load_yaml(path, str(path))
