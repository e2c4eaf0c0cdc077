#!/usr/bin/env python3
"""Render the feedstock's own files from config/feedstock.yaml.

    python3 scripts/render.py           write recipe/recipe.yaml, recipe/variants.yaml, the plugin
                                        manifests and the build-matrix section of README.md (from
                                        the .ci_support files conda-smithy wrote)
    python3 scripts/render.py --check   write nothing; print a diff and exit 1 when any is stale
    python3 scripts/render.py --force   write even over a hand edit of a generated file

Exit status: 0 done (or current), 1 stale (--check), 2 bad input, a hand edit in the way, or
cannot run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

import bootstrap

bootstrap.ensure(bootstrap.REPO / "scripts" / "requirements.txt")

from feedstock import architectures, builds, ci_support, files, hand_edits, inputs, rendering
from feedstock.errors import InputError, Problem
from standins import cache_folder
from standins.sources import at_hand, source_of


def ort_refusals(root: Path, config: inputs.Config, bot: inputs.BotFields) -> list[Problem]:
    """Each list of the config that ONNX Runtime's own CMake would not build as listed, checked where the
    recipe's source is at hand (the mirror folder, or the rehearsal's download); without it, nothing is
    checked here, and the rehearsal's and the build's configure are where ORT's CMake first sees the lists."""
    cmake = shutil.which("cmake")
    located = at_hand(source_of(config, bot), cache_folder(root))
    if cmake is None or located is None:
        return []
    cached = root / ".cache" / "ort-cmake" / f"{located.tarball.name}-{located.tarball.stat().st_size}.cmake"
    if not cached.is_file():
        cached.parent.mkdir(parents=True, exist_ok=True)
        # whole or not at all, as a render beside this one may read it
        partial = cached.with_name(f"{cached.name}.{os.getpid()}.partial")
        partial.write_text(located.read(architectures.ORT_CUDA_CONFIGURATION))
        partial.replace(cached)
    problems = []
    with tempfile.TemporaryDirectory() as scratch:
        for version, entry in config.cuda.versions.items():
            for platform, listed in entry.architectures.items():
                why = architectures.ort_keeps(tuple(listed), cached, cmake, Path(scratch))
                if why:
                    problems.append(Problem(inputs.CONFIG, f'cuda.versions."{version}".architectures.{platform}', why))
    return problems


def generate(root: Path) -> list[rendering.GeneratedFile]:
    config, bot = inputs.load(root)
    if refused := ort_refusals(root, config, bot):
        raise InputError.of(refused)
    jobs = ci_support.load_jobs(root)
    listed = dict(config.cuda.versions)
    problems = [Problem(migration, "cuda_compiler_version", architectures.missing_list(version, listed))
                for migration, versions in ci_support.migrated_cuda_versions(root).items()
                for version in versions if version not in config.cuda_lists.by_version]
    recipe = rendering.render_recipe(config, bot)
    built = builds.what_each_job_builds(root, recipe, jobs, inputs.build_platforms(root))
    offered = sorted({python for job in jobs for python in job.pythons})
    if offered and not any(config.outputs.python.name in packages for packages in built.values()):
        problems.append(Problem(inputs.CONFIG, "python", f"the range {config.python.minimum} to "
                                f"{config.python.maximum or 'the newest'} leaves out every Python the .ci_support "
                                f"jobs offer ({', '.join(offered)}), so no Python package would be built"))
    if problems:
        raise InputError.of(problems)
    readme_path = root / rendering.README
    readme = readme_path.read_text(encoding="utf-8") if readme_path.exists() else ""
    return rendering.render_all(config, recipe, jobs, built, readme)


def lost_hand_edits(root: Path, change: files.Plan) -> dict[str, list[str]]:
    """Each hand-edited generated file that the planned render would change, with one line per key it changes."""
    rendered = {f.path: f.text for f in change.write}
    current = {path: files.read(root, path) for path in rendered if path != rendering.README}
    templates = {inputs.RECIPE: rendering.TEMPLATE, rendering.VARIANTS: rendering.VARIANTS_TEMPLATE}
    lost = {}
    for path in hand_edits.hand_edited(files.read(root, inputs.RECIPE), current):
        if path in rendered and hand_edits.body(path, current[path]) != hand_edits.body(path, rendered[path]):
            where = f"{inputs.CONFIG} or {templates[path]}" if path in templates else inputs.CONFIG
            lost[path] = [f"{path}: {key}: edited by hand, and a render would change it"
                          for key in hand_edits.edited_keys(current[path], rendered[path])]
            lost[path].append(f"{path}: (file): edited by hand since it was rendered, so nothing was written (the "
                              f"diff shows what would be lost): make the edit in {where}, or drop it with "
                              f"`{rendering.COMMAND} --force`")
    return lost


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 with a diff when stale")
    parser.add_argument("--force", action="store_true", help="overwrite a hand edit of a generated file")
    parser.add_argument("--root", type=Path, default=bootstrap.REPO, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    # the diffs and messages quote the files, which are UTF-8: on a console that cannot show a character,
    # show its escape rather than fail
    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(errors="backslashreplace")
    try:
        # --check too: a render running beside it may have swapped in some of its files and not yet others
        with files.locked(args.root):
            return run(args.root, check=args.check, force=args.force)
    except InputError as exc:
        print(exc, file=sys.stderr)
        return 2


def run(root: Path, *, check: bool, force: bool) -> int:
    """Render the tree at `root`, or with `check` only show what is stale; the exit status."""
    change = files.plan(root, generate(root))
    if check:
        if change.empty:
            return 0
        sys.stdout.write(files.diff(root, change))
        stale = [f.path for f in change.write] + list(change.remove)
        print(f"stale: {', '.join(stale)}; run `{rendering.COMMAND}`", file=sys.stderr)
        return 1
    lost = {} if force else lost_hand_edits(root, change)
    if lost:
        sys.stdout.write(files.diff(root, files.Plan(tuple(f for f in change.write if f.path in lost), ())))
        print("\n".join(line for lines in lost.values() for line in lines), file=sys.stderr)
        return 2
    try:
        files.apply(root, change)
    except OSError as exc:
        print(f"{exc.filename}: (file): cannot write ({exc.strerror}); nothing was changed", file=sys.stderr)
        return 2
    for f in change.write:
        print(f"wrote {f.path}")
    for path in change.remove:
        print(f"removed {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
