"""conda-forge's lints for v1 recipes and this feedstock's own cross-checks, as plain functions.

Every check takes a `Feedstock` and returns its problems, one sentence each, empty when it passes. The
tests run each one on the real feedstock, and all of them on broken copies to prove that a mistake
trips exactly the checks written for it. `@check("R-019")` names the conda-smithy lints a check stands
in for (`../shared/schemas/conda-smithy-linter-messages.json`); checks without one are this
feedstock's own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import referencing
import referencing.jsonschema
import yaml
from license_expression import Licensing, get_spdx_licensing

from feedstock.matrix import USED_KEYS, is_built

from .recipe_eval import RenderedOutput, calls, expand_variants, expressions, parse, render

Check = Callable[["Feedstock"], list[str]]
CHECKS: dict[str, Check] = {}
LINT_IDS: dict[str, tuple[str, ...]] = {}
NEEDS_SHARED = frozenset({"check_recipe_matches_schema", "check_conda_forge_yml_matches_schema"})

RECIPE = "recipe/recipe.yaml"
CONDA_FORGE_YML = "conda-forge.yml"
# conda-forge.yml's `bot` property points here; the schema ships beside it so it resolves offline
BOT_SCHEMA_URI = ("https://raw.githubusercontent.com/conda-forge/conda-forge-bot/refs/heads/main/"
                  "conda_forge_tick/cf_tick_schema.json")
MULTI_OUTPUT_KEYS = ("schema_version", "context", "recipe", "source", "build", "outputs", "about", "extra")
SINGLE_OUTPUT_KEYS = ("schema_version", "context", "package", "source", "build", "requirements", "tests", "about",
                      "extra")
# what conda-smithy writes into every variant file whenever the pinning has it, read by an output or not
ALWAYS_KEPT = frozenset({"zip_keys", "pin_run_as_build", "channel_sources", "channel_targets", "docker_image",
                         "target_platform", "MACOSX_DEPLOYMENT_TARGET", "MACOSX_SDK_VERSION", "macos_machine",
                         "github_actions_labels"})
# libcurl is the one libcu* package that is not CUDA
CUDA_PACKAGE = re.compile(r"^(cuda-|libcu(?!rl)|cudnn|nccl|cutensor|__cuda)")
COMMENT_SELECTOR = re.compile(r"#\s*\[[^\[\]]+\]\s*$")


class _UniqueKeyLoader(yaml.SafeLoader):
    """A YAML loader that refuses a mapping naming the same key twice, as rattler-build does."""


def _unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


@dataclass(frozen=True)
class Render:
    """One variant of one `.ci_support` file (or of the pinning), rendered."""

    source: str
    platform: str
    variant: dict[str, str]
    outputs: tuple[RenderedOutput, ...]


class Feedstock:
    """The files the checks read, each parsed once."""

    def __init__(self, root: Path, shared: Path | None = None) -> None:
        self.root = root
        self.shared = shared

    @cached_property
    def recipe_text(self) -> str:
        return (self.root / RECIPE).read_text()

    @cached_property
    def recipe(self) -> dict[str, Any]:
        return yaml.safe_load(self.recipe_text)

    @cached_property
    def conda_forge_yml(self) -> dict[str, Any]:
        path = self.root / CONDA_FORGE_YML
        return (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}

    @cached_property
    def ci_support(self) -> dict[str, dict[str, Any]]:
        return {p.stem: yaml.safe_load(p.read_text()) for p in sorted((self.root / ".ci_support").glob("*.yaml"))}

    @cached_property
    def outputs(self) -> list[dict[str, Any]]:
        return self.recipe.get("outputs") or [self.recipe]

    @cached_property
    def output_keys(self) -> dict[str, str]:
        """The generator's key (`plugin`, ...) of each package name."""
        config = yaml.safe_load((self.root / "config/feedstock.yaml").read_text())
        return {entry["name"]: key for key, entry in config["outputs"].items()}

    def build_platform(self, platform: str) -> str:
        mapping = self.conda_forge_yml.get("build_platform") or {}
        return {k.replace("_", "-", 1): v.replace("_", "-", 1) for k, v in mapping.items()}.get(platform, platform)

    @cached_property
    def _pinning(self) -> dict[str, Any]:
        return yaml.safe_load((self.root / "config/pinning.yaml").read_text())

    def pinning(self, platform: str) -> dict[str, Any]:
        """The pinning snapshot's lists for one platform, zip_keys included."""
        pinning = self._pinning
        system = platform.split("-")[0]
        values = {**pinning["common"], **pinning["platforms"].get(platform, pinning["platforms"].get(system, {}))}
        return {**values, "target_platform": [platform], "zip_keys": pinning["zip_keys"].get(system, [])}

    @cached_property
    def platforms(self) -> list[str]:
        provided = {k.replace("_", "-", 1) for k, v in (self.conda_forge_yml.get("provider") or {}).items() if v}
        return sorted(provided | {config["target_platform"][0] for config in self.ci_support.values()})

    def _render(self, source: str, platform: str, variant: dict[str, str]) -> Render:
        keys = {k for k, v in self.pinning(platform).items() if isinstance(v, list) and k != "zip_keys"}
        outputs = render(self.recipe, variant, self.build_platform(platform), keys)
        return Render(source, platform, variant, tuple(outputs))

    @cached_property
    def renders(self) -> list[Render]:
        """Every variant of every `.ci_support` file, rendered."""
        return [self._render(name, config["target_platform"][0], variant)
                for name, config in self.ci_support.items() for variant in expand_variants(config)]

    @cached_property
    def pinning_renders(self) -> list[Render]:
        """Every variant the pinning offers each platform, rendered: what conda-smithy starts from."""
        return [self._render("pinning", platform, variant)
                for platform in self.platforms for variant in expand_variants(self.pinning(platform))]

    def built(self) -> Iterator[tuple[Render, RenderedOutput]]:
        return ((r, o) for r in self.renders for o in r.outputs if o.built)


