"""Typed access to parsed YAML that reports every problem as `file: dotted.key: problem`.

A file is read in one pass that notes every problem instead of stopping at the first, so that one
run names them all: an accessor whose value is wrong records why and answers None, and the values
inside a wrong one answer None without a word, because their parent's problem covers them. A node
made without a list to note problems in raises at the first one instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import InputError, Problem

# The value of a node whose problem has already been noted.
_UNREADABLE = object()


def version_tuple(text: str) -> tuple[int, ...]:
    """`3.12` -> (3, 12), `13.0` -> (13, 0): a version that compares as numbers."""
    return tuple(int(part) for part in text.split("."))


def child_key(parent: str, name: str | int) -> str:
    part = str(name)
    if isinstance(name, str) and re.search(r"[.\s]", name):
        part = f'"{name}"'
    return f"{parent}.{part}" if parent else part


def _duplicate_keys(node: yaml.Node, key: str, shown_as: str, seen: set[int]) -> Iterator[Problem]:
    if id(node) in seen:  # an alias: its keys were checked where its anchor is
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        first_line: dict[str, int] = {}
        for name_node, value_node in node.value:
            if not isinstance(name_node, yaml.ScalarNode):  # not a name: Node.mapping refuses it
                continue
            name, line = name_node.value, name_node.start_mark.line + 1
            if name in first_line:
                yield Problem(shown_as, child_key(key, name),
                              f"given twice (lines {first_line[name]} and {line}); YAML would keep the last silently")
            else:
                first_line[name] = line
            yield from _duplicate_keys(value_node, child_key(key, name), shown_as, seen)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            yield from _duplicate_keys(item, f"{key}[{index}]", shown_as, seen)


def parse_yaml(text: str, shown_as: str, problems: list[Problem] | None = None) -> Any:
    """What PyYAML's safe loader reads, except that a key given twice in one mapping is an error.

    The duplicates go to `problems` when it is given, so that the rest of the file is still checked.
    """
    loader = yaml.SafeLoader(text)
    try:
        document = loader.get_single_node()
        duplicates = [] if document is None else list(_duplicate_keys(document, "", shown_as, set()))
        if duplicates:
            if problems is None:
                raise InputError.of(duplicates)
            problems.extend(duplicates)
        return None if document is None else loader.construct_document(document)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "(file)"
        raise InputError(shown_as, where, f"not valid YAML ({getattr(exc, 'problem', exc)})") from None
    finally:
        loader.dispose()


def load_yaml(path: Path, shown_as: str, problems: list[Problem] | None = None) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(shown_as, "(file)", "not found") from None
    except UnicodeDecodeError as exc:
        line = exc.object[:exc.start].count(b"\n") + 1
        raise InputError(shown_as, f"line {line}", f"not UTF-8 (byte 0x{exc.object[exc.start]:02x})") from None
    except OSError as exc:
        raise InputError(shown_as, "(file)", f"cannot be read ({exc.strerror})") from None
    return parse_yaml(text, shown_as, problems)


@dataclass(frozen=True)
class Node:
    """A value inside an input file together with where it was found."""

    value: Any
    file: str
    key: str
    problems: list[Problem] | None = field(default=None, compare=False)

    @property
    def readable(self) -> bool:
        return self.value is not _UNREADABLE

    def report(self, problem: str) -> None:
        found = Problem(self.file, self.key or "(top level)", problem)
        if self.problems is None:
            raise InputError(found.path, found.key, found.problem)
        self.problems.append(found)

    def _child(self, name: str | int, value: Any) -> Node:
        key = f"{self.key}[{name}]" if isinstance(name, int) else child_key(self.key, name)
        return Node(value, self.file, key, self.problems)

    def _unreadable(self, name: str) -> Node:
        return self._child(name, _UNREADABLE)

    def mapping(self, allowed: Set[str], optional: Set[str] = frozenset()) -> dict[str, Node]:
        """The mapping's entries; every allowed key is required unless it is `optional`.

        Every required key is in the answer, unreadable when it is missing or the mapping is wrong.
        """
        if not self.readable:
            return {name: self._unreadable(name) for name in sorted(allowed)}
        if not isinstance(self.value, dict):
            self.report(f"expected a mapping, got {type_name(self.value)}")
            return {name: self._unreadable(name) for name in sorted(allowed)}
        fields: dict[str, Node] = {}
        for name, value in self.value.items():
            if not isinstance(name, str):
                self.report(f"keys must be strings, got {name!r}")
            elif name not in allowed:
                self._child(name, value).report(f"unknown key (allowed: {', '.join(sorted(allowed))})")
            else:
                fields[name] = self._child(name, value)
        for name in sorted(set(allowed) - set(optional) - set(fields)):
            if name not in self.value:
                self._child(name, None).report("required key is missing")
            fields[name] = self._unreadable(name)
        return fields

    def child(self, name: str) -> Node:
        """One required key of a mapping whose other keys this reader does not look at."""
        if not self.readable:
            return self._unreadable(name)
        if not isinstance(self.value, dict):
            self.report(f"expected a mapping, got {type_name(self.value)}")
            return self._unreadable(name)
        if name not in self.value:
            self._child(name, None).report("required key is missing")
            return self._unreadable(name)
        return self._child(name, self.value[name])

    def entries(self) -> dict[str, Node]:
        """A mapping whose keys are data (platform names, versions), not a fixed vocabulary."""
        if not self.readable:
            return {}
        if not isinstance(self.value, dict) or not self.value:
            self.report(f"expected a non-empty mapping, got {type_name(self.value)}")
            return {}
        entries = {}
        for name, value in self.value.items():
            if isinstance(name, str):
                entries[name] = self._child(name, value)
            else:
                self.report(f"keys must be quoted strings, got {name!r} ({type_name(name)})")
        return entries

    def items(self, *, allow_empty: bool = False) -> list[Node]:
        if not self.readable:
            return []
        if not isinstance(self.value, list):
            self.report(f"expected a list, got {type_name(self.value)}")
            return []
        if not self.value and not allow_empty:
            self.report("must not be empty")
        return [self._child(index, value) for index, value in enumerate(self.value)]

    def text(self, pattern: str | None = None, what: str | None = None) -> str | None:
        if not self.readable:
            return None
        if not isinstance(self.value, str):
            self.report(f"expected a quoted string, got {type_name(self.value)} {self.value!r}")
            return None
        if pattern is not None and not re.fullmatch(pattern, self.value):
            self.report(f"{self.value!r} is not {what or 'of the form ' + pattern}")
            return None
        return self.value

    def integer(self, minimum: int, maximum: int) -> int | None:
        if not self.readable:
            return None
        if not isinstance(self.value, int) or isinstance(self.value, bool):
            self.report(f"expected a whole number, got {type_name(self.value)} {self.value!r}")
            return None
        if not minimum <= self.value <= maximum:
            self.report(f"{self.value} is outside {minimum}..{maximum}")
            return None
        return self.value

    def flag(self) -> bool | None:
        if not self.readable:
            return None
        if not isinstance(self.value, bool):
            self.report(f"expected true or false, got {type_name(self.value)} {self.value!r}")
            return None
        return self.value

    def choice(self, options: tuple[str, ...]) -> str | None:
        value = self.text()
        if value is not None and value not in options:
            self.report(f"{value!r} is not one of {', '.join(options)}")
            return None
        return value


def type_name(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", int: "a number", float: "a decimal number",
            bool: "a boolean", type(None): "nothing"}.get(type(value), type(value).__name__)
