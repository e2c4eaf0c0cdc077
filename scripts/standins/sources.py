"""ONNX Runtime's source and the archives its CMake fetches, for the rehearsal and the tests.

They come from a mirror folder when one is named, and are downloaded otherwise:

- `ORT_SOURCE_MIRROR`: a folder laid out as
      onnxruntime-<version>-src.tar.*        ORT's source tree under one top folder, used as it is (it
                                             need not be the tag's tarball, so the recipe's sha256 is
                                             not checked against it)
      mirror/<url without https://>          cmake/deps.txt's archives, the layout ORT's own
                                             onnxruntime_CMAKE_DEPS_MIRROR_DIR reads (ORT checks their SHA1)
      cutlass-cudnn_frontend-trees.tar.zst   optional: cutlass/ and cudnn_frontend/ trees, used instead
                                             of those two archives
  Unset, it is `../shared/upstream` beside the checkout when that folder is there; set empty, no mirror.
- Otherwise the recipe's source URL and the deps.txt archives a rehearsal needs are downloaded into
  `<cache>/sources/mirror/<url without https://>`, the layout ORT's mirror option reads. Each download is
  checked against the recipe's sha256 or deps.txt's SHA1 before it enters the cache.
  `ORT_DOWNLOAD_BASE_URL`, when set, stands in for `https://` in every URL: a plain HTTP server laid
  out like `mirror/` then serves them.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import subprocess
import tempfile
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from feedstock.inputs import BotFields, Config, load
from standins import StandinError

MIRROR_VARIABLE = "ORT_SOURCE_MIRROR"
BASE_URL_VARIABLE = "ORT_DOWNLOAD_BASE_URL"
DEFAULT_MIRROR = Path(__file__).resolve().parents[2].parent / "shared" / "upstream"
# What the mirror's ORT tree (not the tag's: ../shared/upstream/SOURCES.yaml) lacks of the recipe's tarball,
# where a package's tests see it; each file says why. A package built from that tree takes them.
MIRROR_TREE_PATCHES = (Path(__file__).with_name("mirror-tree-iobinding.patch"),)
TREES = "cutlass-cudnn_frontend-trees.tar.zst"
# the folders of TREES, as FetchContent names them, which are also deps.txt's names of the archives they replace
TREE_NAMES = ("cutlass", "cudnn_frontend")
DEPS_TXT = "cmake/deps.txt"


class SourcesUnavailable(Exception):
    """Neither a mirror nor a download gives the sources; says why in one line."""


class WrongHash(Exception):
    """A download whose bytes are not the ones the recipe or deps.txt names; nothing was cached."""


@dataclass(frozen=True)
class Sources:
    tarball: Path                # ORT's source tree, in any compression tar reads
    deps_mirror: Path            # for -Donnxruntime_CMAKE_DEPS_MIRROR_DIR
    archives: dict[str, Path]    # deps.txt name -> archive, for the dependencies asked for
    trees: Path | None           # cutlass/ and cudnn_frontend/ to use instead of their archives
    origin: str                  # where they came from, for reports

    def _tar(self, *args: str) -> subprocess.CompletedProcess[str]:
        # the top folder is onnxruntime-<version>/ in the tag's tarball, and may be named otherwise in a mirror
        return subprocess.run(["tar", *args[:1], str(self.tarball), "--wildcards", "--no-wildcards-match-slash",
                               *args[1:]], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600)

    def read(self, member: str) -> str:
        """One file of the source tree, by its path below the tree's top folder."""
        done = self._tar("-xOf", f"*/{member}")
        if done.returncode != 0:
            raise SourcesUnavailable(f"{self.tarball}: cannot read {member}: {done.stderr.strip()}")
        return done.stdout

    def exists(self, member: str) -> bool:
        return self._tar("-tf", f"*/{member}").returncode == 0

    def unpack(self, into: Path, *members: str) -> Path:
        """The source tree (or some of its folders and files) with its top folder dropped, in `into`."""
        into.mkdir(parents=True, exist_ok=True)
        done = self._tar("-xf", "-C", str(into), "--strip-components=1", *(f"*/{m}" for m in members))
        if done.returncode != 0:
            raise SourcesUnavailable(f"{self.tarball}: cannot unpack: {done.stderr.strip()}")
        return into


def mirror_folder(environ: Mapping[str, str]) -> Path | None:
    named = environ.get(MIRROR_VARIABLE)
    if named is None:
        return DEFAULT_MIRROR if DEFAULT_MIRROR.is_dir() else None
    return Path(named).resolve() if named else None


def deps_txt(text: str) -> dict[str, tuple[str, str]]:
    """deps.txt's `name;url;sha1` lines, by name."""
    entries = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            name, url, sha1 = line.strip().split(";")
            entries[name] = (url, sha1)
    return entries


def mirror_path(url: str) -> str:
    """Where ORT's mirror layout keeps a URL's archive, below the mirror folder."""
    return url.removeprefix("https://")


class RecipeSource(NamedTuple):
    version: str
    url: str
    sha256: str


def recipe_source(feedstock: Path) -> RecipeSource:
    """The version, source URL and sha256 of the feedstock's committed recipe."""
    return source_of(*load(feedstock))


def source_of(config: Config, bot: BotFields) -> RecipeSource:
    return RecipeSource(bot.version, config.source.url.replace("{version}", bot.version), bot.sha256)


def downloads(cache: Path) -> Path:
    """Where `locate` downloads into below its cache, in the layout ORT's mirror option reads."""
    return cache / "sources" / "mirror"


