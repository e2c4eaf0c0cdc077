#!/usr/bin/env python3
"""What a GPU run does, decided here by pack.py and read on the GPU machine by package.py, report.py and run.sh.

    python3 plan.py PLAN inputs       every input the bundles carry, one a line
    python3 plan.py PLAN purpose      package, cost, cpu or speed
    python3 plan.py PLAN build-dir    the plugin's build folder inside its source tree (ORT_BUILD_DIR)
    python3 plan.py PLAN outputs      the recipe's outputs the run builds, one a line

PLAN is bundle-1/plan.json. The standard library alone: run.sh reads the plan before any wheel is installed.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import types
import typing
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal, NamedTuple

Purpose = Literal["package", "cost", "cpu", "speed"]


class PlanError(Exception):
    pass


class Setting(NamedTuple):
    """One setting in which a GPU run's build differs from conda-forge's, and why."""

    name: str
    value: str
    reason: str


@dataclass(frozen=True)
class Overrides:
    """The settings put in the device's copy of the recipe: values of its context, script variables of the
    outputs built, and CMake cache settings."""

    context: tuple[Setting, ...] = ()
    env: tuple[Setting, ...] = ()
    cmake: tuple[Setting, ...] = ()


@dataclass(frozen=True)
class Job:
    """A `.ci_support` file, by its path in the feedstock, and the CUDA version it builds (None: a CPU job)."""

    file: str
    cuda: str | None = None


@dataclass(frozen=True)
class Cores:
    """The PyPI cores the stand-in channel carries as `onnxruntime`: the plugin's floor and the newest (for a speed
    run without an earlier run's core, the recipe's version: the core it measures the plugin in)."""

    floor: str
    newest: str


@dataclass(frozen=True)
class SuiteRun:
    """One run of upstream's operator suite against the installed plugin, in an environment with `core`:
    a PyPI core of the stand-in channel, or this feedstock's onnxruntime or onnxruntime-novec that an earlier run
    built (the plan's `core`); `cudnn` False runs the suite with cuDNN hidden from the plugin (its own switch)."""

    name: str
    core: str
    feedstock_core: bool = False
    cudnn: bool = True


@dataclass(frozen=True)
class OperatorSuite:
    """Upstream's operator suite for the CUDA plugin, by its path inside the source tree (the tarball less its
    top folder), its runs, and the wheels it runs with (pytest and its plugins), by their paths in the bundles."""

    path: str
    runs: tuple[SuiteRun, ...]
    tools: tuple[str, ...] = ()


@dataclass(frozen=True)
class Compared:
    """The wheel a speed run measures the plugin against, carried in pieces (pieces.py) in `folder`."""

    requirement: str
    folder: str = "compare"


@dataclass(frozen=True)
class Plan:
    """One GPU run. `jobs` are the jobs whose stand-ins the channel holds, the first the one built; `outputs`
    the recipe's outputs built (none: the run installs `package`, an earlier run's plugin); `package` and
    `core` are earlier runs' packages by their paths in the bundles; `patches`, of ONNX Runtime's source, go on
    top of the recipe's for this run alone (the speed run measures them), by their paths in the bundles;
    `inputs` every file the bundles carry, which the run waits for."""

    purpose: Purpose
    version: str
    jobs: tuple[Job, ...]
    outputs: tuple[str, ...]
    overrides: Overrides
    # the plugin's build environment as rattler-build renders it for the built job (none for the CPU packages)
    script_env: dict[str, str] = dataclasses.field(default_factory=dict)
    cores: Cores | None = None
    operator_suite: OperatorSuite | None = None
    package: str | None = None
    core: str | None = None
    compare: Compared | None = None
    patches: tuple[str, ...] = ()
    inputs: tuple[str, ...] = ()

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(dataclasses.asdict(self), indent=1, sort_keys=True) + "\n")


def _typed(kind, value, where: str):
    """`value`, read from JSON, as `kind` (a PlanError naming `where` when it is not one)."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (kind,) = [arg for arg in args if arg is not type(None)]
        return _typed(kind, value, where)
    if origin is Literal:
        if value not in args:
            raise PlanError(f"{where}: {value!r} is none of {', '.join(args)}")
        return value
    if origin is tuple and isinstance(value, list):
        return tuple(_typed(args[0], item, f"{where}[{i}]") for i, item in enumerate(value))
    if origin is dict and isinstance(value, dict):
        return {_typed(args[0], k, where): _typed(args[1], v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(kind, type) and (dataclasses.is_dataclass(kind) or issubclass(kind, tuple)):
        hints = typing.get_type_hints(kind)
        if issubclass(kind, tuple) and isinstance(value, list):  # a NamedTuple, which JSON keeps as a list
            if len(value) != len(hints):
                raise PlanError(f"{where}: {len(value)} values, not {len(hints)} ({', '.join(hints)})")
            value = dict(zip(hints, value, strict=True))
        if not isinstance(value, dict):
            raise PlanError(f"{where}: {value!r} is not a {kind.__name__}")
        unknown = set(value) - set(hints)
        if unknown:
            raise PlanError(f"{where}: no such field {', '.join(sorted(unknown))} in {kind.__name__}")
        try:
            return kind(**{name: _typed(hints[name], item, f"{where}.{name}") for name, item in value.items()})
        except TypeError as error:  # a field without a default is missing
            raise PlanError(f"{where}: {error}") from None
    if isinstance(kind, type) and isinstance(value, kind):
        return value
    raise PlanError(f"{where}: {value!r} is not {getattr(kind, '__name__', kind)}")


def package_name(path: str) -> str:
    """The name of a conda package, from its file's name (name-version-build.conda)."""
    return PurePosixPath(path).name.rsplit("-", 2)[0]


def load(path: Path) -> Plan:
    """The plan pack.py wrote, each field checked against its type."""
    return _typed(Plan, json.loads(path.read_text()), path.name)


# what run.sh asks the plan, by the command's name
ANSWERS = {"inputs": lambda plan: "\n".join(plan.inputs), "purpose": lambda plan: plan.purpose,
           "build-dir": lambda plan: plan.script_env["ORT_BUILD_DIR"], "outputs": lambda plan: "\n".join(plan.outputs)}


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[1] not in ANSWERS:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    try:
        answer = ANSWERS[argv[1]](load(Path(argv[0])))
    except (OSError, PlanError, KeyError) as error:
        print(f"plan: {argv[0]}: {error}", file=sys.stderr)
        return 2
    if answer:
        print(answer)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
