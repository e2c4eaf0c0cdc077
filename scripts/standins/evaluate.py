"""The recipe as rattler-build evaluates it for one output of one `.ci_support` job: what a rehearsal
builds, and what the GPU run's plan carries (scripts/device/pack.py)."""

from __future__ import annotations

from pathlib import Path

from feedstock.ci_support import job_file
from feedstock.errors import InputError
from feedstock.reader import load_yaml
from rattler_render import render
from standins import StandinError
from standins.downloads import BUILD_PLATFORM


def variant_lists(feedstock: Path, cuda: str | None, python: str | None, platform: str = BUILD_PLATFORM) -> dict:
    """The platform's .ci_support file for this CUDA version (None: the CPU one), one Python kept."""
    try:
        path = job_file(feedstock, platform, cuda)
    except InputError as error:
        raise StandinError(str(error)) from None
    lists = load_yaml(path, str(path))
    if python is not None:
        kept = [p for p in lists.get("python", []) if str(p).startswith(f"{python}.")]
        if not kept:
            raise StandinError(f"{path}: python {python} is not among {lists.get('python')}")
        lists["python"] = kept
    elif "python" in lists:
        lists["python"] = lists["python"][:1]
    return lists


def evaluate(feedstock: Path, output: str, cuda: str | None, python: str | None,
             platform: str = BUILD_PLATFORM) -> tuple[dict, dict]:
    """The recipe as rattler-build renders it for the platform's job, built on linux-64."""
    lists = variant_lists(feedstock, cuda, python, platform)
    for rendered in render(feedstock / "recipe" / "recipe.yaml", lists, platform, BUILD_PLATFORM):
        if rendered.name == output:
            return rendered.recipe, rendered.used_variant
    raise StandinError(f"{feedstock / 'recipe' / 'recipe.yaml'}: {output} is not built for CUDA {cuda or 'None'} "
                       f"on {platform}")
