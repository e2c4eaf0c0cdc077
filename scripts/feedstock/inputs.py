"""Stage 1: read and validate the generator's inputs.

- `config/feedstock.yaml`: what the feedstock builds (the single source of truth);
- `recipe/recipe.yaml`: only `context.version`, `source.sha256` and `build.number`, which the
  autotick bot edits there and a re-render must keep.

Every value of the config is checked, and every problem found is reported in one run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .architectures import NVCC_ARCHITECTURES, CudaLists, cuda_lists, number
from .architectures import problems as architecture_problems
from .errors import InputError, Problem
from .reader import Node, load_yaml, version_tuple

CONFIG = "config/feedstock.yaml"
RECIPE = "recipe/recipe.yaml"
CONDA_FORGE_YML = "conda-forge.yml"
# rattler-build applies a source's patches from the recipe's folder.
PATCH_DIR = "recipe"

# conda subdirs conda-forge builds for; anything else in the config is a typo.
KNOWN_PLATFORMS = ("linux-64", "linux-aarch64", "linux-ppc64le", "osx-64", "osx-arm64", "win-64")
# ONNX Runtime's own Python floor (its setup.py and wheels); nothing older can be built.
ORT_PYTHON_FLOOR = (3, 11)

VERSION = r"\d+\.\d+\.\d+"
SHA256 = r"[0-9a-f]{64}"
CUDA_ARCH = r"\d{2,3}(-real|-virtual)?"
SPDX_ID = r"[A-Za-z0-9.+-]+"
PACKAGE_NAME = r"[a-z0-9][a-z0-9._-]*"
ONE_LINE = r"[^\n]*\S[^\n]*"
HTTPS_URL = r"https://[^\s\\]+"
PYTHON_VERSION = r"3\.\d+"

OUTPUT_KEYS = ("plugin", "cpp", "python")


@dataclass(frozen=True)
class Vendored:
    """A dependency ONNX Runtime's CMake fetches and links statically into an output."""

    dep: str
    spdx: str
    file: str | None
    outputs: tuple[str, ...]
    platforms: tuple[str, ...] | None  # None: every platform


@dataclass(frozen=True)
class License:
    spdx: str
    files: tuple[str, ...]
    vendored: tuple[Vendored, ...]


@dataclass(frozen=True)
class Output:
    name: str
    summary: str


@dataclass(frozen=True)
class Plugin(Output):
    ep_name: str
    library_unix: str
    library_win: str


@dataclass(frozen=True)
class Platform:
    name: str
    cuda: bool
    build_platform: str
    macos_sdk: str | None = None  # None: the pinning's MACOSX_SDK_VERSION

    @property
    def os(self) -> str:
        return self.name.split("-")[0]


@dataclass(frozen=True)
class CudaVersion:
    version: str
    architectures: dict[str, tuple[str, ...]]  # by platform


@dataclass(frozen=True)
class Config:
    feedstock_name: str
    summary: str
    homepage: str
    repository: str
    documentation: str
    license: License
    maintainers: tuple[str, ...]
    source_url: str
    patches: tuple[str, ...]
    min_core_version: str
    cudnn_major: str
    cudnn_as: str  # "run" or "constraint"
    python_minimum: str
    python_maximum: str | None
    python_requirements: tuple[str, ...]  # conda match specs
    plugin: Plugin
    cpp: Output
    python_package: Output
    platforms: tuple[Platform, ...]
    cuda_versions: tuple[CudaVersion, ...]
    nvcc_threads: int
    nvcc_gb_per_thread: int
    cuda_build_jobs: int
    runners: dict[str, str]  # GitHub Actions runner label by the OS of the machine that builds

    @property
    def cuda_platforms(self) -> tuple[Platform, ...]:
        return tuple(p for p in self.platforms if p.cuda)

    @property
    def cuda_lists(self) -> CudaLists:
        """The architecture list of every CUDA version the recipe builds, listed or derived."""
        return cuda_lists({c.version: c.architectures for c in self.cuda_versions})


@dataclass(frozen=True)
class BotFields:
    """What the autotick bot owns in `recipe/recipe.yaml`."""

    version: str
    sha256: str
    number: int


TOP_KEYS = ("feedstock", "about", "license", "maintainers", "source", "min_core_version", "cudnn", "python", "outputs",
            "platforms", "cuda", "runners")


