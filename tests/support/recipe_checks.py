"""This feedstock's own checks of its recipe, conda-forge.yml and variant renders, as plain functions.

conda-smithy's lints are not repeated here: the tests run the real `conda-smithy recipe-lint`
(test_conda_smithy.py). What is here is what conda-smithy does not check: the recipe against the
recipe-format schema, the conda-forge.yml settings this feedstock relies on, and where each output is
built, read from rattler-build's own render of every `.ci_support` file. Every check takes a
`Feedstock` and returns its problems, one sentence each, empty when it passes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import jsonschema
import referencing

import rattler_render
from feedstock.inputs import build_platforms

from .yaml_files import read_yaml

Check = Callable[["Feedstock"], list[str]]
CHECKS: dict[str, Check] = {}
NEEDS_SHARED = frozenset({"check_recipe_matches_schema"})

RECIPE = "recipe/recipe.yaml"
CONDA_FORGE_YML = "conda-forge.yml"
# NVIDIA's packages, the driver's virtual package and what `compiler('cuda')` renders to (cuda-nvcc_linux-64,
# or cuda_osx-arm64 where no CUDA exists); libcurl is the one libcu* package that is not CUDA
CUDA_PACKAGE = re.compile(r"^(__cuda|cuda[-_]|libcu(?!rl)|cudnn|libcudnn|libnv|nccl|cutensor)|nvcc")


@dataclass(frozen=True)
class Built:
    """One output rattler-build builds for one `.ci_support` file, in one of its variants."""

    source: str  # the .ci_support file's stem
    platform: str
    name: str
    build_string: str
    used_keys: frozenset[str]
    requirements: dict[str, Any]
    recipe: dict[str, Any]  # the rendered (stage 1) output


class Feedstock:
    """The files the checks read, each parsed once."""

    def __init__(self, root: Path, shared: Path | None = None) -> None:
        self.root = root
        self.shared = shared

    @cached_property
    def recipe(self) -> dict[str, Any]:
        return read_yaml(self.root / RECIPE)

    @cached_property
    def conda_forge_yml(self) -> dict[str, Any]:
        path = self.root / CONDA_FORGE_YML
        return (read_yaml(path) or {}) if path.is_file() else {}

    @cached_property
    def ci_support(self) -> dict[str, dict[str, Any]]:
        return {p.stem: read_yaml(p) for p in sorted((self.root / ".ci_support").glob("*.yaml"))}

    def build_platform(self, platform: str) -> str:
        return build_platforms(self.root).get(platform, platform)

    @cached_property
    def built(self) -> list[Built]:
        """What rattler-build builds for every `.ci_support` file, one entry per distinct package."""
        found: dict[tuple[str, str, str], Built] = {}
        for source, config in self.ci_support.items():
            platform = config["target_platform"][0]
            for r in rattler_render.render(self.root / RECIPE, config, platform, self.build_platform(platform)):
                # an output that reads no looped key renders once per variant, as the same package
                found.setdefault((source, r.name, r.build_string), Built(
                    source, platform, r.name, r.build_string, frozenset(r.used_variant),
                    r.recipe.get("requirements") or {}, r.recipe))
        return list(found.values())


def check(function: Check) -> Check:
    CHECKS[function.__name__] = function
    return function


def run_checks(feedstock: Feedstock) -> dict[str, list[str]]:
    """Every check's problems (the schema checks only with ../shared); a check that raises reports that."""
    results = {}
    for name, function in CHECKS.items():
        if name in NEEDS_SHARED and feedstock.shared is None:
            continue
        try:
            results[name] = function(feedstock)
        except Exception as error:  # noqa: BLE001 - a crash on a broken copy is that check failing
            results[name] = [f"raised {type(error).__name__}: {error}"]
    return results


def _schema_problems(document: Any, schema: dict[str, Any], label: str) -> list[str]:
    validator_class = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    # an explicit registry: a $ref it cannot resolve fails here rather than being fetched from the network
    validator = validator_class(schema, registry=referencing.Registry())
    return [f"{label}: " + "; or ".join(_closest(error)) for error in validator.iter_errors(document)]


