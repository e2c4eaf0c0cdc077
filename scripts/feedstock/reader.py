"""Read the generator's YAML inputs, refusing a key given twice, and tell what is wrong with them, one
problem a line: `file: dotted.key: problem`."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pydantic
import yaml
from pydantic_core import InitErrorDetails, PydanticCustomError

from .errors import InputError, Problem


def version_tuple(text: str) -> tuple[int, ...]:
    """`3.12` -> (3, 12), `13.0` -> (13, 0): a version that compares as numbers."""
    return tuple(int(part) for part in text.split("."))


def child_key(parent: str, name: str | int) -> str:
    if isinstance(name, int):
        return f"{parent}[{name}]"
    part = f'"{name}"' if re.search(r"[.\s]", name) else name
    return f"{parent}.{part}" if parent else part


def _duplicate_keys(node: yaml.Node, key: str, shown_as: str, seen: set[int]) -> Iterator[Problem]:
    if id(node) in seen:  # an alias: its keys were checked where its anchor is
        return
    seen.add(id(node))
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
            yield from _duplicate_keys(value_node, child_key(key, name), shown_as, seen)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            yield from _duplicate_keys(item, child_key(key, index), shown_as, seen)


def read_yaml(text: str, shown_as: str) -> tuple[Any, list[Problem]]:
    """What PyYAML's safe loader reads, and a problem for each key given twice in one mapping."""
    loader = yaml.SafeLoader(text)
    try:
        document = loader.get_single_node()
        if document is None:
            return None, []
        return loader.construct_document(document), list(_duplicate_keys(document, "", shown_as, set()))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "(file)"
        raise InputError(shown_as, where, f"not valid YAML ({getattr(exc, 'problem', exc)})") from None
    finally:
        loader.dispose()


def parse_yaml(text: str, shown_as: str) -> Any:
    data, duplicates = read_yaml(text, shown_as)
    if duplicates:
        raise InputError.of(duplicates)
    return data


def read_text(path: Path, shown_as: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
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


def validated(model: type[pydantic.BaseModel], path: Path, shown_as: str, context: dict | None = None) -> Any:
    """The file read into `model`, or an InputError with every problem of it, one per line."""
    data, problems = read_yaml(read_text(path, shown_as), shown_as)
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
                message = f"expected a quoted string, got {NUMBERS[type(error['input'])]} {error['input']!r}"
            elif error["type"].endswith("_type") or error["type"] == "literal_error":
                message += f", got {error['input']!r}"
            if error["loc"][-1:] == ("[key]",):
                message = f"as a key: {message}"
            problems.append(Problem(shown_as, key or "(top level)", message))
    if problems:
        raise InputError.of(problems)
    return model_of_file