def check(*lint_ids: str) -> Callable[[Check], Check]:
    def register(function: Check) -> Check:
        CHECKS[function.__name__] = function
        LINT_IDS[function.__name__] = lint_ids
        return function
    return register


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


def _schema_problems(document: Any, schema: dict[str, Any], label: str,
                     registry: referencing.Registry | None = None) -> list[str]:
    validator_class = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    # an explicit registry: a $ref it cannot resolve fails here rather than being fetched from the network
    validator = validator_class(schema, registry=registry or referencing.Registry())
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


@check("R-036")
def check_recipe_matches_schema(feedstock: Feedstock) -> list[str]:
    schema = json.loads((_schemas(feedstock) / "recipe-format.schema.json").read_text())
    return _schema_problems(feedstock.recipe, schema, RECIPE)


@check()
def check_conda_forge_yml_matches_schema(feedstock: Feedstock) -> list[str]:
    if not (feedstock.root / CONDA_FORGE_YML).is_file():
        return [f"{CONDA_FORGE_YML} is missing"]
    schemas = _schemas(feedstock)
    bot = referencing.Resource.from_contents(json.loads((schemas / "cf-tick-bot.schema.json").read_text()),
                                             default_specification=referencing.jsonschema.DRAFT202012)
    schema = json.loads((schemas / "conda-forge-yml.schema.json").read_text())
    return _schema_problems(feedstock.conda_forge_yml, schema, CONDA_FORGE_YML,
                            referencing.Registry().with_resource(BOT_SCHEMA_URI, bot))


@check()
def check_conda_forge_yml_has_the_settings_the_feedstock_relies_on(feedstock: Feedstock) -> list[str]:
    settings = feedstock.conda_forge_yml
    problems = []
    if settings.get("conda_build_tool") != "rattler-build":
        problems.append("conda_build_tool must be rattler-build: conda-build cannot read recipe.yaml")
    if "README.md" not in (settings.get("skip_render") or []):
        problems.append("skip_render must list README.md: a rerender would replace its generated build matrix")
    providers = {k.replace("_", "-", 1) for k, v in (settings.get("provider") or {}).items() if v}
    problems += [f"no provider for {config['target_platform'][0]} ({name})"
                 for name, config in feedstock.ci_support.items() if config["target_platform"][0] not in providers]
    return problems


@check()
def check_schema_version_is_1(feedstock: Feedstock) -> list[str]:
    version = feedstock.recipe.get("schema_version")
    return [] if version == 1 else [f"schema_version is {version!r}, not 1"]


@check("R-000", "R-001")
def check_top_level_keys_are_known_and_in_order(feedstock: Feedstock) -> list[str]:
    allowed = MULTI_OUTPUT_KEYS if "outputs" in feedstock.recipe else SINGLE_OUTPUT_KEYS
    keys = list(feedstock.recipe)
    problems = [f"top-level key {k!r} is not allowed here" for k in keys if k not in allowed]
    known = [k for k in keys if k in allowed]
    if known != sorted(known, key=allowed.index):
        problems.append(f"top-level keys are in the order {known}, expected {sorted(known, key=allowed.index)}")
    return problems


