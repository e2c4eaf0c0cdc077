"""Stages 1 and 2: load the generator's inputs and validate them into models that mirror the files.

- `config/feedstock.yaml` -> Config: what the feedstock builds (the single source of truth);
- `recipe/recipe.yaml` -> BotFields: only context.version, source.sha256 and build.number, which the
  autotick bot edits there and a render keeps.

A rule between values is a validator on the model that holds them. Every problem of both files is
reported in one run, one line each (reader.validated); the rules between values run once the values
they compare are valid.
"""

import os
import posixpath
import re
from pathlib import Path
from typing import Annotated, Any, Literal, Self, get_args

from pydantic import (AfterValidator, AliasPath, BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo,
                      model_validator)

from .architectures import NVCC_ARCHITECTURES, CudaLists, cuda_lists
from .architectures import problems as architecture_problems
from .cuda_targets import number
from .errors import InputError, clipped, quoted
from .reader import fail, validated, version_tuple

CONFIG = "config/feedstock.yaml"
RECIPE = "recipe/recipe.yaml"
CONDA_FORGE_YML = "conda-forge.yml"
# rattler-build applies a source's patches from the recipe's folder; ours are kept in PATCHES.
PATCH_DIR = "recipe"
PATCHES = f"{PATCH_DIR}/patches"
# ONNX Runtime's own Python floor (its setup.py and wheels); nothing older can be built.
ORT_PYTHON_FLOOR = (3, 11)
# conda subdirs conda-forge builds for; anything else in the config is a typo.
PlatformName = Literal["linux-64", "linux-aarch64", "linux-ppc64le", "osx-64", "osx-arm64", "win-64"]
OutputKey = Literal["plugin", "cpp", "python"]
OUTPUT_KEYS = get_args(OutputKey)


def text(pattern: str, what: str) -> Any:
    """A string matching `pattern`; a problem calls it `what`."""
    def check(value: str) -> str:
        if not re.fullmatch(pattern, value):
            raise ValueError(f"{quoted(value)} is not {what}")
        return value
    return Annotated[str, AfterValidator(check)]


def relative_path(inside: str) -> Any:
    """A path inside `inside`, written the way every platform's build reads it: not absolute, no `..`, `/`."""
    return text(r"(?!(.*/)?\.\.(/|$))[\w.+-]+(/[\w.+-]+)*", f"a path inside {inside} with forward slashes")


def distinct(values: list[str], same: Any = str) -> list[str]:
    first: dict[str, int] = {}
    fail(*(((i,), f"{quoted(v)} is listed twice (first as item {first[same(v)]})")
           for i, v in enumerate(values) if first.setdefault(same(v), i) != i))
    return values


def unique(item: Any, *, min_length: int = 1, same: Any = str) -> Any:
    return Annotated[list[item], Field(min_length=min_length), AfterValidator(lambda values: distinct(values, same))]


def lowest_first(architectures: list[str]) -> list[str]:
    """One platform's list, in the order ORT compiles them."""
    fail(*(((i,), f"{a!r} comes after {b!r}; list architectures from the lowest up")
           for i, (b, a) in enumerate(zip(architectures, architectures[1:], strict=False), 1) if number(a) < number(b)))
    return architectures


Url = text(r"https://[^\s\\]+", "an https URL")
PackageName = text(r"[a-z0-9][a-z0-9._-]*", "a conda package name")
# a line of a package's page on anaconda.org and of `conda search --info`; the config's are far shorter
Summary = text(r"(?=.*\S)[^\n]{1,200}", "a one-line summary of at most 200 characters")
Spdx = text(r"[A-Za-z0-9.+-]+", "an SPDX licence identifier")
Version = text(r"\d+\.\d+\.\d+", "a version like 1.24.4")
PythonVersion = text(r"3\.\d+", "a Python version like 3.11")
Architecture = text(r"\d{2,3}(-real|-virtual)?", "a CUDA architecture like 80-real or 120")


