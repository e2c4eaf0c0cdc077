"""Tell a hand edit of `recipe/recipe.yaml` from the generator's own output, so that none is lost.

A render stamps the recipe with a digest of what it wrote. The autotick bot's values (context.version,
source.sha256, build.number) are left out of the digest, because the bot edits them in place and a
render keeps them. A recipe that no longer matches its digest was edited by hand since it was
rendered: whatever else changed in the config, a render would lose that edit, so it refuses.
"""

from __future__ import annotations

import difflib
import hashlib
import re

import yaml

from .reader import child_key

STAMP = "# render digest {digest}: a render refuses to overwrite this file once it no longer matches\n"
_STAMP_LINE = re.compile(r"# render digest ([0-9a-f]{64}): .*\n")
# The first line of each shape is the bot's (context.version, source.sha256, build.number), as the
# template lays them out and as the bot rewrites them: in place.
_BOT_LINES = (re.compile(r"(?m)^(  version: ).*$"), re.compile(r"(?m)^(  sha256: ).*$"),
              re.compile(r"(?m)^(  number: ).*$"))


def _digest(body: str) -> str:
    for line in _BOT_LINES:
        body = line.sub(r"\1(the bot's)", body, count=1)
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def _split(text: str) -> tuple[str | None, str]:
    """The stamped digest (None without a stamp) and the text below it."""
    stamp = _STAMP_LINE.match(text)
    return (stamp.group(1), text[stamp.end():]) if stamp else (None, text)


def stamp(body: str) -> str:
    return STAMP.format(digest=_digest(body)) + body


def is_hand_edited(text: str) -> bool:
    digest, body = _split(text)
    return digest != _digest(body)


def same_apart_from_stamp(text: str, other: str) -> bool:
    return _split(text)[1] == _split(other)[1]


def _owners(node: yaml.Node, key: str, owner: dict[int, str]) -> None:
    """Map each line to the innermost key whose value spans it."""
    if isinstance(node, yaml.MappingNode):
        children = [(child_key(key, name.value), name, value) for name, value in node.value]
    elif isinstance(node, yaml.SequenceNode):
        children = [(f"{key}[{index}]", item, item) for index, item in enumerate(node.value)]
    else:
        return
    for child, first, last in children:
        end = last.end_mark.line - (1 if last.end_mark.column == 0 else 0)
        for line in range(first.start_mark.line, max(end, first.start_mark.line) + 1):
            owner[line] = child
        _owners(last, child, owner)


def edited_keys(current: str, rendered: str) -> list[str]:
    """The keys of `current` whose lines a render would change, in file order."""
    owner: dict[int, str] = {}
    try:
        document = yaml.compose(current, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        document = None
    if document is not None:
        _owners(document, "", owner)
    body = _split(current)[1]
    below_stamp = current.count("\n") - body.count("\n")
    old, new = body.splitlines(), _split(rendered)[1].splitlines()
    keys: list[str] = []
    for tag, start, end, _, _ in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        for line in range(start, max(end, start + 1)):
            key = owner.get(below_stamp + min(line, len(old) - 1), "(file)")
            if key not in keys:
                keys.append(key)
    return keys
