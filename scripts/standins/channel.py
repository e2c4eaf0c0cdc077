"""A local conda channel of stand-ins for the conda-forge packages the recipe resolves to.

Each entry of standins.yaml with a `conda` key becomes one package per version the linux-64 jobs of
`.ci_support/` ask for, with the name, version, build string, dependencies, constraints, run_exports
and activation variables of conda-forge's real package (the key says where each fact comes from). It
is built by rattler-build itself, from a small recipe made from the entry.

What goes in a package decides what the channel can do:
- no contents (`build_channel(chosen, channel)`): the packages carry their metadata alone. Enough for
  rattler-build's solver to resolve every job's requirements, which is what CI checks on every commit
  (scripts/resolve.py, tests/test_resolve.py);
- the GPU machine's own files (`build_channel(chosen, channel, roots)`: the entries' `machine` files and
  `conda` keys `files`, `links` and `activation`): the machine's CUDA toolkit, cuDNN, compilers and
  Python, laid out where conda's packages put them, so that rattler-build can build the plugin from
  the recipe and a solver can install it (scripts/device/package.py).

These packages stand in for conda-forge's so that the recipe can be proven without conda-forge's
channel. A package built against them is a rehearsal, never a conda-forge build.
"""

from __future__ import annotations

import fnmatch
import glob
import itertools
import json
import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from feedstock.ci_support import NO_CUDA
from feedstock.reader import load_yaml
from standins import StandinError
from standins.downloads import BUILD_PLATFORM, PLATFORMS

STANDINS = Path(__file__).with_name("standins.yaml")


def load_standins() -> dict:
    return load_yaml(STANDINS, str(STANDINS))


class _Kept(dict):
    """Format values that leave a key they do not have as it is, for a second filling."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


@dataclass(frozen=True)
class Standin:
    name: str
    version: str
    build: str
    depends: tuple[str, ...] = ()
    constrains: tuple[str, ...] = ()
    run_exports: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (weak|strong, specs)
    noarch: str | None = None
    activation: tuple[tuple[str, str], ...] = ()  # (variable, value): what its activation script exports
    activation_append: tuple[tuple[str, str], ...] = ()  # (variable, value): appended to what is there
    activation_script: str = ""  # its name in etc/conda/activate.d, which orders it among the others
    files: tuple[tuple[str, str], ...] = field(default=(), compare=False)  # (path, text) it holds with contents
    links: tuple[tuple[str, str], ...] = field(default=(), compare=False)  # (path, target) of its symbolic links
    # what the package holds on the GPU machine: (path in the package, globs or one file, is_folder)
    machine: tuple[tuple[str, tuple[str, ...], bool], ...] = field(default=(), compare=False)
    note: str = field(default="", compare=False)  # how it differs from conda-forge's (the entry's `note`)
    platform: str = BUILD_PLATFORM  # its subdir, unless it is noarch

    @property
    def filename(self) -> str:
        return f"{self.name}-{self.version}-{self.build}.conda"

    @property
    def subdir(self) -> str:
        return "noarch" if self.noarch else self.platform


def _variant_values(job_file: Path, overrides: dict[str, str]) -> list[dict[str, str]]:
    """Every combination of a job file's values (its zip_keys vary together), with the derived keys."""
    lists = load_yaml(job_file, str(job_file)) | {k: [v] for k, v in overrides.items()}
    zipped = [keys for keys in lists.get("zip_keys", []) if all(k in lists for k in keys)]
    axes: list[list[dict[str, str]]] = []
    in_zip = {k for keys in zipped for k in keys}
    for keys in zipped:
        # not strict: an override is one value, while the keys zipped with it keep their lists
        axes.append([dict(zip(keys, map(str, values), strict=True))
                     for values in zip(*(lists[k] for k in keys), strict=False)])
    for key, values in lists.items():
        if key not in in_zip and isinstance(values, list) and values and not isinstance(values[0], (list, dict)):
            axes.append([{key: str(v)} for v in values])
    combinations = []
    for parts in itertools.product(*axes):
        values = {k: v for part in parts for k, v in part.items()}
        if values.get("cuda_compiler_version", NO_CUDA) != NO_CUDA:
            major, minor = values["cuda_compiler_version"].split(".")[:2]
            values |= {"cuda_major": major, "cuda_next_major": str(int(major) + 1),
                       "cuda_next_minor": f"{major}.{int(minor) + 1}.0a0"}
        if "cudnn" in values:
            values["cudnn_next_major"] = f"{int(values['cudnn']) + 1}.0a0"
        if "python" in values:
            version, _, build = values["python"].partition(" ")
            values["python_version"] = version.removesuffix(".*")
            values["python_nodot"] = values["python_version"].replace(".", "")
            values["python_tag"] = build.removeprefix("*_")  # cpython, cp313, cp314t
            values["python_abi_tag"] = ("cp" + values["python_nodot"]
                                        + ("t" if values["python_tag"].endswith("t") else ""))
            # conda-forge adds 100 to the build number of 3.13 and later's GIL builds
            values["python_build_number"] = "0" if values["python_tag"] == "cpython" else "100"
        combinations.append(values)
    return combinations