def _relative_path(node: Node, inside: str) -> str | None:
    """A path relative to `inside`, written the way every platform's build reads it."""
    path = node.text()
    if path is None:
        return None
    if "\\" in path:
        node.report(f"{path!r} has backslashes; write paths with forward slashes")
    elif path.startswith("/") or re.match(r"[A-Za-z]:", path):
        node.report(f"{path!r} is absolute; give it relative to {inside}")
    elif ".." in path.split("/"):
        node.report(f"{path!r} leaves {inside} (..)")
    elif not re.fullmatch(r"[\w.+-]+(/[\w.+-]+)*", path):
        node.report(f"{path!r} is not a path relative to {inside}")
    else:
        return path
    return None


def _distinct(nodes: list[Node], values: list[str | None], *, ignore_case: bool = False) -> None:
    """Report every value that an earlier item of the same list already gave."""
    first: dict[str, str] = {}
    for node, value in zip(nodes, values):
        if value is None:
            continue
        seen = value.lower() if ignore_case else value
        if seen in first:
            node.report(f"{value!r} is listed twice (first at {first[seen]})")
        else:
            first[seen] = node.key


def _build_platforms(root: Path) -> dict[str, str]:
    """conda-forge.yml's build_platform: the platform whose machines build a target (linux-aarch64 on
    linux-64). conda-smithy reads it there, so the config does not repeat it."""
    forge = load_yaml(root / CONDA_FORGE_YML, CONDA_FORGE_YML)
    mapping = (forge.get("build_platform") if isinstance(forge, dict) else None) or {}
    return {target.replace("_", "-", 1): str(build).replace("_", "-", 1) for target, build in mapping.items()}


def _platforms(node: Node, build_platforms: dict[str, str]) -> tuple[Platform, ...]:
    platforms = []
    for name, entry in node.entries().items():
        if name not in KNOWN_PLATFORMS:
            entry.report(f"unknown platform (known: {', '.join(KNOWN_PLATFORMS)})")
            continue
        optional = {"cuda", "macos_sdk"}
        fields = entry.mapping(optional, optional=optional) if entry.value is not None else {}
        build_platform = build_platforms.get(name, name)
        cuda = fields["cuda"].flag() if "cuda" in fields else True
        macos_sdk = None
        if "macos_sdk" in fields:
            if name.startswith("osx-"):
                macos_sdk = fields["macos_sdk"].text(r"\d+\.\d+", "a macOS SDK version like 13.3")
            else:
                fields["macos_sdk"].report("only macOS platforms have a macOS SDK")
        if macos_sdk is not None and any(p.macos_sdk for p in platforms):
            fields["macos_sdk"].report("only one macOS platform may set it: recipe/variants.yaml can select the "
                                       "SDK by OS (osx) only, so a second one would give MACOSX_SDK_VERSION twice")
        if cuda is not None:
            platforms.append(Platform(name, cuda, build_platform, macos_sdk))
    return tuple(platforms)


def _architectures(node: Node, version: str, platform: str) -> tuple[str, ...]:
    """One platform's list, lowest architecture first, each once: the order ORT compiles them in."""
    items = node.items()
    archs = [item.text(CUDA_ARCH, "a CUDA architecture like 80-real or 120") for item in items]
    _distinct(items, archs)
    numbered = [(item, arch, number(arch)) for item, arch in zip(items, archs) if arch]
    for (_, before, low), (item, arch, high) in zip(numbered, numbered[1:]):
        if high < low:
            item.report(f"{arch!r} comes after {before!r}; list architectures from the lowest up")
    if version in NVCC_ARCHITECTURES:
        valid = [(item, arch) for item, arch in zip(items, archs) if arch]
        for index, problem in architecture_problems(version, platform, tuple(arch for _, arch in valid)):
            valid[index][0].report(problem)
    return tuple(arch for arch in archs if arch is not None)


def _cuda_versions(node: Node, cuda_platforms: set[str]) -> tuple[CudaVersion, ...]:
    versions = []
    for version, entry in node.entries().items():
        if version not in NVCC_ARCHITECTURES:
            entry.report(f"{version!r} is not a CUDA release whose nvcc this feedstock knows (known: "
                         f"{', '.join(NVCC_ARCHITECTURES)}); a new one needs its row in NVCC_ARCHITECTURES "
                         "(scripts/feedstock/architectures.py)")
        arch_lists = entry.mapping({"architectures"})["architectures"]
        by_platform = arch_lists.entries()
        for platform in sorted(cuda_platforms - set(by_platform)) if by_platform else ():
            arch_lists.report(f"no architecture list for CUDA platform {platform}")
        architectures = {}
        for platform_name, archs in by_platform.items():
            if platform_name not in cuda_platforms:
                archs.report("not a CUDA platform of this feedstock")
            architectures[platform_name] = _architectures(archs, version, platform_name)
        versions.append(CudaVersion(version, architectures))
    return tuple(versions)


