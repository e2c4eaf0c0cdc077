"""Read the generator's YAML inputs, refusing a key given twice, and tell what is wrong with them, one
problem a line: `file: dotted.key: problem`.

Every YAML file the render reads comes through here: the config, and the files the bot and conda-smithy
own (recipe/recipe.yaml's bot fields, conda-forge.yml, .ci_support/). So here alone are the bounds that
keep a hostile or broken file to one line and exit 2, in well under a second and a few megabytes.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pydantic
import yaml
from pydantic_core import InitErrorDetails, PydanticCustomError

from .errors import InputError, Problem, clipped, quoted

# Each limit is many times what the largest input, recipe/recipe.yaml, has, and no input uses an anchor.
# A file past them is no input of ours; within them, pure-Python PyYAML reads any
# file in a fraction of a second (its time goes by values more than by bytes).
MAX_BYTES = 256 * 1024
MAX_VALUES = 10_000
MAX_DEPTH = 50


def version_tuple(text: str) -> tuple[int, ...]:
    """`3.12` -> (3, 12), `13.0` -> (13, 0): a version that compares as numbers."""
    return tuple(int(part) for part in text.split("."))


def child_key(parent: str, name: str | int) -> str:
    if isinstance(name, int):
        return f"{parent}[{name}]"
    # quoted where a dot or a space would misread, escaped where a control character would break the line
    part = json.dumps(clipped(name)) if re.search(r"[.\s]", name) or not name.isprintable() else clipped(name)
    return f"{parent}.{part}" if parent else part


class _Refused(yaml.MarkedYAMLError):
    """YAML that is valid but that no input here needs, and that a hostile file uses."""


class _Bounded:
    """A PyYAML loader that, as it composes each node and before it builds anything, refuses anchors and
    aliases (a 10 KB file of nested aliases expands to gigabytes), more than MAX_VALUES nodes and nesting
    deeper than MAX_DEPTH (the composer recurses once per level: Python would run out of stack)."""

    _depth = 0
    _values = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or event.anchor is not None:
            written = f"{'*' if isinstance(event, yaml.AliasEvent) else '&'}{event.anchor}"
            raise _Refused(problem=f"{clipped(written)}: YAML anchors and aliases are refused, as no input needs "
                                   "them and a few lines of them can expand to gigabytes",
                           problem_mark=event.start_mark)
        if self._depth == MAX_DEPTH:
            raise _Refused(problem=f"nested deeper than {MAX_DEPTH} levels", problem_mark=event.start_mark)
        if self._values == MAX_VALUES:
            raise _Refused(problem=f"more than {MAX_VALUES:,} values, far more than an input has",
                           problem_mark=event.start_mark)
        self._values += 1
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except ValueError as exc:  # Python refuses the value (an integer of 5,000 digits, a 13th month)
            raise _Refused(problem=f"{quoted(node.value)} cannot be read ({clipped(str(exc))})",
                           problem_mark=node.start_mark) from None


class BoundedLoader(_Bounded, yaml.SafeLoader):
    """PyYAML's safe loader, within the bounds."""


class _TextLoader(_Bounded, yaml.BaseLoader):
    """Reads every scalar as the text it is (13.10 stays 13.10), as conda-smithy reads conda-forge's files."""


def _duplicate_keys(node: yaml.Node, key: str, shown_as: str) -> Iterator[Problem]:
    if isinstance(node, yaml.MappingNode):
        first_line: dict[str, int] = {}
        for name_node, value_node in node.value:
            if not isinstance(name_node, yaml.ScalarNode):  # not a name: the model refuses it
                continue
            name, line = name_node.value, name_node.start_mark.line + 1
            if name in first_line:
                yield Problem(shown_as, child_key(key, name),
                              f"given twice (lines {first_line[name]} and {line}); YAML would keep the last silently")
            else:
                first_line[name] = line
            yield from _duplicate_keys(value_node, child_key(key, name), shown_as)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            yield from _duplicate_keys(item, child_key(key, index), shown_as)