def _fill(template: str, values: dict[str, str], where: str) -> str | None:
    """The template with the job's values put in; None when it names a key the job lacks (or a CPU job's CUDA)."""
    try:
        filled = template.format(**values)
    except KeyError:
        return None
    if NO_CUDA in filled and "{cuda_compiler_version}" in template:
        return None
    if "{" in filled:
        raise StandinError(f"{STANDINS}: {where}: `{template}` is left with a brace after filling in")
    return filled


def standins(job_files: list[Path], extra: dict[str, str], overrides: dict[str, str] | None = None,
             platform: str = BUILD_PLATFORM, subdir: str | None = None) -> list[Standin]:
    """One Standin per table entry and version that these jobs (`.ci_support` files) ask for, with files
    for the platform (its {cuda_target}), in the platform's subdir or `subdir`; `extra` adds values the
    job files do not hold (the cores' versions), `overrides` replaces the job files' own values (the GPU
    machine's CUDA and Python). A package for another platform than linux-64 has the platform in its
    build string: rattler's package cache tells packages apart by name, version and build string alone."""
    table = load_standins()
    found: dict[tuple[str, str, str], Standin] = {}
    suffix = "" if platform == BUILD_PLATFORM else "_" + platform.replace("-", "_")
    for job_file in job_files:
        for values in _variant_values(job_file, overrides or {}):
            values |= extra | {"cuda_target": PLATFORMS[platform].cuda_target}
            for name, entry in table.items():
                # a compiler for one platform (gcc_linux-aarch64, ...) is made for that platform's jobs alone
                only_for = name.rpartition("_")[2]
                if only_for in PLATFORMS and only_for != values.get("target_platform"):
                    continue
                facts = entry.get("conda")
                if facts is None:
                    continue
                where = f"{name}.conda"
                for version_template in facts.get("versions", [facts.get("version")]):
                    version = _fill(str(version_template), values, f"{where}.version")
                    build = _fill(str(facts.get("build", "0")), values, f"{where}.build")
                    if version is None or build is None:
                        continue
                    build += "" if facts.get("noarch") else suffix
                    local = values | {"version": version}

                    def each(key: str, of: dict = facts, local: dict = local, where: str = where) -> tuple[str, ...]:
                        return tuple(s for t in of.get(key, []) if (s := _fill(str(t), local, f"{where}.{key}")))

                    exports = facts.get("run_exports", {})
                    activation = facts.get("activation", {})
                    standin = Standin(
                        name, version, build, each("depends"), each("constrains"),
                        tuple((kind, each(kind, exports)) for kind in ("weak", "strong") if exports.get(kind)),
                        facts.get("noarch"),
                        tuple((k, str(v)) for k, v in activation.get("env", {}).items()),
                        tuple((k, str(v)) for k, v in activation.get("env_append", {}).items()),
                        activation.get("script", f"{name}_activate.sh"),
                        tuple(table[facts.get("files_of", name)].get("files", {}).items()),
                        tuple((str(k).format_map(_Kept(local)), str(v).format_map(_Kept(local)))
                              for k, v in facts.get("links", {}).items()),
                        tuple((path, (files,) if isinstance(files, str) else tuple(files), not isinstance(files, str))
                              for path, files in (
                                  (str(p).format_map(_Kept(local)), [str(f).format_map(_Kept(local)) for f in fs]
                                   if isinstance(fs, list) else str(fs).format_map(_Kept(local)))
                                  for p, fs in entry.get("machine", {}).items())),
                        str(entry.get("note", "")),
                        subdir or platform,
                    )
                    key = (standin.name, standin.version, standin.build)
                    if key in found and found[key] != standin:
                        raise StandinError(f"{STANDINS}: {where}: two jobs give {name} {version} {build} "
                                           "different facts")
                    found[key] = standin
    return sorted(found.values(), key=lambda s: (s.name, s.version, s.build))


def _activation_script(standin: Standin) -> str:
    """What the package's etc/conda/activate.d script exports: {PREFIX} and {BUILD_PREFIX} are the
    environments' own, as in conda-forge's activation scripts."""

    def shell(value: str) -> str:
        return value.replace("{PREFIX}", "${PREFIX}").replace("{BUILD_PREFIX}", "${BUILD_PREFIX}").replace('"', '\\"')

    lines = [f"# {standin.name} {standin.version}: the variables conda-forge's package exports"]
    lines += [f'export {k}="{shell(v)}"' for k, v in standin.activation]
    lines += [f'export {k}="${{{k}:-}} {shell(v)}"' for k, v in standin.activation_append]
    return "\n".join(lines) + "\n"