def _closest(error: jsonschema.ValidationError, keep: int = 3) -> list[str]:
    """The deepest failures under an anyOf: a mistake deep in an output shows up there, not as the
    whole output matching none of the schema's alternatives."""
    def leaves(e: jsonschema.ValidationError) -> Iterator[jsonschema.ValidationError]:
        if e.context:
            for child in e.context:
                yield from leaves(child)
        else:
            yield e
    ranked = sorted(leaves(error), key=lambda e: (-len(e.absolute_path), e.message))
    unique = list(dict.fromkeys(f"at /{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}" for e in ranked))
    return unique[:keep]


def _schemas(feedstock: Feedstock) -> Path:
    if feedstock.shared is None:
        raise RuntimeError("../shared is not here: the schemas are needed")
    return feedstock.shared / "schemas"


@check
def check_recipe_matches_schema(feedstock: Feedstock) -> list[str]:
    schema = json.loads((_schemas(feedstock) / "recipe-format.schema.json").read_text())
    return _schema_problems(feedstock.recipe, schema, RECIPE)


@check
def check_conda_forge_yml_has_the_settings_the_feedstock_relies_on(feedstock: Feedstock) -> list[str]:
    settings = feedstock.conda_forge_yml
    problems = []
    if settings.get("conda_build_tool") != "rattler-build":
        problems.append("conda_build_tool must be rattler-build: conda-build cannot read recipe.yaml")
    skipped = settings.get("skip_render") or []
    if "README.md" not in skipped:
        problems.append("skip_render must list README.md: a rerender would replace its generated build matrix")
    if ".gitignore" not in skipped:
        problems.append("skip_render must list .gitignore: conda-smithy's ignores scripts/, config/, tests/ and .ci/")
    providers = {k.replace("_", "-", 1) for k, v in (settings.get("provider") or {}).items() if v}
    problems += [f"no provider for {config['target_platform'][0]} ({name})"
                 for name, config in feedstock.ci_support.items() if config["target_platform"][0] not in providers]
    return problems


def _output_names(feedstock: Feedstock) -> list[str]:
    return [str(output["package"]["name"]) for output in feedstock.recipe.get("outputs") or []]


@check
def check_no_output_is_skipped_everywhere(feedstock: Feedstock) -> list[str]:
    built = {b.name for b in feedstock.built}
    return [f"output {name} is skipped in every .ci_support variant" for name in _output_names(feedstock)
            if name not in built]


@check
def check_every_config_builds_an_output(feedstock: Feedstock) -> list[str]:
    building = {b.source for b in feedstock.built}
    return [f"{name} builds no output" for name in feedstock.ci_support if name not in building]


def _package_names(specs: list[Any] | dict[str, Any] | None) -> set[str]:
    """The names in a requirement section; run_exports and ignore_run_exports group theirs by kind."""
    if isinstance(specs, dict):
        return set().union(*map(_package_names, specs.values()))
    return {spec.split()[0] for spec in specs or [] if isinstance(spec, str) and spec.strip()}


@check
def check_cpu_outputs_never_require_cuda(feedstock: Feedstock) -> list[str]:
    """A CPU build (its build string ends in `_cpu`, which the plugin's run_constraints ask for) lists no
    CUDA package in any requirement section, and reads no `cuda_compiler`, which would split it by CUDA."""
    problems = set()
    for b in feedstock.built:
        if b.build_string.endswith("_cpu"):
            for section, specs in b.requirements.items():
                problems |= {f"CPU output {b.name} ({b.platform}) {section} requires {name}"
                             for name in _package_names(specs) if CUDA_PACKAGE.search(name)}
            if "cuda_compiler" in b.used_keys:
                problems.add(f"CPU output {b.name} ({b.platform}) reads cuda_compiler")
    return sorted(problems)
