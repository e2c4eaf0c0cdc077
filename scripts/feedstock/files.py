"""Stage 4: write the generated files all at once, or compare them with what is committed."""

from __future__ import annotations

import difflib
import os
import signal
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .errors import InputError
from .rendering import GeneratedFile

if os.name == "nt":
    import msvcrt
else:
    import fcntl

# What a render stages its files as, beside their targets, before it swaps them in (.gitignore lists it).
TEMPORARY_SUFFIX = ".render-tmp"
TEMPORARY_GLOB = f".*{TEMPORARY_SUFFIX}"
# What a render locks while it reads, plans and writes (.gitignore lists it).
LOCK = ".render.lock"
# Folders whose files only the generator writes: one it no longer renders is stale.
OWNED = ("recipe/ep-plugins/*/*.json",)


@dataclass(frozen=True)
class Plan:
    """What a render changes: files to write (new or different) and stale generated files to remove."""

    write: tuple[GeneratedFile, ...]
    remove: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return not self.write and not self.remove


def _stale_files(root: Path, generated: list[GeneratedFile]) -> list[str]:
    wanted = {f.path for f in generated}
    present = sorted({p.relative_to(root).as_posix() for pattern in OWNED for p in root.glob(pattern)})
    return [path for path in present if path not in wanted]


def read(root: Path, path: str) -> str | None:
    try:
        return (root / path).read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return None


def plan(root: Path, generated: list[GeneratedFile]) -> Plan:
    changed = tuple(f for f in generated if read(root, f.path) != f.text)
    return Plan(changed, tuple(_stale_files(root, generated)))


def diff(root: Path, change: Plan) -> str:
    chunks: list[str] = []
    for f in change.write:
        old = read(root, f.path)
        chunks.extend(difflib.unified_diff(
            [] if old is None else old.splitlines(keepends=True), f.text.splitlines(keepends=True),
            fromfile="/dev/null" if old is None else f"a/{f.path}", tofile=f"b/{f.path}",
        ))
    return "".join(line if line.endswith("\n") else line + "\n" for line in chunks)


def leftovers(root: Path) -> list[Path]:
    """Staged files an interrupted render left behind (git ignores them; the next render removes them)."""
    return sorted(p for p in root.glob(f"{TEMPORARY_GLOB}") if p.is_file()) + sorted(
        p for p in root.glob(f"recipe/**/{TEMPORARY_GLOB}") if p.is_file())


@contextmanager
def locked(root: Path) -> Iterator[None]:
    """Hold the tree's render lock: renders run one at a time, so that none reads a file another is swapping
    in, or removes another's staged files as leftovers. The system drops the lock when the process ends.

    The standard library's locks, not a package's: a whole-file lock held for the second or two a
    render takes is all it needs, and one more pinned package would rebuild every checkout's .venv/."""
    fd = None
    try:
        fd = os.open(root / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        if os.name == "nt":
            msvcrt.locking(fd, msvcrt.LK_LOCK, 1)  # waits for another render: 10 tries, a second apart
        else:
            fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError as exc:
        if fd is not None:
            os.close(fd)
        raise InputError(LOCK, "(file)", f"cannot lock the tree ({exc.strerror})") from None
    try:
        yield
    finally:
        if os.name == "nt":
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
        os.close(fd)  # which unlocks, on POSIX


def apply(root: Path, change: Plan) -> None:
    """Write every file or none: stage them all beside their targets, then swap them in.

    An OSError names the file (as `filename`) it happened to, relative to the root."""
    for leftover in leftovers(root):
        leftover.unlink()
    staged: list[tuple[Path, Path]] = []
    try:
        for f in change.write:
            target = root / f.path
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=TEMPORARY_SUFFIX, dir=target.parent)
                staged.append((Path(name), target))
                with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
                    handle.write(f.text)
                os.chmod(name, target.stat().st_mode & 0o777 if target.exists() else 0o644)
            except OSError as exc:
                raise OSError(exc.errno, exc.strerror, f.path) from None
    except BaseException:
        for temp, _ in staged:
            temp.unlink(missing_ok=True)
        raise
    # the swaps are a few renames: an interrupt (Ctrl-C, a CI job's cancel) waits until they are all done,
    # so that the tree is the old one or the new one. Windows has no signal mask: there an interrupt can still
    # fall between two renames, and the next render takes the files left mixed for hand edits (`--force` mends).
    masks = hasattr(signal, "pthread_sigmask")
    if masks:
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        for temp, target in staged:
            os.replace(temp, target)
        for path in change.remove:
            (root / path).unlink()
    finally:
        if masks:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