def read_yaml(text: str, shown_as: str, *, as_text: bool = False) -> tuple[Any, list[Problem]]:
    """What PyYAML's safe loader reads (or, `as_text`, its base loader), and a problem for each key given twice
    in one mapping."""
    try:
        loader = (_TextLoader if as_text else BoundedLoader)(text)  # a NUL byte is refused already here
        try:
            document = loader.get_single_node()
            if document is None:
                return None, []
            return loader.construct_document(document), list(_duplicate_keys(document, "", shown_as))
        finally:
            loader.dispose()
    except yaml.reader.ReaderError as exc:  # what PyYAML's reader refuses: a NUL byte, a control character
        line = text.count("\n", 0, exc.position) + 1
        raise InputError(shown_as, f"line {line}", f"not valid YAML (character #x{exc.character:04x} is not "
                                                   "allowed)") from None
    except yaml.MarkedYAMLError as exc:  # what its scanner, parser, composer and constructor refuse, and ours
        where = f"line {exc.problem_mark.line + 1}" if exc.problem_mark else "(file)"
        said = exc.problem if isinstance(exc, _Refused) else f"not valid YAML ({clipped(str(exc.problem))})"
        raise InputError(shown_as, where, said) from None


def parse_yaml(text: str, shown_as: str) -> Any:
    data, duplicates = read_yaml(text, shown_as)
    if duplicates:
        raise InputError.of(duplicates)
    return data


def read_text(path: Path, shown_as: str) -> str:
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_BYTES + 1)  # never more: the file may be huge, or endless (/dev/zero)
            if len(data) > MAX_BYTES:
                size = max(os.fstat(handle.fileno()).st_size, len(data))
                raise InputError(shown_as, "(file)", f"{size:,} bytes, more than an input may have "
                                                     f"({MAX_BYTES // 1024} KiB)")
        return data.decode("utf-8")
    except FileNotFoundError:
        raise InputError(shown_as, "(file)", "not found") from None
    except UnicodeDecodeError as exc:
        line = exc.object[:exc.start].count(b"\n") + 1
        raise InputError(shown_as, f"line {line}", f"not UTF-8 (byte 0x{exc.object[exc.start]:02x})") from None
    except OSError as exc:
        raise InputError(shown_as, "(file)", f"cannot be read ({exc.strerror})") from None


def load_yaml(path: Path, shown_as: str) -> Any:
    return parse_yaml(read_text(path, shown_as), shown_as)


# pydantic's words for a key of a mapping that the model has no field for, or lacks
IN_OUR_WORDS = {"extra_forbidden": "unknown key", "missing": "required key is missing"}
# YAML reads 1.24 and 13.0 as numbers, where the config means text: the message says to quote them
NUMBERS = {int: "a number", float: "a decimal number"}


def fail(*problems: tuple[tuple[str | int, ...], str]) -> None:
    """Raise, from inside a validator, each (location below the value validated, problem) there is: pydantic
    adds them to the file's other problems, each at its own key."""
    if problems:
        raise pydantic.ValidationError.from_exception_data("feedstock", [
            InitErrorDetails(type=PydanticCustomError("feedstock", "{problem}", {"problem": problem}), loc=loc,
                             input=None) for loc, problem in problems])


def validated(model: type[pydantic.BaseModel], path: Path, shown_as: str, context: dict | None = None, *,
              as_text: bool = False) -> Any:
    """The file read into `model`, or an InputError with every problem of it, one per line."""
    data, problems = read_yaml(read_text(path, shown_as), shown_as, as_text=as_text)
    try:
        model_of_file = model.model_validate(data, context=context)
    except pydantic.ValidationError as exc:
        for error in exc.errors(include_url=False):
            key = ""
            for name in error["loc"]:
                key = key if name == "[key]" else child_key(key, name)
            message = str(error["ctx"]["error"]) if error["type"] == "value_error" else \
                IN_OUR_WORDS.get(error["type"], error["msg"])
            if error["type"] == "string_type" and type(error["input"]) in NUMBERS:
                message = f"expected a quoted string, got {NUMBERS[type(error['input'])]} {quoted(error['input'])}"
            elif error["type"].endswith("_type") or error["type"] == "literal_error":
                message += f", got {quoted(error['input'])}"
            if error["loc"][-1:] == ("[key]",):
                message = f"as a key: {message}"
            problems.append(Problem(shown_as, key or "(top level)", message))
    if problems:
        raise InputError.of(problems)
    return model_of_file