class Model(BaseModel):
    """A mapping of the config: an unknown key is a typo, and no value is converted (1.24 is not "1.24")."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Feedstock(Model):
    name: PackageName
    summary: Summary


class About(Model):
    homepage: Url
    repository: Url
    documentation: Url


class Vendored(Model):
    """A dependency ONNX Runtime's CMake fetches and links statically into an output."""

    dep: text(r"[\w-]+", "a dependency name")
    spdx: Spdx
    file: relative_path("the dependency's source tree") | None = None
    outputs: unique(OutputKey) = list(OUTPUT_KEYS)
    platforms: unique(PlatformName) | None = None  # None: every platform


class License(Model):
    spdx: Spdx
    files: unique(relative_path("the source tree"))
    vendored: list[Vendored]


def _patch_problem(root: Path, patch: str) -> str | None:
    """What keeps a listed patch from being a regular file inside recipe/: a link could bring in any file."""
    # os.path's tests: a name too long for the file system is no such file either
    path, shown = root / PATCH_DIR / patch, f"{PATCH_DIR}/{clipped(patch)}"
    if os.path.islink(path):
        return f"{shown} is a symbolic link; a patch is a regular file inside {PATCH_DIR}/"
    if not Path(os.path.realpath(path)).is_relative_to(os.path.realpath(root / PATCH_DIR)):
        return f"{shown} is outside {PATCH_DIR}/: a folder on its way is a symbolic link"
    return None if os.path.isfile(path) else f"{shown} does not exist"


def _patches_match_the_folder(patches: list[str], info: ValidationInfo) -> list[str]:
    """Each listed patch is a file of recipe/, and each file of recipe/patches/ is listed: one left out would
    sit there unapplied while it looks applied."""
    root = info.context["root"]
    found = [((i,), problem) for i, patch in enumerate(patches) if (problem := _patch_problem(root, patch))]
    listed = {posixpath.normpath(patch) for patch in patches}
    found += [((), f"{path.relative_to(root).as_posix()} is not listed; list it, or delete it")
              for path in sorted((root / PATCHES).rglob("*")) if (path.is_file() or path.is_symlink())
              and path.relative_to(root / PATCH_DIR).as_posix() not in listed]
    fail(*found)
    return patches


class Source(Model):
    url: text(r"https://[^\s\\]*\{version\}[^\s\\]*", "an https URL with {version}, where the recipe puts its version")
    patches: Annotated[unique(relative_path(f"{PATCH_DIR}/"), min_length=0),
                       AfterValidator(_patches_match_the_folder)]


class Cudnn(Model):
    as_: Literal["run", "constraint"] = Field(alias="as")  # run: a dependency; constraint: only a constraint


def _not_below_ort_floor(minimum: str) -> str:
    if version_tuple(minimum) < ORT_PYTHON_FLOOR:
        raise ValueError(f"{minimum} is below ONNX Runtime's Python floor {'.'.join(map(str, ORT_PYTHON_FLOOR))}")
    return minimum


class Python(Model):
    minimum: Annotated[PythonVersion, AfterValidator(_not_below_ort_floor)]
    maximum: PythonVersion | None = None
    requirements: list[text(r"[a-z0-9][a-z0-9._-]*( [<>=!~]\S*)?", "a conda package spec like numpy >=1.21")]

    @model_validator(mode="after")
    def _range(self) -> Self:
        if self.maximum and version_tuple(self.maximum) < version_tuple(self.minimum):
            fail((("maximum",), f"{self.maximum} is below python.minimum {self.minimum}"))
        return self


class Output(Model):
    name: PackageName
    summary: Summary


class CpuOutput(Output):
    novec_name: PackageName  # the same, built with Eigen's vectorization off (onnxruntime_DONT_VECTORIZE)


class Library(Model):
    unix: text(r"lib/(?!\.\.?$)[\w.-]+", "a file's path under lib/")
    win: text(r"Library/bin/[\w.-]+\.dll", "a DLL under Library/bin/")


class Plugin(Output):
    ep_name: text(r"[A-Za-z][A-Za-z0-9_]*", "an EP name like CUDAExecutionProvider")
    library: Library