@check("R-002", "R-013")
def check_about_has_homepage_license_summary_and_license_files(feedstock: Feedstock) -> list[str]:
    about = feedstock.recipe.get("about") or {}
    problems = [f"about.{item} is missing" for item in ("homepage", "license", "summary", "license_file")
                if not about.get(item)]
    # each output links different vendored code, so an inherited licence would be the wrong one
    for output in feedstock.recipe.get("outputs") or []:
        own = output.get("about") or {}
        problems += [f"output {output['package']['name']} declares no about.{item}"
                     for item in ("license", "license_file") if not own.get(item)]
    return problems


def _licenses(feedstock: Feedstock) -> Iterator[tuple[str, str]]:
    yield "about", str((feedstock.recipe.get("about") or {}).get("license", ""))
    for output in feedstock.recipe.get("outputs") or []:
        if "license" in (output.get("about") or {}):
            yield f"output {output['package']['name']}", str(output["about"]["license"])


@lru_cache(maxsize=1)
def _spdx() -> Licensing:
    return get_spdx_licensing()


@check("R-044", "R-045")
def check_license_is_an_spdx_expression(feedstock: Feedstock) -> list[str]:
    problems = []
    for where, expression in _licenses(feedstock):
        # LicenseRef-* is SPDX's own spelling of a custom licence; license-expression does not list it
        info = _spdx().validate(re.sub(r"LicenseRef-[\w.-]+", "MIT", expression), strict=True)
        problems += [f"{where}: license {expression!r}: {error}" for error in info.errors]
    return problems


@check("R-010")
def check_license_does_not_say_license(feedstock: Feedstock) -> list[str]:
    return [f"{where}: license {expression!r} mentions the word License"
            for where, expression in _licenses(feedstock)
            if re.search(r"\blicense\b", re.sub(r"LicenseRef-\S+|\S+-license\b", "", expression, flags=re.I), re.I)]


@check("R-003", "R-004")
def check_recipe_maintainers_are_listed(feedstock: Feedstock) -> list[str]:
    maintainers = (feedstock.recipe.get("extra") or {}).get("recipe-maintainers")
    if not isinstance(maintainers, list) or not maintainers:
        return [f"extra.recipe-maintainers must be a non-empty list, not {maintainers!r}"]
    return []


@check("R-008")
def check_build_number_is_present(feedstock: Feedstock) -> list[str]:
    if "number" in (feedstock.recipe.get("build") or {}):
        return []
    return [f"output {o['package']['name']} has no build.number and the top level sets none"
            for o in feedstock.outputs if "number" not in (o.get("build") or {})]


@check("R-009")
def check_requirements_are_in_build_host_run_order(feedstock: Feedstock) -> list[str]:
    order = ("build", "host", "run")
    problems = []
    for output in feedstock.outputs:
        seen = [k for k in (output.get("requirements") or {}) if k in order]
        if seen != sorted(seen, key=order.index):
            problems.append(f"output {output['package']['name']}: requirements in the order {seen}")
    return problems


def _sources(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, list):
        for item in node:
            yield from _sources(item)
    elif isinstance(node, Mapping) and "if" in node:
        yield from _sources(node.get("then"))
        yield from _sources(node.get("else"))
    elif isinstance(node, Mapping):
        yield dict(node)


@check("R-019")
def check_every_url_source_has_a_sha256(feedstock: Feedstock) -> list[str]:
    sources = [*_sources(feedstock.recipe.get("source"))]
    sources += [s for output in feedstock.recipe.get("outputs") or [] for s in _sources(output.get("source"))]
    return [f"source {s['url']} has no sha256" for s in sources if "url" in s and not s.get("sha256")]


@check("R1-001")
def check_no_comment_selectors(feedstock: Feedstock) -> list[str]:
    return [f"line {number}: {line.strip()}" for number, line in enumerate(feedstock.recipe_text.splitlines(), 1)
            if COMMENT_SELECTOR.search(line)]


def _functions_called(node: Any) -> set[tuple[str, Any]]:
    return {call for source, expression in expressions(node) for call in calls(parse(source, expression))}


