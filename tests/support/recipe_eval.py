"""Evaluate a v1 recipe for one variant the way rattler-build renders it (a test helper).

jinja2 with `${{ }}` as its variable delimiters is expression-compatible with rattler-build's
minijinja, so selectors, `skip`, `context` and every `${{ }}` are evaluated here as rattler-build
would, with the functions and filters this recipe calls. Which variant keys an output reads follows
conda-smithy's rule: every variable named in a `skip`, an `if:`, a `${{ }}` (or in a `context` entry
such an expression reads), the keys behind `compiler()` and `stdlib()`, and every build or host
dependency named without a version that is itself a variant key. Expressions are read statically,
untaken branches included, as rattler-build does; dependencies only once the selectors are applied.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import jinja2
from jinja2 import meta, nodes

HASH = "0123abc"  # stands in for the hash of the resolved variant, which needs a solve
REQUIREMENT_SECTIONS = ("build", "host", "run", "run_constraints", "run_exports")
# the variant keys behind compiler("c"), stdlib("c"), ...
KEYS_OF = {"compiler": ("{}_compiler", "{}_compiler_version"), "stdlib": ("{}_stdlib", "{}_stdlib_version")}
# sections of the top level that every output inherits
SHARED_SECTIONS = ("recipe", "source", "build", "about")

ENV = jinja2.Environment(
    variable_start_string="${{", variable_end_string="}}",
    comment_start_string="#{{", comment_end_string="}}",  # rattler-build's; `{#` stays literal text
    undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
)
ENV.filters["version_to_buildstring"] = lambda spec: "".join(str(spec).split()[0].split(".")[:2])


@dataclass(frozen=True)
class RenderedOutput:
    name: str
    built: bool
    used_keys: frozenset[str]
    requirements: dict[str, Any]  # empty when the output is skipped
    build_string: str | None
    tests: list[Any]
    about: dict[str, Any]


def expand_variants(config: Mapping[str, Any]) -> list[dict[str, str]]:
    """Every variant of a variant file: the product of its lists, zipped keys moving together."""
    lists = {k: [str(v) for v in values] for k, values in config.items()
             if isinstance(values, list) and k != "zip_keys"}
    axes: list[list[dict[str, str]]] = []
    zipped: set[str] = set()
    for group in config.get("zip_keys") or []:
        present = [k for k in group if k in lists]
        if len({len(lists[k]) for k in present}) > 1:
            raise ValueError(f"zip_keys {present} have lists of different lengths")
        if present:
            rows = zip(*(lists[k] for k in present), strict=True)
            axes.append([dict(zip(present, row, strict=True)) for row in rows])
            zipped.update(present)
    axes += [[{k: v} for v in values] for k, values in lists.items() if k not in zipped]
    return [{k: v for part in combo for k, v in part.items()} for combo in itertools.product(*axes)]


def platform_names(target_platform: str, build_platform: str) -> dict[str, Any]:
    system, arch = target_platform.split("-")
    return {
        "target_platform": target_platform, "build_platform": build_platform,
        "linux": system == "linux", "osx": system == "osx", "win": system == "win", "unix": system != "win",
        "x86_64": arch == "64", "aarch64": arch == "aarch64", "arm64": arch == "arm64", "ppc64le": arch == "ppc64le",
    }


@cache
def _template(source: str) -> jinja2.Template:
    return ENV.from_string(source)


@cache
def _expression(source: str) -> Any:
    return ENV.compile_expression(source, undefined_to_none=False)


def expressions(node: Any, expression: bool = False) -> Iterator[tuple[str, bool]]:
    """Every `${{ }}` scalar and every `if:`/`skip` expression in a recipe node, as (source, is_expression)."""
    if isinstance(node, str) and (expression or "${{" in node):
        yield node, expression
    elif isinstance(node, Mapping):
        for key, value in node.items():
            yield from expressions(value, key in ("if", "skip"))
    elif isinstance(node, list):
        for item in node:
            yield from expressions(item, expression)


@cache
def parse(source: str, expression: bool) -> nodes.Template:
    return ENV.parse("${{ " + source + " }}" if expression else source)


def calls(tree: nodes.Template) -> Iterator[tuple[str, Any]]:
    """(function, first argument if it is a constant) for every function call in a parsed expression."""
    for call in tree.find_all(nodes.Call):
        if isinstance(call.node, nodes.Name):
            first = call.args[0].value if call.args and isinstance(call.args[0], nodes.Const) else None
            yield call.node.name, first


@cache
def _names(source: str, expression: bool) -> frozenset[str]:
    tree = parse(source, expression)
    names = set(meta.find_undeclared_variables(tree))
    names.update(key.format(lang) for function, lang in calls(tree) if function in KEYS_OF and lang
                 for key in KEYS_OF[function])
    return frozenset(names)


def referenced_names(node: Any) -> set[str]:
    """Every name read anywhere in a recipe node, with the variant keys compiler()/stdlib() read."""
    return set().union(*(_names(source, expression) for source, expression in expressions(node)))


def resolve(node: Any, namespace: Mapping[str, Any]) -> Any:
    """A node with its `if:`/`then:`/`else:` list items applied and its `${{ }}` rendered."""
    if isinstance(node, list):
        items: list[Any] = []
        for item in node:
            if isinstance(item, Mapping) and "if" in item:
                branch = item.get("then") if evaluate(item["if"], namespace) else item.get("else")
                if branch is not None:
                    resolved = resolve(branch, namespace)
                    items.extend(resolved if isinstance(branch, list) else [resolved])
            else:
                items.append(resolve(item, namespace))
        return items
    if isinstance(node, Mapping):
        return {k: resolve(v, namespace) for k, v in node.items()}
    if isinstance(node, str) and "${{" in node:
        return _template(node).render(namespace)
    return node


def evaluate(expression: Any, namespace: Mapping[str, Any]) -> Any:
    return _expression(expression)(**namespace) if isinstance(expression, str) else expression


def _functions(variant: Mapping[str, str], target_platform: str, version: str) -> dict[str, Any]:
    def package(kind: str, lang: str) -> str:
        name_key, version_key = (key.format(lang) for key in KEYS_OF[kind])
        if name_key not in variant:
            raise KeyError(f"{kind}({lang!r}) needs `{name_key}` in the variant")
        pinned = variant.get(version_key)
        return f"{variant[name_key]}_{target_platform}" + (f" {pinned}" if pinned else "")

    def pin_subpackage(name: str, upper_bound: str | None = None, lower_bound: str | None = None,
                       exact: bool = False) -> str:
        if exact:
            return f"{name} =={version}"
        parts = version.split(".")
        lower = ".".join(parts[:lower_bound.count("x")]) if lower_bound else version
        spec = f">={lower}"
        if upper_bound:
            kept = parts[:upper_bound.count("x")]
            spec += f",<{'.'.join([*kept[:-1], str(int(kept[-1]) + 1)])}.0a0"
        return f"{name} {spec}"

    def pin_compatible(name: str, **_bounds: Any) -> str:
        return f"{name} >=host-version"  # the version in host is known only after a solve

    return {"compiler": lambda lang: package("compiler", lang), "stdlib": lambda lang: package("stdlib", lang),
            "pin_subpackage": pin_subpackage, "pin_compatible": pin_compatible}


def render(recipe: Mapping[str, Any], variant: Mapping[str, str], build_platform: str | None = None,
           variant_keys: Iterable[str] = ()) -> list[RenderedOutput]:
    """Every output of `recipe` for one variant. `variant_keys`: keys the pinning knows beyond the variant's."""
    target = variant["target_platform"]
    known = set(variant) | set(variant_keys)
    namespace: dict[str, Any] = {**variant, **platform_names(target, build_platform or target)}
    reads: dict[str, set[str]] = {}  # what each context entry reads, through earlier entries
    for key, value in (recipe.get("context") or {}).items():
        direct = referenced_names(value)
        reads[key] = direct.union(*(reads.get(name, set()) for name in direct))
        namespace[key] = resolve(value, namespace)
    version = str(resolve((recipe.get("recipe") or {}).get("version", namespace.get("version", "0")), namespace))
    namespace.update(_functions(variant, target, version))
    shared = referenced_names({k: recipe[k] for k in SHARED_SECTIONS if k in recipe})

    results = []
    for output in recipe.get("outputs") or [recipe]:
        names = shared | referenced_names(output)
        used = {k for k in names.union(*(reads.get(n, set()) for n in names)) if k in known}
        build = {**(recipe.get("build") or {}), **(output.get("build") or {})}
        ns = {**namespace, "hash": HASH, "build_number": resolve(build.get("number", 0), namespace)}
        name = resolve(output["package"]["name"], ns)
        skip = build.get("skip", [])
        if any(evaluate(condition, ns) for condition in (skip if isinstance(skip, list) else [skip])):
            results.append(RenderedOutput(name, False, frozenset(used), {}, None, [], {}))
            continue
        requirements = resolve({k: v for k, v in (output.get("requirements") or {}).items()
                                if k in REQUIREMENT_SECTIONS}, ns)
        used |= {spec.strip() for section in ("build", "host") for spec in requirements.get(section, [])
                 if isinstance(spec, str) and spec.strip() in known}
        about = resolve({**(recipe.get("about") or {}), **(output.get("about") or {})}, ns)
        string = resolve(build["string"], ns) if "string" in build else None
        results.append(RenderedOutput(name, True, frozenset(used), requirements, string,
                                      resolve(output.get("tests") or [], ns), about))
    return results
