"""Stage 1: read and validate the generator's inputs.

- `config/feedstock.yaml`: what the feedstock builds (the single source of truth);
- `recipe/recipe.yaml`: only `context.version`, `source.sha256` and `build.number`, which the
  autotick bot edits there and a re-render must keep.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .errors import InputError
from .reader import Node, load_yaml

CONFIG = "config/feedstock.yaml"
RECIPE = "recipe/recipe.yaml"

# conda subdirs conda-forge builds for; anything else in the config is a typo.
KNOWN_PLATFORMS = ("linux-64", "linux-aarch64", "linux-ppc64le", "osx-64", "osx-arm64", "win-64")
# ONNX Runtime's own Python floor (its setup.py and wheels); nothing older can be built.
ORT_PYTHON_FLOOR = (3, 11)

VERSION = r"\d+\.\d+\.\d+"
SHA256 = r"[0-9a-f]{64}"
CUDA_ARCH = r"\d{2,3}(-real|-virtual)?"
SPDX_ID = r"[A-Za-z0-9.+-]+"


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
    def cross_compiled(self) -> bool:
        return self.build_platform != self.name

    @property
    def os(self) -> str:
        return self.name.split("-")[0]


@dataclass(frozen=True)
class CudaVersion:
    version: str
    architectures: dict[str, tuple[str, ...]]  # by platform

    @property
    def tag(self) -> str:
        """`12.9` -> `cuda129`: the build-string part users select a CUDA variant by."""
        return "cuda" + self.version.replace(".", "")


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
    seed_version: str
    seed_sha256: str
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


@dataclass(frozen=True)
class BotFields:
    """What the autotick bot owns in `recipe/recipe.yaml`."""

    version: str
    sha256: str
    number: int


TOP_KEYS = ("feedstock", "about", "license", "maintainers", "source", "min_core_version", "cudnn", "python", "outputs",
            "platforms", "cuda", "runners")


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def _output(node: Node, extra: frozenset[str] = frozenset()) -> dict[str, Node]:
    return node.mapping({"name", "summary", *extra})


def _platforms(node: Node) -> tuple[Platform, ...]:
    platforms = []
    for name, entry in node.entries().items():
        if name not in KNOWN_PLATFORMS:
            raise entry.fail(f"unknown platform (known: {', '.join(KNOWN_PLATFORMS)})")
        optional = {"cuda", "build_platform", "macos_sdk"}
        fields = entry.mapping(optional, optional=optional) if entry.value is not None else {}
        build_platform = fields["build_platform"].text() if "build_platform" in fields else name
        if build_platform not in KNOWN_PLATFORMS:
            raise fields["build_platform"].fail(f"unknown platform {build_platform!r}")
        cuda = fields["cuda"].flag() if "cuda" in fields else True
        macos_sdk = None
        if "macos_sdk" in fields:
            if not name.startswith("osx-"):
                raise fields["macos_sdk"].fail("only macOS platforms have a macOS SDK")
            macos_sdk = fields["macos_sdk"].text(r"\d+\.\d+", "a macOS SDK version like 13.3")
        platforms.append(Platform(name, cuda, build_platform, macos_sdk))
    return tuple(platforms)


def _cuda_versions(node: Node, cuda_platforms: tuple[Platform, ...]) -> tuple[CudaVersion, ...]:
    versions = []
    for version, entry in node.entries().items():
        Node(version, entry.file, entry.key).text(r"\d+\.\d+", "a CUDA version like 12.9")
        arch_lists = entry.mapping({"architectures"})["architectures"]
        by_platform = arch_lists.entries()
        for platform in cuda_platforms:
            if platform.name not in by_platform:
                raise arch_lists.fail(f"no architecture list for CUDA platform {platform.name}")
        architectures = {}
        for platform_name, archs in by_platform.items():
            if platform_name not in {p.name for p in cuda_platforms}:
                raise archs.fail("not a CUDA platform of this feedstock")
            architectures[platform_name] = tuple(
                item.text(CUDA_ARCH, "a CUDA architecture like 80-real or 120") for item in archs.items()
            )
        versions.append(CudaVersion(version, architectures))
    return tuple(versions)


def _license(node: Node, platform_names: set[str]) -> License:
    fields = node.mapping({"spdx", "files", "vendored"})
    vendored = []
    for item in fields["vendored"].items():
        optional = {"file", "outputs", "platforms"}
        entry = item.mapping({"dep", "spdx", *optional}, optional=optional)
        outputs: tuple[str, ...] = OUTPUT_KEYS
        if "outputs" in entry:
            outputs = tuple(o.choice(OUTPUT_KEYS) for o in entry["outputs"].items())
        platforms = None
        if "platforms" in entry:
            platforms = tuple(p.text() for p in entry["platforms"].items())
            for name, p in zip(platforms, entry["platforms"].items()):
                if name not in platform_names:
                    raise p.fail(f"{name!r} is not one of this feedstock's platforms")
        vendored.append(Vendored(
            dep=entry["dep"].text(r"[\w-]+", "a dependency name"),
            spdx=entry["spdx"].text(SPDX_ID, "an SPDX licence identifier"),
            file=entry["file"].text(r"[\w./-]+", "a relative path") if "file" in entry else None,
            outputs=outputs,
            platforms=platforms,
        ))
    return License(
        spdx=fields["spdx"].text(SPDX_ID, "an SPDX licence identifier"),
        files=tuple(item.text() for item in fields["files"].items()),
        vendored=tuple(vendored),
    )


def _runners(node: Node, platforms: tuple[Platform, ...]) -> dict[str, str]:
    build_systems = {p.build_platform.split("-")[0] for p in platforms}
    runners = {}
    for system, label in node.entries().items():
        if system not in build_systems:
            raise label.fail(f"no platform of this feedstock builds on {system} (they build on "
                             f"{', '.join(sorted(build_systems))})")
        runners[system] = label.text(r"[\w.-]+", "a GitHub Actions runner label")
    return runners


def load_config(root: Path) -> Config:
    top = Node(load_yaml(root / CONFIG, CONFIG), CONFIG, "")
    fields = top.mapping(set(TOP_KEYS))
    about = fields["about"].mapping({"homepage", "repository", "documentation"})
    source = fields["source"].mapping({"url", "seed", "patches"})
    seed = source["seed"].mapping({"version", "sha256"})
    url = source["url"].text()
    if "{version}" not in url:
        raise source["url"].fail("must contain {version}, where the recipe puts ${{ version }}")
    cudnn = fields["cudnn"].mapping({"major", "as"})
    python = fields["python"].mapping({"minimum", "maximum", "requirements"}, optional={"maximum"})
    python_minimum = python["minimum"].text(r"3\.\d+", "a Python version like 3.11")
    if _version_tuple(python_minimum) < ORT_PYTHON_FLOOR:
        raise python["minimum"].fail(
            f"{python_minimum} is below ONNX Runtime's Python floor {'.'.join(map(str, ORT_PYTHON_FLOOR))}"
        )
    python_maximum = python["maximum"].text(r"3\.\d+", "a Python version like 3.14") if "maximum" in python else None
    outputs = fields["outputs"].mapping(set(OUTPUT_KEYS))
    plugin = _output(outputs["plugin"], frozenset({"ep_name", "library"}))
    library = plugin["library"].mapping({"unix", "win"})
    platforms = _platforms(fields["platforms"])
    cuda_keys = {"nvcc_threads", "nvcc_gb_per_thread", "build_jobs", "versions"}
    cuda = fields["cuda"].mapping(cuda_keys)
    cuda_platforms = tuple(p for p in platforms if p.cuda)
    feedstock = fields["feedstock"].mapping({"name", "summary"})
    return Config(
        feedstock_name=feedstock["name"].text(r"[a-z0-9][a-z0-9._-]*", "a conda package name"),
        summary=feedstock["summary"].text(),
        homepage=about["homepage"].text(r"https://\S+", "an https URL"),
        repository=about["repository"].text(r"https://\S+", "an https URL"),
        documentation=about["documentation"].text(r"https://\S+", "an https URL"),
        license=_license(fields["license"], {p.name for p in platforms}),
        maintainers=tuple(item.text(r"[A-Za-z0-9][A-Za-z0-9-]*", "a GitHub handle") for item in fields["maintainers"].items()),
        source_url=url,
        seed_version=seed["version"].text(VERSION, "a version like 1.30.0"),
        seed_sha256=seed["sha256"].text(SHA256, "64 lowercase hex digits"),
        patches=tuple(item.text(r"[\w./-]+\.patch", "a patch file name") for item in source["patches"].items(allow_empty=True)),
        min_core_version=fields["min_core_version"].text(VERSION, "a version like 1.24.4"),
        cudnn_major=cudnn["major"].text(r"\d+", "a major version like 9"),
        cudnn_as=cudnn["as"].choice(("run", "constraint")),
        python_minimum=python_minimum,
        python_maximum=python_maximum,
        python_requirements=tuple(
            item.text(r"[a-z0-9][a-z0-9._-]*( [<>=!~]\S*)?", "a conda package spec like numpy >=1.21")
            for item in python["requirements"].items()
        ),
        plugin=Plugin(
            name=plugin["name"].text(), summary=plugin["summary"].text(), ep_name=plugin["ep_name"].text(),
            library_unix=library["unix"].text(r"lib/[\w.-]+", "a path under lib/"),
            library_win=library["win"].text(r"Library/bin/[\w.-]+\.dll", "a DLL under Library/bin/"),
        ),
        cpp=Output(**{k: v.text() for k, v in _output(outputs["cpp"]).items()}),
        python_package=Output(**{k: v.text() for k, v in _output(outputs["python"]).items()}),
        platforms=platforms,
        cuda_versions=_cuda_versions(cuda["versions"], cuda_platforms),
        nvcc_threads=cuda["nvcc_threads"].integer(1, 64),
        nvcc_gb_per_thread=cuda["nvcc_gb_per_thread"].integer(1, 64),
        cuda_build_jobs=cuda["build_jobs"].integer(1, 256),
        runners=_runners(fields["runners"], platforms),
    )


def load_bot_fields(root: Path, config: Config) -> BotFields:
    """The bot-owned values from the committed recipe, or the config's seed for a first render."""
    path = root / RECIPE
    if not path.exists():
        return BotFields(config.seed_version, config.seed_sha256, 0)
    top = Node(load_yaml(path, RECIPE), RECIPE, "")
    if not isinstance(top.value, dict):
        raise top.fail("expected a mapping")
    try:
        version = Node(top.value["context"]["version"], RECIPE, "context.version")
        sha256 = Node(top.value["source"]["sha256"], RECIPE, "source.sha256")
        number = Node(top.value["build"]["number"], RECIPE, "build.number")
    except (KeyError, TypeError) as exc:
        raise InputError(RECIPE, str(exc).strip("'"), "missing; restore it or delete the file to re-seed") from None
    return BotFields(
        version=version.text(VERSION, "a version like 1.30.0"),
        sha256=sha256.text(SHA256, "64 lowercase hex digits"),
        number=number.integer(0, 10_000),
    )