@check("R-033")
def check_every_compiler_has_stdlib_in_the_same_output(feedstock: Feedstock) -> list[str]:
    problems = []
    for output in feedstock.outputs:
        build = _functions_called((output.get("requirements") or {}).get("build"))
        compilers = sorted(str(lang) for function, lang in build if function == "compiler")
        if compilers and ("stdlib", "c") not in build:
            problems.append(f"output {output['package']['name']} uses compiler({', '.join(compilers)}) "
                            "without stdlib('c') in its build requirements")
    return problems


@check("R-027")
def check_own_outputs_are_pinned_with_pin_subpackage(feedstock: Feedstock) -> list[str]:
    own = {str(output["package"]["name"]) for output in feedstock.outputs}
    problems = []
    for output in feedstock.outputs:
        requirements = output.get("requirements") or {}
        where = f"output {output['package']['name']}"
        for function, name in _functions_called(requirements):
            if function == "pin_compatible" and name in own:
                problems.append(f"{where}: pin_compatible({name!r}) pins an output of this recipe; use pin_subpackage")
            if function == "pin_subpackage" and name not in own:
                problems.append(f"{where}: pin_subpackage({name!r}) names no output of this recipe; use pin_compatible")
        plain = [spec for spec in requirements.get("run_exports") or [] if isinstance(spec, str) and "${{" not in spec]
        problems += [f"{where}: run_exports names {spec!r} literally; use pin_subpackage"
                     for spec in plain if spec.split()[0] in own]
    return problems


@check("R-005", "R-006")
def check_every_output_has_tests(feedstock: Feedstock) -> list[str]:
    problems = {f"output {o['package']['name']} has no tests" for o in feedstock.outputs if not o.get("tests")}
    problems |= {f"output {o.name} has no tests on {r.platform}" for r, o in feedstock.built() if not o.tests}
    return sorted(problems)


def _package_names(specs: list[Any] | None) -> set[str]:
    return {str(spec).split()[0] for spec in specs or [] if str(spec).strip()}


@check("R-023", "R-024")
def check_python_in_host_is_in_run_unpinned(feedstock: Feedstock) -> list[str]:
    noarch = {o["package"]["name"] for o in feedstock.outputs if (o.get("build") or {}).get("noarch")}
    problems = set()
    for r, output in feedstock.built():
        if output.name in noarch or "python" not in _package_names(output.requirements.get("host")):
            continue
        run = [str(spec).strip() for spec in output.requirements.get("run", [])]
        if "python" not in run:
            pinned = [spec for spec in run if spec.split()[0] == "python"]
            problems.add(f"output {output.name} has python in host but {pinned or 'not'} in run ({r.platform})")
    return sorted(problems)


@check("R-011", "R-012")
def check_recipe_ends_with_exactly_one_newline(feedstock: Feedstock) -> list[str]:
    text = feedstock.recipe_text
    if not text.endswith("\n"):
        return [f"{RECIPE} does not end with a newline"]
    if text.endswith("\n\n"):
        return [f"{RECIPE} ends with {len(text) - len(text.rstrip(chr(10)))} newlines, not one"]
    return []