def at_hand(recipe: RecipeSource, cache: Path, environ: Mapping[str, str] = os.environ) -> Sources | None:
    """The recipe's source tarball where it already is (the mirror folder, or what `locate` downloaded into
    `cache`), or None: nothing is downloaded."""
    mirror = mirror_folder(environ)
    if mirror is not None:
        try:
            return from_mirror(mirror, recipe.version)
        except SourcesUnavailable:
            return None
    target = downloads(cache) / mirror_path(recipe.url)
    if target.is_file() and _digest("sha256", target) == recipe.sha256:
        return Sources(target, downloads(cache), {}, None, f"downloaded {recipe.url} into {cache}")
    return None


def locate(feedstock: Path, cache: Path, dependencies: Sequence[str] = (),
           environ: Mapping[str, str] = os.environ) -> Sources:
    """ORT's source for the feedstock's recipe and the deps.txt archives named, from the mirror or the cache."""
    recipe = recipe_source(feedstock)
    mirror = mirror_folder(environ)
    if mirror is not None:
        return from_mirror(mirror, recipe.version, dependencies)
    base_url = environ.get(BASE_URL_VARIABLE, "")
    folder = downloads(cache)
    tarball = _fetch(recipe.url, "sha256", recipe.sha256, "recipe/recipe.yaml", folder, base_url)
    sources = Sources(tarball, folder, {}, None, f"downloaded {recipe.url} (sha256 checked) into {cache}")
    listed = deps_txt(sources.read(DEPS_TXT)) if dependencies else {}
    for name in dependencies:
        dep_url, sha1 = _listed(listed, name, tarball)
        sources.archives[name] = _fetch(dep_url, "sha1", sha1, DEPS_TXT, folder, base_url)
    return sources


def _listed(listed: dict[str, tuple[str, str]], name: str, tarball: Path) -> tuple[str, str]:
    if name not in listed:
        raise StandinError(f"{tarball}: {DEPS_TXT} lists no {name}, which the rehearsal asks for")
    return listed[name]


def from_mirror(mirror: Path, version: str, dependencies: Sequence[str] = ()) -> Sources:
    """The mirror folder's source of `version`, its trees when it has them, and the deps.txt archives named."""
    found = sorted(mirror.glob(f"onnxruntime-{version}-src.tar*"))
    if len(found) != 1:
        raise SourcesUnavailable(f"{mirror} ({MIRROR_VARIABLE}): {len(found)} files named "
                                 f"onnxruntime-{version}-src.tar*, expected one")
    trees = mirror / TREES if (mirror / TREES).is_file() else None
    sources = Sources(found[0], mirror / "mirror", {}, trees, f"mirror {mirror} ({found[0].name}, used as it is)")
    needed = [name for name in dependencies if trees is None or name not in TREE_NAMES]
    listed = deps_txt(sources.read(DEPS_TXT)) if needed else {}
    for name in needed:
        archive = sources.deps_mirror / mirror_path(_listed(listed, name, found[0])[0])
        if not archive.is_file():
            raise SourcesUnavailable(f"{archive}: not in the mirror ({MIRROR_VARIABLE}), "
                                     f"and deps.txt's {name} is needed")
        sources.archives[name] = archive
    return sources


def _fetch(url: str, algorithm: str, expected: str, listed_in: str, folder: Path, base_url: str) -> Path:
    """`folder`'s copy of what `url` serves, checked before it enters the folder; a kept copy is reused."""
    target = folder / mirror_path(url)
    if target.is_file() and _digest(algorithm, target) == expected:
        return target
    source = f"{base_url.rstrip('/')}/{mirror_path(url)}" if base_url else url
    via = f" (from {source})" if source != url else ""
    folder.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.", suffix=".partial")
    try:
        digest = hashlib.new(algorithm)
        with os.fdopen(handle, "wb") as out:
            try:
                with urllib.request.urlopen(source, timeout=60) as response:
                    while chunk := response.read(1 << 20):
                        digest.update(chunk)
                        out.write(chunk)
            except (urllib.error.URLError, http.client.HTTPException, TimeoutError, ConnectionError) as error:
                raise SourcesUnavailable(f"{url}{via}: cannot download ({getattr(error, 'reason', None) or error}), "
                                         f"and {MIRROR_VARIABLE} names no mirror") from None
        if digest.hexdigest() != expected:
            raise WrongHash(f"{url}{via}: {algorithm} {digest.hexdigest()}, but {listed_in} says {expected}; "
                            "nothing was cached")
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(partial, target)
    finally:
        Path(partial).unlink(missing_ok=True)
    return target


def _digest(algorithm: str, path: Path) -> str:
    with path.open("rb") as file:
        return hashlib.file_digest(file, algorithm).hexdigest()


def place_trees(trees: Path, src: Path, build_dir: str) -> dict[str, str]:
    """TREES put where FetchContent would unpack their archives (`<build_dir>/_deps/<name>-src` in the source
    tree `src`), with cutlass patched as ORT's CMake patches it: a FETCHCONTENT_SOURCE_DIR skips that step.
    Each FETCHCONTENT_SOURCE_DIR_<NAME> setting's folder, relative to `src`."""
    deps = src / build_dir / "_deps"
    deps.mkdir(parents=True, exist_ok=True)
    # zstd reads the tarball from its standard input (named, it skips a symbolic link)
    subprocess.run(f'zstd -dc < "{trees}" | tar -x -C "{deps}"', shell=True, check=True)
    for name in TREE_NAMES:
        (deps / name).rename(deps / f"{name}-src")
    (patch,) = src.glob("cmake/patches/cutlass/cutlass_*.patch")
    subprocess.run(["patch", "-p1", "-i", str(patch)], cwd=deps / "cutlass-src", check=True, stdout=subprocess.DEVNULL)
    return {name.upper(): f"{build_dir}/_deps/{name}-src" for name in TREE_NAMES}
