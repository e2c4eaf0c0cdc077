"""Tell a hand edit of a generated file from the generator's own output, so that none is lost.

A render writes, at the top of `recipe/recipe.yaml`, a digest of each file it generates (the README,
whose generated section is rewritten from the .ci_support files on every render, aside). The autotick
bot's values (context.version, source.sha256, build.number) are left out of the recipe's digest,
because the bot edits them in place and a render keeps them. A file that no longer matches its digest
was edited by hand since it was rendered: a render would lose that edit, so it refuses.
"""

from __future__ import annotations

import difflib
import hashlib
import re

import yaml

from .inputs import RECIPE
from .reader import BoundedLoader, child_key

HEADER = "# A render refuses to overwrite a file it generated once the file no longer matches its digest here:\n"
_DIGEST_LINE = re.compile(r"# ([0-9a-f]{16}) (\S+)\n")
# The first line of each shape is the bot's (context.version, source.sha256, build.number), as the
# template lays them out and as the bot rewrites them: in place.
_BOT_LINES = (re.compile(r"(?m)^(  version: ).*$"), re.compile(r"(?m)^(  sha256: ).*$"),
              re.compile(r"(?m)^(  number: ).*$"))


def _split(text: str) -> tuple[dict[str, str] | None, str]:
    """The digests a recipe's header records (None without a header) and the text below it."""
    if not text.startswith(HEADER):
        return None, text
    digests, at = {}, len(HEADER)
    while line := _DIGEST_LINE.match(text, at):
        digests[line.group(2)] = line.group(1)
        at = line.end()
    return digests, text[at:]


def body(path: str, text: str) -> str:
    """What a file says, without the recipe's header of digests."""
    return _split(text)[1] if path == RECIPE else text


def _digest(path: str, text: str) -> str:
    text = body(path, text)
    if path == RECIPE:
        for line in _BOT_LINES:
            text = line.sub(r"\1(the bot's)", text, count=1)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def stamp(recipe: str, others: dict[str, str]) -> str:
    """The recipe with a header recording the digest of itself and of each other generated file."""
    digests = {RECIPE: _digest(RECIPE, recipe)} | {path: _digest(path, text) for path, text in others.items()}
    return HEADER + "".join(f"# {digest} {path}\n" for path, digest in digests.items()) + recipe


def hand_edited(recipe: str | None, current: dict[str, str | None]) -> list[str]:
    """The files of `current` (path -> text on disk, None when absent) that differ from their recorded digest.

    Without a header in the recipe, only the recipe counts: its header was edited away."""
    recorded, _ = _split(recipe or "")
    if recorded is None:
        return [RECIPE] if recipe is not None else []
    return [path for path, text in current.items()
            if text is not None and path in recorded and recorded[path] != _digest(path, text)]


def _owners(node: yaml.Node, key: str, owner: dict[int, str]) -> None:
    """Map each line to the innermost key whose value spans it."""
    if isinstance(node, yaml.MappingNode):
        # a key that is not text (`? [a]`) is no name: its lines stay its mapping's
        children = [(child_key(key, name.value), name, value) for name, value in node.value
                    if isinstance(name, yaml.ScalarNode)]
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
        document = yaml.compose(current, Loader=BoundedLoader)
    except yaml.YAMLError:
        document = None
    if document is not None:
        _owners(document, "", owner)
    text = _split(current)[1]
    below_stamp = current.count("\n") - text.count("\n")
    old, new = text.splitlines(), _split(rendered)[1].splitlines()
    keys: list[str] = []
    for tag, start, end, _, _ in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        for line in range(start, max(end, start + 1)):
            key = owner.get(below_stamp + min(line, len(old) - 1), "(file)")
            if key not in keys:
                keys.append(key)
    return keys
