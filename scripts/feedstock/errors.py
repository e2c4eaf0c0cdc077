from __future__ import annotations


class InputError(Exception):
    """A problem in one of the generator's input files, reported as `file: key: problem`."""

    def __init__(self, path: str, key: str, problem: str) -> None:
        super().__init__(f"{path}: {key}: {problem}")
        self.path = path
        self.key = key
        self.problem = problem
