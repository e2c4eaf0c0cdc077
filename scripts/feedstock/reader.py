"""Typed access to parsed YAML that reports every problem as `file: dotted.key: problem`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Set
from typing import Any

import yaml

from .errors import InputError


def load_yaml(path: Path, shown_as: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(shown_as, "(file)", "not found") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "(file)"
        raise InputError(shown_as, where, f"not valid YAML ({getattr(exc, 'problem', exc)})") from None


@dataclass(frozen=True)
class Node:
    """A value inside an input file together with where it was found."""

    value: Any
    file: str
    key: str

    def fail(self, problem: str) -> InputError:
        return InputError(self.file, self.key or "(top level)", problem)

    def _child_key(self, name: str | int) -> str:
        part = str(name)
        if isinstance(name, str) and re.search(r"[.\s]", name):
            part = f'"{name}"'
        return f"{self.key}.{part}" if self.key else part

    def mapping(self, allowed: Set[str], optional: Set[str] = frozenset()) -> dict[str, Node]:
        """The mapping's entries; every allowed key is required unless it is `optional`."""
        required = set(allowed) - set(optional)
        if not isinstance(self.value, dict):
            raise self.fail(f"expected a mapping, got {type_name(self.value)}")
        for name in self.value:
            if not isinstance(name, str):
                raise self.fail(f"keys must be strings, got {name!r}")
        unknown = sorted(set(self.value) - allowed)
        if unknown:
            raise Node(None, self.file, self._child_key(unknown[0])).fail(
                f"unknown key (allowed: {', '.join(sorted(allowed))})"
            )
        missing = sorted(required - set(self.value))
        if missing:
            raise Node(None, self.file, self._child_key(missing[0])).fail("required key is missing")
        return {name: Node(value, self.file, self._child_key(name)) for name, value in self.value.items()}

    def entries(self) -> dict[str, Node]:
        """A mapping whose keys are data (platform names, versions), not a fixed vocabulary."""
        if not isinstance(self.value, dict) or not self.value:
            raise self.fail(f"expected a non-empty mapping, got {type_name(self.value)}")
        for name in self.value:
            if not isinstance(name, str):
                raise self.fail(f"keys must be quoted strings, got {name!r} ({type_name(name)})")
        return {name: Node(value, self.file, self._child_key(name)) for name, value in self.value.items()}

    def items(self, *, allow_empty: bool = False) -> list[Node]:
        if not isinstance(self.value, list):
            raise self.fail(f"expected a list, got {type_name(self.value)}")
        if not self.value and not allow_empty:
            raise self.fail("must not be empty")
        return [Node(value, self.file, f"{self.key}[{i}]") for i, value in enumerate(self.value)]

    def text(self, pattern: str | None = None, what: str | None = None) -> str:
        if not isinstance(self.value, str):
            raise self.fail(f"expected a quoted string, got {type_name(self.value)} {self.value!r}")
        if pattern is not None and not re.fullmatch(pattern, self.value):
            raise self.fail(f"{self.value!r} is not {what or 'of the form ' + pattern}")
        return self.value

    def integer(self, minimum: int, maximum: int) -> int:
        if not isinstance(self.value, int) or isinstance(self.value, bool):
            raise self.fail(f"expected a whole number, got {type_name(self.value)} {self.value!r}")
        if not minimum <= self.value <= maximum:
            raise self.fail(f"{self.value} is outside {minimum}..{maximum}")
        return self.value

    def flag(self) -> bool:
        if not isinstance(self.value, bool):
            raise self.fail(f"expected true or false, got {type_name(self.value)} {self.value!r}")
        return self.value

    def choice(self, options: tuple[str, ...]) -> str:
        value = self.text()
        if value not in options:
            raise self.fail(f"{value!r} is not one of {', '.join(options)}")
        return value


def type_name(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", int: "a number", float: "a decimal number",
            bool: "a boolean", type(None): "nothing"}.get(type(value), type(value).__name__)