@check("FC-001")
def check_no_duplicate_keys(feedstock: Feedstock) -> list[str]:
    root = feedstock.root
    paths = [root / RECIPE, root / CONDA_FORGE_YML, *sorted((root / ".ci_support").glob("*.yaml"))]
    problems = []
    for path in paths:
        if path.is_file():
            try:
                yaml.load(path.read_text(), Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
            except yaml.constructor.ConstructorError as error:
                problems.append(f"{path.relative_to(feedstock.root)}: {error.problem} {error.problem_mark}")
    return problems


def _floats(node: Any, path: str) -> Iterator[str]:
    if isinstance(node, float):
        yield f"{path} is {node!r}, a float: quote it"
    elif isinstance(node, Mapping):
        for key, value in node.items():
            yield from _floats(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _floats(item, f"{path}[{index}]")


@check("R-040")
def check_no_floats(feedstock: Feedstock) -> list[str]:
    return list(_floats(feedstock.recipe, ""))


@check("CF-003")
def check_ci_support_files_exist(feedstock: Feedstock) -> list[str]:
    return [] if feedstock.ci_support else [".ci_support/ holds no variant files: nothing would build"]


@check()
def check_skip_rules_match_the_generator(feedstock: Feedstock) -> list[str]:
    return sorted({f"{o.name}: the recipe {'builds' if o.built else 'skips'} it for {r.source}, the generator "
                   f"{'builds' if is_built(feedstock.output_keys[o.name], r.variant) else 'skips'} it"
                   for r in feedstock.renders for o in r.outputs
                   if o.built != is_built(feedstock.output_keys[o.name], r.variant)})


@check()
def check_used_keys_match_the_generator(feedstock: Feedstock) -> list[str]:
    problems = set()
    for r, output in feedstock.built():
        declared = USED_KEYS[feedstock.output_keys[output.name]]
        # the generator declares the keys of every platform; compare the ones this platform has
        declared &= set(r.variant) | set(feedstock.pinning(r.platform))
        if unlisted := output.used_keys - declared:
            problems.add(f"{output.name} on {r.platform} reads {sorted(unlisted)}, which USED_KEYS does not list")
        if unread := declared - output.used_keys:
            problems.add(f"{output.name} on {r.platform}: USED_KEYS lists {sorted(unread)}, which it does not read")
    return sorted(problems)


def _split_keys(feedstock: Feedstock, platform: str) -> set[str]:
    """conda-smithy's: the keys with several values in the pinning that every built output reads."""
    loops = {k for k, v in feedstock.pinning(platform).items()
             if isinstance(v, list) and len(v) > 1 and k != "zip_keys"}
    reads = [set(o.used_keys) & loops for r, o in feedstock.built() if r.platform == platform]
    return set.intersection(*reads) if reads else set()


def ci_support_name(platform: str, values: Mapping[str, Any], split: set[str]) -> str:
    first = {k: v[0] if isinstance(v, list) else v for k, v in values.items()}
    name = f"{platform.replace('-', '_')}_" + "".join(f"{k}{first[k]}" for k in sorted(split))
    return re.sub(r'[<>:?*,"/|\\]', "", name.replace("*", "_").replace(" ", "_"))


@check()
def check_ci_support_names_follow_the_split_keys(feedstock: Feedstock) -> list[str]:
    problems = []
    for platform in feedstock.platforms:
        split = _split_keys(feedstock, platform)
        files = {n: c for n, c in feedstock.ci_support.items() if c["target_platform"][0] == platform}
        for name, config in files.items():
            problems += [f"{name}: splits on {k} but holds {config.get(k)}" for k in sorted(split)
                         if len(config.get(k) or []) != 1]
            if (expected := ci_support_name(platform, config, split)) != name:
                problems.append(f"{name}: its values of {sorted(split)} name it {expected}")
        wanted = {ci_support_name(platform, r.variant, split) for r in feedstock.pinning_renders
                  if r.platform == platform and any(o.built for o in r.outputs)}
        problems += [f"{platform}: no .ci_support file {n}" for n in sorted(wanted - set(files))]
        problems += [f"{platform}: .ci_support file {n} is for a variant that builds nothing"
                     for n in sorted(set(files) - wanted)]
    return problems


@check()
def check_ci_support_files_hold_the_keys_outputs_read(feedstock: Feedstock) -> list[str]:
    problems = []
    for platform in feedstock.platforms:
        read = set().union(*(o.used_keys for r, o in feedstock.built() if r.platform == platform))
        for name, config in feedstock.ci_support.items():
            if config["target_platform"][0] == platform:
                problems += [f"{name}: lacks {k}, which an output reads" for k in sorted(read - set(config))]
                problems += [f"{name}: holds {k}, which no output reads"
                             for k in sorted(set(config) - read - ALWAYS_KEPT)]
    return problems


@check()
def check_no_output_is_skipped_everywhere(feedstock: Feedstock) -> list[str]:
    built = {o.name for _, o in feedstock.built()}
    return [f"output {o.name} is skipped in every .ci_support variant"
            for o in feedstock.renders[0].outputs if o.name not in built] if feedstock.renders else []


@check()
def check_every_config_builds_an_output(feedstock: Feedstock) -> list[str]:
    building = {r.source for r, _ in feedstock.built()}
    return [f"{name} builds no output" for name in feedstock.ci_support if name not in building]


@check()
def check_cpu_outputs_never_require_cuda(feedstock: Feedstock) -> list[str]:
    problems = set()
    for r, output in feedstock.built():
        if r.variant.get("cuda_compiler_version", "None") == "None" or (output.build_string or "").endswith("_cpu"):
            for section in ("build", "host", "run"):
                problems |= {f"CPU output {output.name} ({r.platform}) {section} requires {name}"
                             for name in _package_names(output.requirements.get(section)) if CUDA_PACKAGE.match(name)}
    return sorted(problems)
