"""The recipe rendered by rattler-build itself, through its Python bindings (py-rattler-build).

This is the engine conda-smithy runs (`rattler-build build --render-only`) to learn which outputs a
variant builds and which variant keys each one reads; no solve, no network. The rehearsal evaluates
the recipe with it, and so do the tests.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from rattler_build import Stage0Recipe, VariantConfig
from rattler_build.render import RenderConfig
from rattler_build.tool_config import PlatformConfig


@dataclass(frozen=True)
class Rendered:
    name: str
    build_string: str
    used_variant: dict[str, str]
    recipe: dict[str, Any]


def render(recipe: Path, variants: dict[str, Any], target_platform: str, build_platform: str) -> list[Rendered]:
    """Every output rattler-build would build for these variant lists (skipped outputs are left out)."""
    with tempfile.TemporaryDirectory() as scratch:
        variant_file = Path(scratch, "variants.yaml")
        variant_file.write_text(yaml.safe_dump(variants))
        config = VariantConfig.from_file(variant_file)
    platform = PlatformConfig(target_platform=target_platform, build_platform=build_platform,
                              host_platform=target_platform)
    results = []
    for variant in Stage0Recipe.from_file(recipe).render(config, RenderConfig(platform=platform)):
        stage1 = variant.recipe.to_dict()
        results.append(Rendered(stage1["package"]["name"], stage1["build"]["string"],
                                {k: str(v) for k, v in variant.variant.items()}, stage1))
    return results


def render_text(recipe: str, variants: dict[str, Any], target_platform: str, build_platform: str) -> list[Rendered]:
    """render() of a recipe's text, which need not be written anywhere yet."""
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch, "recipe.yaml")
        path.write_text(recipe, encoding="utf-8")
        return render(path, variants, target_platform, build_platform)
