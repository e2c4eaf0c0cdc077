#!/usr/bin/env python3
"""Files larger than one transfer carries, cut into pieces and put together again.

    python3 pieces.py cut FILE FOLDER BYTES   FOLDER/<file>.part-NNN of at most BYTES each, and <file>.sha256
    python3 pieces.py join FOLDER INTO        each file cut into FOLDER, whole again in INTO, checked

A call to the GPU machine carries at most 64 MiB there (pack.py cuts the compared wheel into the bundles) and
16 MiB a file back (run.sh cuts the built packages into $OUT); docs/gpu-machine.md, "Building the plugin package on
a GPU", joins those. The standard library alone: the GPU machine's image Python runs it.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

SUFFIX = ".part-"


class PiecesError(Exception):
    pass


def cut(path: Path, folder: Path, limit: int) -> list[Path]:
    """`path` in pieces of at most `limit` bytes in `folder`, in order, and the whole's sha256 beside them, which
    `join` checks."""
    made = []
    digest = hashlib.sha256()
    folder.mkdir(parents=True, exist_ok=True)
    with path.open("rb") as whole:
        while chunk := whole.read(limit):
            digest.update(chunk)
            made.append(folder / f"{path.name}{SUFFIX}{len(made):03d}")
            made[-1].write_bytes(chunk)
    made.append(folder / f"{path.name}.sha256")
    made[-1].write_text(digest.hexdigest() + "\n")
    return made


def join(folder: Path, into: Path) -> list[Path]:
    """Each file `cut` into `folder`, put together in `into`; a PiecesError, and no file in `into` of that name,
    when one differs from the file cut."""
    parts: dict[str, list[Path]] = {}
    for piece in sorted(folder.glob(f"*{SUFFIX}*")):
        parts.setdefault(piece.name.rsplit(SUFFIX, 1)[0], []).append(piece)
    into.mkdir(parents=True, exist_ok=True)
    for name, pieces in parts.items():
        digest = hashlib.sha256()
        with (into / name).open("wb") as whole:
            for piece in pieces:
                chunk = piece.read_bytes()
                digest.update(chunk)
                whole.write(chunk)
        expected = folder / f"{name}.sha256"
        if not expected.is_file() or expected.read_text().strip() != digest.hexdigest():
            # nothing half-right is left where the whole file is looked for
            (into / name).unlink()
            raise PiecesError(f"{name}: its {len(pieces)} pieces put together differ from the file cut "
                              f"({expected.name} {'differs' if expected.is_file() else 'is missing'})")
    return [into / name for name in parts]


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[0] == "cut" and argv[3].isdigit():
        made = cut(Path(argv[1]), Path(argv[2]), int(argv[3]))
    elif len(argv) == 3 and argv[0] == "join":
        try:
            made = join(Path(argv[1]), Path(argv[2]))
        except PiecesError as error:
            print(f"pieces: {error}", file=sys.stderr)
            return 1
    else:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    print("\n".join(map(str, made)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