class Outputs(Model):
    plugin: Plugin
    cpp: CpuOutput
    python: CpuOutput

    @model_validator(mode="after")
    def _distinct_names(self) -> Self:
        keys = [(key, field) for key in OUTPUT_KEYS for field in ("name", "novec_name") if field in
                type(getattr(self, key)).model_fields]
        names = [getattr(getattr(self, key), field) for key, field in keys]
        fail(*((keys[i], f"{quoted(names[i])} is also outputs.{'.'.join(keys[names.index(names[i])])}")
               for i in range(len(keys)) if names.index(names[i]) != i))
        return self

    def key(self, name: str) -> OutputKey:
        """Which output is called `name` (its `name`, not a -novec twin's): the scripts that handle one output
        differently from the others ask this rather than spell the package names the config already holds."""
        keys = {getattr(self, key).name: key for key in OUTPUT_KEYS}
        if name not in keys:
            raise KeyError(f"{CONFIG}: no output is called {name!r} (outputs.*.name: {', '.join(keys)})")
        return keys[name]


class Platform(Model):
    cuda: bool = True
    macos_sdk: text(r"\d+\.\d+", "a macOS SDK version like 13.3") | None = None  # None: the pinning's


class CudaVersion(Model):
    architectures: Annotated[dict[str, Annotated[unique(Architecture), AfterValidator(lowest_first)]],
                             Field(min_length=1)]


class Cuda(Model):
    nvcc_threads: Annotated[int, Field(ge=1, le=64)]
    nvcc_gb_per_thread: Annotated[int, Field(ge=1, le=64)]
    build_jobs: Annotated[int, Field(ge=1, le=256)]
    sm90_tma_jobs: Annotated[int, Field(ge=1, le=256)]
    versions: Annotated[dict[str, CudaVersion], Field(min_length=1)]

    @model_validator(mode="after")
    def _nvcc_compiles_every_architecture(self) -> Self:
        """What the architectures are checked against: architectures.NVCC_ARCHITECTURES and JETSON."""
        found = [(("versions", v), f"{quoted(v)} is not a CUDA release whose nvcc this feedstock knows (known: "
                  f"{', '.join(NVCC_ARCHITECTURES)}); a new one needs its row in NVCC_ARCHITECTURES "
                  "(scripts/feedstock/architectures.py)") for v in self.versions if v not in NVCC_ARCHITECTURES]
        found += [(("versions", v, "architectures", platform, i), problem)
                  for v, entry in self.versions.items() if v in NVCC_ARCHITECTURES
                  for platform, archs in entry.architectures.items()
                  for i, problem in architecture_problems(v, platform, tuple(archs))]
        fail(*found)
        return self


class RunnerSize(Model):
    cores: Annotated[int, Field(ge=1, le=1024)]
    free_gib: Annotated[int, Field(ge=1, le=4096)]
    hours: Annotated[int, Field(ge=1, le=120)]