def _license(node: Node, platform_names: set[str]) -> License:
    fields = node.mapping({"spdx", "files", "vendored"})
    vendored = []
    for item in fields["vendored"].items():
        optional = {"file", "outputs", "platforms"}
        entry = item.mapping({"dep", "spdx", *optional}, optional=optional)
        outputs: tuple[str | None, ...] = OUTPUT_KEYS
        if "outputs" in entry:
            output_items = entry["outputs"].items()
            outputs = tuple(o.choice(OUTPUT_KEYS) for o in output_items)
            _distinct(output_items, list(outputs))
        platforms: tuple[str | None, ...] | None = None
        if "platforms" in entry:
            platform_items = entry["platforms"].items()
            platforms = tuple(p.choice(tuple(sorted(platform_names))) for p in platform_items)
            _distinct(platform_items, list(platforms))
        vendored.append(Vendored(
            dep=entry["dep"].text(r"[\w-]+", "a dependency name"),
            spdx=entry["spdx"].text(SPDX_ID, "an SPDX licence identifier"),
            file=_relative_path(entry["file"], "the dependency's source tree") if "file" in entry else None,
            outputs=outputs,
            platforms=platforms,
        ))
    file_items = fields["files"].items()
    files = [_relative_path(item, "the source tree") for item in file_items]
    _distinct(file_items, files)
    return License(
        spdx=fields["spdx"].text(SPDX_ID, "an SPDX licence identifier"),
        files=tuple(files),
        vendored=tuple(vendored),
    )


def _runners(node: Node, platforms: tuple[Platform, ...]) -> dict[str, str | None]:
    build_systems = {p.build_platform.split("-")[0] for p in platforms}
    runners = {}
    for system, label in node.entries().items():
        if system not in build_systems:
            label.report(f"no platform of this feedstock builds on {system} (they build on "
                         f"{', '.join(sorted(build_systems))})")
            continue
        runners[system] = label.text(r"[\w.-]+", "a GitHub Actions runner label")
    return runners


def _source_url(node: Node) -> str | None:
    url = node.text(HTTPS_URL, "an https URL")
    if url is not None and "{version}" not in url:
        node.report("must contain {version}, where the recipe puts ${{ version }}")
    return url


def _patches(node: Node, root: Path) -> tuple[str | None, ...]:
    items = node.items(allow_empty=True)
    patches = [_relative_path(item, f"{PATCH_DIR}/") for item in items]
    for item, patch in zip(items, patches):
        if patch is not None and not _is_file(root / PATCH_DIR / patch):
            item.report(f"{PATCH_DIR}/{patch[:80]}{'...' if len(patch) > 80 else ''} does not exist")
    _distinct(items, patches)
    return tuple(patches)


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # a name too long for the file system, say: no such file either
        return False


def _python(node: Node) -> tuple[str | None, str | None, tuple[str | None, ...]]:
    python = node.mapping({"minimum", "maximum", "requirements"}, optional={"maximum"})
    minimum = python["minimum"].text(PYTHON_VERSION, "a Python version like 3.11")
    if minimum is not None and version_tuple(minimum) < ORT_PYTHON_FLOOR:
        python["minimum"].report(
            f"{minimum} is below ONNX Runtime's Python floor {'.'.join(map(str, ORT_PYTHON_FLOOR))}")
    maximum = python["maximum"].text(PYTHON_VERSION, "a Python version like 3.14") if "maximum" in python else None
    if minimum is not None and maximum is not None and version_tuple(maximum) < version_tuple(minimum):
        python["maximum"].report(f"{maximum} is below python.minimum {minimum}")
    requirements = tuple(item.text(r"[a-z0-9][a-z0-9._-]*( [<>=!~]\S*)?", "a conda package spec like numpy >=1.21")
                         for item in python["requirements"].items())
    return minimum, maximum, requirements


def _outputs(node: Node) -> tuple[Plugin, Output, Output]:
    outputs = node.mapping(set(OUTPUT_KEYS))
    plugin = outputs["plugin"].mapping({"name", "summary", "ep_name", "library"})
    library = plugin["library"].mapping({"unix", "win"})
    cpp = outputs["cpp"].mapping({"name", "summary"})
    python = outputs["python"].mapping({"name", "summary"})
    name_nodes = [plugin["name"], cpp["name"], python["name"]]
    names = [n.text(PACKAGE_NAME, "a conda package name") for n in name_nodes]
    _distinct(name_nodes, names)
    summaries = [fields["summary"].text(ONE_LINE, "a one-line summary") for fields in (plugin, cpp, python)]
    return (
        Plugin(
            name=names[0], summary=summaries[0],
            ep_name=plugin["ep_name"].text(r"[A-Za-z][A-Za-z0-9_]*", "an EP name like CUDAExecutionProvider"),
            library_unix=library["unix"].text(r"lib/[\w.-]+", "a path under lib/"),
            library_win=library["win"].text(r"Library/bin/[\w.-]+\.dll", "a DLL under Library/bin/"),
        ),
        Output(names[1], summaries[1]),
        Output(names[2], summaries[2]),
    )


