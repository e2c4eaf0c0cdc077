from __future__ import annotations

from dataclasses import dataclass

# How much of a value a message quotes: enough to recognise it, never a whole (maybe hostile) file.
QUOTED = 80
# Problems printed: the first ones say what is wrong, and thousands (a file of unknown keys) would bury them.
SHOWN = 20


def clipped(text: str) -> str:
    return text if len(text) <= QUOTED else text[:QUOTED] + "..."


def quoted(value: object) -> str:
    """The value as Python writes it (control characters escaped), cut to QUOTED characters."""
    return clipped(repr(value))


@dataclass(frozen=True)
class Problem:
    """One thing wrong with one value of an input file."""

    path: str
    key: str
    problem: str

    def __str__(self) -> str:
        return f"{self.path}: {self.key}: {self.problem}"


class InputError(Exception):
    """Problems in the generator's input files, one line each: `file: dotted.key: problem`; past the first
    SHOWN, one line counts the rest."""

    def __init__(self, path: str, key: str, problem: str, *more: Problem) -> None:
        self.problems = (Problem(path, key, problem), *more)
        lines = [str(p) for p in self.problems[:SHOWN]]
        if len(self.problems) > SHOWN:
            lines.append(f"... and {len(self.problems) - SHOWN:,} more problems")
        super().__init__("\n".join(lines))

    @classmethod
    def of(cls, problems: list[Problem]) -> InputError:
        first, *more = problems
        return cls(first.path, first.key, first.problem, *more)
