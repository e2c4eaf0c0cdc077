"""What each CI job builds, as rattler-build evaluates the recipe with the job's `.ci_support` file.

conda-smithy learns which outputs a job builds by asking rattler-build, and so does the generator: the
skip rules live in the recipe alone (rendering.py writes them there from the config), and this is the one
place that asks what they leave. The README's matrix and the render's checks read its answer.
"""

from __future__ import annotations

from pathlib import Path

from rattler_build import RattlerBuildError
from rattler_render import render_text

from .ci_support import CI_SUPPORT, CiJob, python_label
from .errors import InputError, clipped
from .inputs import RECIPE
from .reader import load_yaml

# One job's packages, in the order rattler-build renders them, each with the Pythons it is built for
# (none for a package that reads no `python`).
Builds = dict[str, tuple[str, ...]]


def what_each_job_builds(root: Path, recipe: str, jobs: list[CiJob],
                         build_platforms: dict[str, str]) -> dict[str, Builds]:
    """Each job's Builds: rattler-build's render of `recipe` (the text recipe/recipe.yaml has, or is about to
    have) with the job's file in `root`, built on the platform conda-forge.yml names (build_platforms)."""
    found = {}
    for job in jobs:
        shown_as = f"{CI_SUPPORT}/{job.name}.yaml"
        variants = load_yaml(root / shown_as, shown_as)
        try:
            rendered = render_text(recipe, variants, job.platform, build_platforms.get(job.platform, job.platform))
        except OSError as error:  # the scratch copy of the recipe, or of the job's file, that rattler-build reads
            raise InputError(RECIPE, "(file)", f"cannot write the copy rattler-build reads ({error.strerror}); "
                                               "nothing was changed") from None
        except RattlerBuildError as error:
            raise InputError(shown_as, "(file)", f"rattler-build cannot render the recipe with it: "
                                                 f"{clipped(' '.join(str(error).split()))}") from None
        builds: dict[str, list[str]] = {}
        for output in rendered:
            pythons = builds.setdefault(output.name, [])
            if "python" in output.used_variant and python_label(output.used_variant["python"]) not in pythons:
                pythons.append(python_label(output.used_variant["python"]))
        found[job.name] = {name: tuple(pythons) for name, pythons in builds.items()}
    return found
