from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with one value of an input file."""

    path: str
    key: str
    problem: str

    def __str__(self) -> str:
        return f"{self.path}: {self.key}: {self.problem}"


class InputError(Exception):
    """Problems in the generator's input files, one line each: `file: dotted.key: problem`."""

    def __init__(self, path: str, key: str, problem: str, *more: Problem) -> None:
        self.problems = (Problem(path, key, problem), *more)
        super().__init__("\n".join(map(str, self.problems)))

    @classmethod
    def of(cls, problems: list[Problem]) -> InputError:
        first, *more = problems
        return cls(first.path, first.key, first.problem, *more)