class Config(Model):
    feedstock: Feedstock
    about: About
    license: License
    maintainers: unique(text(r"[A-Za-z0-9][A-Za-z0-9-]*", "a GitHub handle"), same=str.lower)  # GitHub's
    source: Source
    min_core_version: Version
    cudnn: Cudnn
    python: Python
    outputs: Outputs
    platforms: Annotated[dict[PlatformName, Annotated[Platform, BeforeValidator(lambda v: {} if v is None else v)]],
                         Field(min_length=1)]
    # the GitHub Actions runner label by the OS of the machines that build
    runners: dict[str, text(r"[\w.-]+", "a GitHub Actions runner label")]
    # what each of those runners gives a job
    runner_size: RunnerSize
    cuda: Cuda

    @property
    def cuda_platforms(self) -> tuple[str, ...]:
        return tuple(name for name, platform in self.platforms.items() if platform.cuda)

    @property
    def cuda_lists(self) -> CudaLists:
        """The architecture list of every CUDA version the recipe builds, listed or derived."""
        return cuda_lists({v: {p: tuple(a) for p, a in entry.architectures.items()}
                           for v, entry in self.cuda.versions.items()})

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> Self:
        cuda = set(self.cuda_platforms)
        found = [(("cuda", "versions", v, "architectures"), f"no architecture list for CUDA platform {platform}")
                 for v, entry in self.cuda.versions.items() for platform in sorted(cuda - set(entry.architectures))]
        found += [(("cuda", "versions", v, "architectures", platform), "not a CUDA platform of this feedstock")
                  for v, entry in self.cuda.versions.items() for platform in entry.architectures
                  if platform not in cuda]
        found += [(("license", "vendored", i, "platforms", j), f"{p!r} is not a platform of this feedstock")
                  for i, dep in enumerate(self.license.vendored) for j, p in enumerate(dep.platforms or ())
                  if p not in self.platforms]
        builds_on = {info.context["build_platforms"].get(name, name).split("-")[0] for name in self.platforms}
        found += [(("runners", system), f"no platform of this feedstock builds on {clipped(system)} (they build on "
                   f"{', '.join(sorted(builds_on))})") for system in self.runners if system not in builds_on]
        with_sdk = [name for name, platform in self.platforms.items() if platform.macos_sdk]
        found += [(("platforms", name, "macos_sdk"), "only macOS platforms have a macOS SDK")
                  for name in with_sdk if not name.startswith("osx-")]
        found += [(("platforms", name, "macos_sdk"), "only one macOS platform may set it: recipe/variants.yaml can "
                   "select the SDK by OS (osx) only, so a second one would give MACOSX_SDK_VERSION twice")
                  for name in [name for name in with_sdk if name.startswith("osx-")][1:]]
        fail(*found)
        return self


class BotFields(BaseModel):
    """What the autotick bot owns in `recipe/recipe.yaml`; the rest of the recipe is the render's."""

    model_config = ConfigDict(strict=True, frozen=True)
    version: Version = Field(validation_alias=AliasPath("context", "version"))
    sha256: text(r"[0-9a-f]{64}", "64 lowercase hex digits") = Field(validation_alias=AliasPath("source", "sha256"))
    number: int = Field(ge=0, le=10_000, validation_alias=AliasPath("build", "number"))


class CondaForgeYml(BaseModel):
    """What the render reads of conda-smithy's settings, which hold many more."""

    model_config = ConfigDict(strict=True, frozen=True)
    build_platform: dict[str, str] | None = None  # conda-smithy's spelling: linux_aarch64: linux_64


def build_platforms(root: Path) -> dict[str, str]:
    """conda-forge.yml's build_platform: the platform whose machines build a target (linux-aarch64 on
    linux-64). conda-smithy reads it there, so the config does not repeat it."""
    forge = validated(CondaForgeYml, root / CONDA_FORGE_YML, CONDA_FORGE_YML)
    return {target.replace("_", "-", 1): build.replace("_", "-", 1)
            for target, build in (forge.build_platform or {}).items()}


def load_config(root: Path) -> Config:
    context = {"root": root, "build_platforms": build_platforms(root)}
    return validated(Config, root / CONFIG, CONFIG, context)


def load_bot_fields(root: Path) -> BotFields:
    """The bot-owned values from the committed recipe, which is where a release changes them."""
    if not (root / RECIPE).exists():
        raise InputError(RECIPE, "(file)", "not found; it holds context.version, source.sha256 and build.number, "
                                           "which a render keeps: restore it with `git checkout -- recipe/recipe.yaml`")
    return validated(BotFields, root / RECIPE, RECIPE)


def load(root: Path) -> tuple[Config, BotFields]:
    """The config and the bot's fields, with the problems of both files reported together."""
    problems = []
    loaded = []
    for load_file in (load_config, load_bot_fields):
        try:
            loaded.append(load_file(root))
        except InputError as exc:
            problems += exc.problems
    if problems:
        raise InputError.of(problems)
    config, bot = loaded
    return config, bot
