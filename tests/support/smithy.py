"""The real conda-smithy, installed offline from ../shared/thirdparty/ and run as conda-forge runs it.

conda-smithy, conda, conda-build, menuinst and rattler-build-conda-compat are not on PyPI, so their
sources come from `../shared/thirdparty/` (provenance in its SOURCES.yaml); everything else they need
comes from PyPI (tests/conda-smithy-requirements.txt). They go into a virtual environment of their
own under `.cache/`, built once per set of inputs: conda's dependencies stay out of the test suite's.

Three things conda-smithy reaches for are answered here instead:
- the `rattler-build` program it calls to render the recipe: `rattler_build_render_only.py`, which
  renders through py-rattler-build, the same engine, and refuses to build;
- conda-forge's pinning, which it would download: the shared one, laid out as the
  conda-forge-pinning package lays it out, passed with `-e` and `--no-check-uptodate`;
- its network calls (`smithy_offline.py`): the linter hints from the shared pinning, and the check
  that each maintainer exists on GitHub, answered "exists" without asking.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml
import zstandard

from bootstrap import cached_venv, pip_install

SUPPORT = Path(__file__).resolve().parent
REPO = SUPPORT.parent.parent
REQUIREMENTS = REPO / "tests" / "conda-smithy-requirements.txt"
SOURCES = "conda-smithy-2026.8.5-src.tar.zst"
PINNING = "conda-forge-pinning-f875045.tar.zst"
# installed in this order: each one's dependencies among them come before it
PROJECTS = ("menuinst", "conda", "conda-build", "rattler-build-conda-compat", "conda-smithy")
# said in the output of every test that relies on it
MAINTAINER_CHECK = "maintainer check not made (no network here): every maintainer is taken to exist on GitHub"


@dataclass(frozen=True)
class Smithy:
    env: Path
    install_seconds: float  # 0.0 when the cached environment was reused

    @property
    def bin(self) -> Path:
        return self.env / "bin"

    @property
    def pinning(self) -> Path:
        """conda-forge's pinning as the conda-forge-pinning package lays it out."""
        return self.env / "pinning" / "conda_build_config.yaml"

    def run(self, *args: str, cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess[str]:
        """`conda-smithy ARGS` with its network calls answered locally and nothing read from stdin."""
        environment = {k: v for k, v in os.environ.items() if k not in {"GH_TOKEN", "GITHUB_TOKEN"}}
        environment["PATH"] = f"{self.bin}{os.pathsep}{environment.get('PATH', '')}"
        environment["SMITHY_OFFLINE_HINTS"] = str(self.env / "pinning" / "linter_hints" / "hints.toml")
        command = [str(self.bin / "python"), str(SUPPORT / "smithy_offline.py"), *args]
        return subprocess.run(command, cwd=cwd, env=environment, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)

    def rerender(self, feedstock: Path, pinning: Path | None = None) -> subprocess.CompletedProcess[str]:
        """`pinning`: another conda_build_config.yaml laid out like `self.pinning` (with a migration added).
        Without one, conda-forge's pinning carrying the feedstock's own migrations, as the pinning the bot
        rerenders with carries every migration it has added to a feedstock (conda-smithy deletes the others)."""
        with tempfile.TemporaryDirectory() as scratch:
            if pinning is None:
                pinning = self.pinning_with(sorted((feedstock / ".ci_support" / "migrations").glob("*.yaml")),
                                            Path(scratch) / "pinning")
            return self.run("rerender", "--no-check-uptodate", "-e", str(pinning), cwd=feedstock)

    def pinning_with(self, migrations: Path | list[Path], into: Path) -> Path:
        """A copy of conda-forge's pinning under `into` that also carries `migrations`, as the pinning does
        while a migration is open: conda-smithy deletes a feedstock's migration the pinning lacks."""
        shutil.copytree(self.pinning.parent, into)
        for migration in [migrations] if isinstance(migrations, Path) else migrations:
            shutil.copy2(migration, into / "share" / "conda-forge" / "migrations" / migration.name)
        return into / self.pinning.name


def _digest(thirdparty: Path) -> str:
    digest = hashlib.sha256()
    for path in (thirdparty / SOURCES, thirdparty / PINNING, REQUIREMENTS, SUPPORT / "rattler_build_render_only.py",
                 Path(__file__)):
        digest.update(path.read_bytes())
    digest.update(sys.version.encode())
    return digest.hexdigest()[:16]


def _extract(archive: Path, into: Path) -> None:
    with archive.open("rb") as compressed:
        data = zstandard.ZstdDecompressor().stream_reader(compressed).read()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into, filter="data")


def _lay_out_pinning(extracted: Path, root: Path) -> None:
    recipe = extracted / "recipe"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    shutil.copy2(recipe / "conda_build_config.yaml", root / "conda_build_config.yaml")
    for folder in ("migrations", "migration_support"):
        shutil.copytree(recipe / folder, root / "share" / "conda-forge" / folder)
    shutil.copytree(recipe / "linter_hints", root / "linter_hints")


def _versions(thirdparty: Path) -> dict[str, str]:
    """Each project's version from its tag in SOURCES.yaml: the archives carry no git metadata."""
    sources = yaml.safe_load((thirdparty / "SOURCES.yaml").read_text())[SOURCES]
    return {name: str(sources[name]["tag"]).removeprefix("v") for name in PROJECTS}


def _install(thirdparty: Path, python: Path) -> None:
    env = python.parent.parent
    environment = dict(os.environ)
    for name, version in _versions(thirdparty).items():
        # setuptools-scm and hatch-vcs read the version from git, which the archives do not have
        environment[f"SETUPTOOLS_SCM_PRETEND_VERSION_FOR_{name.upper().replace('-', '_')}"] = version
    with tempfile.TemporaryDirectory() as scratch:
        sources = Path(scratch) / "src"
        _extract(thirdparty / SOURCES, sources)
        pip_install(python, ["-r", str(REQUIREMENTS), *(str(sources / name) for name in PROJECTS)],
                    naming=f"{REQUIREMENTS.relative_to(REPO)} and {', '.join(PROJECTS)}", environ=environment)
        pinning = Path(scratch) / "pinning"
        _extract(thirdparty / PINNING, pinning)
        _lay_out_pinning(pinning, env / "pinning")
    shim = env / "bin" / "rattler-build"
    shim.write_text(f"#!{python}\n" + (SUPPORT / "rattler_build_render_only.py").read_text())
    shim.chmod(0o755)


def install(thirdparty: Path, cache: Path) -> Smithy:
    """The environment for these inputs, built unless a complete one is already cached."""
    digest = _digest(thirdparty)
    start = time.monotonic()
    seconds = 0.0

    def timed_install(python: Path) -> None:
        nonlocal seconds
        _install(thirdparty, python)
        seconds = time.monotonic() - start

    python = cached_venv(cache / f"conda-smithy-{digest}", digest, timed_install)
    return Smithy(python.parent.parent, seconds)