def load_config(root: Path) -> Config:
    problems: list[Problem] = []
    top = Node(load_yaml(root / CONFIG, CONFIG, problems), CONFIG, "", problems)
    fields = top.mapping(set(TOP_KEYS))
    feedstock = fields["feedstock"].mapping({"name", "summary"})
    about = fields["about"].mapping({"homepage", "repository", "documentation"})
    source = fields["source"].mapping({"url", "patches"})
    cudnn = fields["cudnn"].mapping({"major", "as"})
    cuda = fields["cuda"].mapping({"nvcc_threads", "nvcc_gb_per_thread", "build_jobs", "versions"})
    platforms = _platforms(fields["platforms"], _build_platforms(root))
    maintainer_items = fields["maintainers"].items()
    maintainers = [item.text(r"[A-Za-z0-9][A-Za-z0-9-]*", "a GitHub handle") for item in maintainer_items]
    # GitHub handles are case-insensitive: two spellings are one person
    _distinct(maintainer_items, maintainers, ignore_case=True)
    python_minimum, python_maximum, python_requirements = _python(fields["python"])
    plugin, cpp, python_package = _outputs(fields["outputs"])
    config = Config(
        feedstock_name=feedstock["name"].text(PACKAGE_NAME, "a conda package name"),
        summary=feedstock["summary"].text(ONE_LINE, "a one-line summary"),
        homepage=about["homepage"].text(HTTPS_URL, "an https URL"),
        repository=about["repository"].text(HTTPS_URL, "an https URL"),
        documentation=about["documentation"].text(HTTPS_URL, "an https URL"),
        license=_license(fields["license"], {p.name for p in platforms}),
        maintainers=tuple(maintainers),
        source_url=_source_url(source["url"]),
        patches=_patches(source["patches"], root),
        min_core_version=fields["min_core_version"].text(VERSION, "a version like 1.24.4"),
        cudnn_major=cudnn["major"].text(r"\d+", "a major version like 9"),
        cudnn_as=cudnn["as"].choice(("run", "constraint")),
        python_minimum=python_minimum,
        python_maximum=python_maximum,
        python_requirements=python_requirements,
        plugin=plugin,
        cpp=cpp,
        python_package=python_package,
        platforms=platforms,
        cuda_versions=_cuda_versions(cuda["versions"], {p.name for p in platforms if p.cuda}),
        nvcc_threads=cuda["nvcc_threads"].integer(1, 64),
        nvcc_gb_per_thread=cuda["nvcc_gb_per_thread"].integer(1, 64),
        cuda_build_jobs=cuda["build_jobs"].integer(1, 256),
        runners=_runners(fields["runners"], platforms),
    )
    if problems:
        raise InputError.of(problems)
    return config


def load_bot_fields(root: Path) -> BotFields:
    """The bot-owned values from the committed recipe, which is where a release changes them."""
    if not (root / RECIPE).exists():
        raise InputError(RECIPE, "(file)", "not found; it holds context.version, source.sha256 and build.number, "
                                           "which a render keeps: restore it with `git checkout -- recipe/recipe.yaml`")
    problems: list[Problem] = []
    top = Node(load_yaml(root / RECIPE, RECIPE, problems), RECIPE, "", problems)
    version = top.child("context").child("version").text(VERSION, "a version like 1.30.0")
    sha256 = top.child("source").child("sha256").text(SHA256, "64 lowercase hex digits")
    number = top.child("build").child("number").integer(0, 10_000)
    if problems:
        raise InputError.of(problems)
    return BotFields(version, sha256, number)


def load(root: Path) -> tuple[Config, BotFields]:
    """The config and the bot's fields, with the problems of both files reported together."""
    problems: list[Problem] = []
    try:
        config = load_config(root)
    except InputError as exc:
        problems += exc.problems
    try:
        bot = load_bot_fields(root)
    except InputError as exc:
        problems += exc.problems
    if problems:
        raise InputError.of(problems)
    return config, bot
