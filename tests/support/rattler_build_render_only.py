"""A `rattler-build` program that renders and does nothing else, for conda-smithy to call.

conda-smithy asks `rattler-build --version` and runs `rattler-build build --render-only ...` to learn
which outputs a variant builds and which variant keys each reads (rattler-build-conda-compat,
render.py). PyPI's py-rattler-build carries that engine but no program, so this one answers those
two calls through it. Anything that would build is refused.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import rattler_build


def main(argv: list[str]) -> int:
    if argv == ["--version"]:
        print(f"rattler-build {rattler_build.rattler_build_version()}")
        return 0
    parser = argparse.ArgumentParser(prog="rattler-build")
    parser.add_argument("command", choices=["build"])
    parser.add_argument("--render-only", action="store_true")
    parser.add_argument("--recipe", required=True)
    parser.add_argument("--target-platform")
    parser.add_argument("--build-platform")
    parser.add_argument("-m", "--variant-config", action="append", default=[])
    args = parser.parse_args(argv)
    if not args.render_only:
        print("rattler-build: this one only renders (--render-only); it never builds", file=sys.stderr)
        return 2
    recipe = Path(args.recipe)
    # the program takes a recipe folder as well as a file; the binding wants the file
    if recipe.is_dir():
        recipe = recipe / "recipe.yaml"
    # build_recipes prints the rendered outputs as JSON on stdout, as the program does; it is deprecated
    # in favour of an API that returns objects instead, which conda-smithy could not read
    warnings.simplefilter("ignore", DeprecationWarning)
    rattler_build.build_recipes(
        [recipe], render_only=True, target_platform=args.target_platform,
        build_platform=args.build_platform, host_platform=args.target_platform,
        variant_config=args.variant_config or None,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