def _recipe(standin: Standin, staged: Path) -> dict:
    script = [f'cp -a "{staged}/." "${{PREFIX}}/"'] if any(staged.iterdir()) else ["true"]
    requirements: dict = {}
    if standin.depends:
        requirements["run"] = list(standin.depends)
    if standin.constrains:
        requirements["run_constraints"] = list(standin.constrains)
    if standin.run_exports:
        requirements["run_exports"] = {kind: list(specs) for kind, specs in standin.run_exports}
    build: dict = {"number": 0, "string": standin.build, "script": script,
                   # its files are the machine's, laid out as they are: no relocation, no linking checks
                   "dynamic_linking": {"binary_relocation": False}, "prefix_detection": {"ignore": True}}
    if standin.noarch:
        build["noarch"] = standin.noarch
    return {
        "package": {"name": standin.name, "version": standin.version},
        "build": build,
        "requirements": requirements,
        "about": {"summary": f"stand-in for conda-forge's {standin.name} ({STANDINS.name})",
                  "description": standin.note},
    }


Roots = dict[str, str]


def lay_out_contents(standin: Standin, staged: Path, roots: Roots) -> None:
    """A stand-in's files on this machine: its `machine` files (each folder of the package gets what its
    globs match but the names its `!` patterns match, with {toolkit}, {site}, {wheels} ... filled from
    `roots`, in its folders too; symbolic links are kept as links,
    wheels are unpacked), its `files` and `links`, and its activation script."""
    for inside, text in standin.files:
        (staged / inside).parent.mkdir(parents=True, exist_ok=True)
        (staged / inside).write_text(text)
    for inside, target in standin.links:
        (staged / inside).parent.mkdir(parents=True, exist_ok=True)
        (staged / inside).symlink_to(target.format_map(_Kept(roots)))
    if standin.activation or standin.activation_append:
        activate = staged / "etc" / "conda" / "activate.d"
        activate.mkdir(parents=True, exist_ok=True)
        (activate / standin.activation_script).write_text(_activation_script(standin))
    for path, patterns, is_folder in standin.machine:
        destination = staged / path.format_map(_Kept(roots))
        (destination if is_folder else destination.parent).mkdir(parents=True, exist_ok=True)
        left_out = [pattern[1:] for pattern in patterns if pattern.startswith("!")]
        for pattern in (pattern for pattern in patterns if not pattern.startswith("!")):
            matches = sorted(glob.glob(pattern.format_map(_Kept(roots))))
            if not matches:
                raise StandinError(f"{STANDINS}: {standin.name}.machine: `{pattern}` matches nothing on this machine")
            for match in (m for m in map(Path, matches) if not any(fnmatch.fnmatch(m.name, n) for n in left_out)):
                target = destination / match.name if is_folder else destination
                if match.suffix == ".whl":
                    with zipfile.ZipFile(match) as wheel:
                        wheel.extractall(destination)
                elif match.is_symlink():
                    target.symlink_to(os.readlink(match))
                elif match.is_dir():
                    shutil.copytree(match, target, symlinks=True, dirs_exist_ok=True)
                else:
                    shutil.copy2(match, target)


def build_channel(chosen: list[Standin], channel: Path, roots: Roots | None = None,
                  package_format: str = "conda:1") -> list[Path]:
    """Each stand-in built by rattler-build into `channel` (indexed as it goes); a package already
    there is kept. Returns the packages' paths."""
    from rattler_build import PlatformConfig, RenderConfig, Stage0Recipe, ToolConfiguration, VariantConfig

    built = []
    for standin in chosen:
        path = channel / standin.subdir / standin.filename
        if not path.exists():
            with tempfile.TemporaryDirectory(prefix=f"standin-{standin.name}-") as scratch:
                staged = Path(scratch, "files")
                staged.mkdir()
                if roots is not None:
                    lay_out_contents(standin, staged, roots)
                recipe_dir = Path(scratch, "recipe")
                recipe_dir.mkdir()
                (recipe_dir / "recipe.yaml").write_text(json.dumps(_recipe(standin, staged)))
                platform = RenderConfig(platform=PlatformConfig(target_platform=standin.platform))
                (variant,) = Stage0Recipe.from_file(recipe_dir / "recipe.yaml").render(VariantConfig(), platform)
                # the stand-ins are Linux's: a noarch one may hold symbolic links
                variant.run_build(tool_config=ToolConfiguration(allow_symlinks_on_windows=True),
                                  output_dir=channel, channels=[channel.as_uri()], no_build_id=True,
                                  package_format=package_format, no_include_recipe=True)
                shutil.rmtree(channel / "bld", ignore_errors=True)
            if not path.exists():
                raise StandinError(f"rattler-build left no {path} for {standin.name}")
        built.append(path)
    return built
