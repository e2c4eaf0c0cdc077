"""BUILD_PREFIX and PREFIX holding exactly what the evaluated recipe asks for, from stand-ins.

standins.yaml says which real PyPI or Debian package stands in for each conda package. Downloads
are kept in the cache folder, so a second rehearsal on the same machine fetches nothing. BUILD_PREFIX
holds the build machine's packages (linux-64, this machine) and PREFIX the target platform's, as
conda-forge lays them out when it cross-compiles (conda-forge.yml's build_platform).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import venv
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from bootstrap import PipFailed, cache_lock, cached_venv, pip_install
from feedstock.architectures import NVCC_RELEASES
from feedstock.reader import load_yaml
from rehearsal import RehearsalError

STANDINS = Path(__file__).with_name("standins.yaml")
DEBIAN_MIRROR = "http://deb.debian.org/debian"
DEBIAN_SUITE = "bookworm"


@dataclass(frozen=True)
class Platform:
    """What a stand-in's files are laid out by, for one conda platform."""

    cuda_target: str  # conda's CUDA packages put a platform's headers and libraries in targets/<this>
    triplet: str  # Debian's multiarch folder (usr/lib/<this>)
    debian_arch: str
    machine: str  # how a wheel's platform tag ends
    # pip's --platform values for its wheels; none: this machine's own. conda-forge's CUDA 13 jobs build
    # against glibc 2.28 (c_stdlib_version), so a target's wheels may need up to manylinux_2_28; each older
    # tag is named too, as this machine's pip takes a wheel of exactly the tags given
    wheel_platforms: tuple[str, ...]


PLATFORMS = {
    "linux-64": Platform("x86_64-linux", "x86_64-linux-gnu", "amd64", "x86_64", ()),
    "linux-aarch64": Platform("sbsa-linux", "aarch64-linux-gnu", "arm64", "aarch64",
                              tuple(f"manylinux_2_{glibc}_aarch64" for glibc in range(28, 16, -1))),
}
BUILD_PLATFORM = "linux-64"
# wheels of headers alone, the same on every platform: the build machine's serves every target (the
# package index this machine reaches has no aarch64 wheel of CCCL 13.2)
HEADER_ONLY_WHEELS = {"nvidia-cuda-cccl"}


@dataclass
class Prefixes:
    build: Path
    host: Path
    env: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    laid_out: dict[str, list[str]] = field(default_factory=dict)  # section -> conda names
    cmake_args: list[str] = field(default_factory=list)  # what the compilers' activation adds to CMAKE_ARGS


def package_name(spec: str) -> str:
    return spec.split()[0]


def load_standins() -> dict:
    return load_yaml(STANDINS, str(STANDINS))


def _run(command: list[str], **kwargs) -> None:
    subprocess.run(command, check=True, stdin=subprocess.DEVNULL, **kwargs)


def _pip_download(requirements: list[str], cache: Path, platform: Platform) -> list[Path]:
    folder = cache / "wheels"
    folder.mkdir(parents=True, exist_ok=True)
    wheels = []
    build_machine = platform
    for requirement in requirements:
        name, _, version = requirement.partition("==")
        stem = f"{name.replace('-', '_')}-{version}-"
        platform = PLATFORMS[BUILD_PLATFORM] if name in HEADER_ONLY_WHEELS else build_machine

        def matching() -> list[Path]:
            return [w for w in folder.glob("*.whl") if w.name.startswith(stem)
                    and (w.name.endswith(f"_{platform.machine}.whl") or w.name.endswith("-any.whl"))]

        found = matching()
        if not found:
            wanted = [argument for tag in platform.wheel_platforms for argument in ("--platform", tag)]
            _run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                  "--no-deps", "--only-binary=:all:", *wanted, "-d", str(folder), requirement])
            found = matching()
        if not found:
            raise RehearsalError(f"pip download {requirement} left no {platform.machine} wheel in {folder}")
        wheels.append(found[0])
    return wheels


def _unpacked_wheel(wheel: Path, cache: Path) -> Path:
    target = cache / "unpacked" / wheel.stem
    if not target.is_dir():
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(partial)
        # zipfile drops the executable bit that nvcc, ptxas, cicc and the libraries need
        for member in partial.rglob("*"):
            if member.is_file() and ("/bin/" in str(member) or member.suffix == "" or ".so" in member.name):
                member.chmod(0o755)
        partial.rename(target)
    return target


def _apt_root(cache: Path, suite_component: str, arch: str) -> Path:
    # this machine's architecture keeps the folder it always had
    return cache / "apt" / (suite_component if arch == PLATFORMS[BUILD_PLATFORM].debian_arch else f"{suite_component}-{arch}")


def _apt_options(cache: Path, suite_component: str, arch: str) -> list[str]:
    """apt-get reading only the Debian component and architecture asked for, with its lists kept in the cache."""
    root = _apt_root(cache, suite_component, arch)
    (root / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    (root / "archives" / "partial").mkdir(parents=True, exist_ok=True)
    sources = root / "sources.list"
    sources.write_text(f"deb {DEBIAN_MIRROR} {DEBIAN_SUITE} {suite_component}\n")
    return ["-o", f"Dir::Etc::SourceList={sources}", "-o", "Dir::Etc::SourceParts=/dev/null",
            "-o", f"Dir::State::Lists={root / 'lists'}", "-o", f"Dir::Cache={root}",
            "-o", "APT::Get::List-Cleanup=0", "-o", f"APT::Architecture={arch}", "-o", f"APT::Architectures={arch}"]


def _debian_unpacked(packages: list[str], component: str, cache: Path, arch: str) -> list[Path]:
    folder = cache / "debs" / component
    folder.mkdir(parents=True, exist_ok=True)
    options = _apt_options(cache, component, arch)

    def debs(package: str) -> list[Path]:
        return sorted([*folder.glob(f"{package}_*_{arch}.deb"), *folder.glob(f"{package}_*_all.deb")])

    missing = [p for p in packages if not debs(p)]
    if missing:
        if not any((_apt_root(cache, component, arch) / "lists").glob("*Packages*")):
            _run(["apt-get", *options, "update"], stdout=subprocess.DEVNULL)
        _run(["apt-get", *options, "download", *missing], cwd=folder, stdout=subprocess.DEVNULL)
    unpacked = []
    for package in packages:
        deb = debs(package)[-1]
        target = cache / "unpacked" / deb.stem
        if not target.is_dir():
            partial = target.with_name(target.name + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir(parents=True)
            _run(["dpkg", "-x", str(deb), str(partial)])
            partial.rename(target)
        unpacked.append(target)
    return unpacked


def _copy_layout(sources: list[Path], layout: dict[str, list[str]], prefix: Path, dev_links: bool) -> None:
    for source in sources:
        for inside, destinations in layout.items():
            folder = source / inside
            if not folder.is_dir():
                continue
            for destination in destinations:
                shutil.copytree(folder, prefix / destination, symlinks=True, dirs_exist_ok=True)
                if dev_links:
                    for library in (prefix / destination).glob("lib*.so.*"):
                        link = library.parent / (library.name.split(".so")[0] + ".so")
                        if not link.exists():
                            link.symlink_to(library.name)


def _pip_install(python: Path, requirements: list[str]) -> None:
    try:
        pip_install(python, requirements, naming=" ".join(requirements))
    except PipFailed as failure:
        raise RehearsalError(f"{STANDINS}: {failure}") from None


def _tool_env(packages: list[str], specs: dict[str, str], cache: Path) -> Path:
    requirements = sorted(f"{p}{specs[p]}" for p in packages)
    digest = hashlib.sha256("\n".join(requirements).encode()).hexdigest()[:12]
    env = cache / f"tools-{digest}"
    cached_venv(env, digest, lambda python: _pip_install(python, requirements))
    return env


def tool_python(packages: list[str], cache: Path) -> Path:
    """The interpreter of a cached environment holding these PyPI packages (their newest)."""
    return _tool_env(packages, {p: "" for p in packages}, cache) / "bin" / "python"


def _pip_spec(spec: str) -> str:
    """`cmake >=3.28,<4` -> `>=3.28,<4`; conda's `3.21.*` -> `==3.21.*`."""
    parts = spec.split()
    if len(parts) < 2:
        return ""
    version = parts[1]
    return version if version[0] in "<>=!~" else f"=={version}"


def _wrap_in_place(prefix: Path, program: str, library_folder: Path) -> None:
    """A program that finds its libraries in the system's folders only (Debian's) made to find them where
    the stand-in put them, as conda's packages find theirs by rpath."""
    path = prefix / program
    real = path.with_name(path.name + ".real")
    path.rename(real)
    path.write_text(f'#!/bin/sh\nLD_LIBRARY_PATH="{library_folder}" exec "{real}" "$@"\n')
    path.chmod(0o755)


def _add_program(prefix: Path, program: str, runs: list[str]) -> None:
    """prefix/program running another program of the prefix, with the arguments conda's build of it has built in."""
    path, target = prefix / program, runs[0]
    path.parent.mkdir(parents=True, exist_ok=True)
    if len(runs) == 1:
        path.symlink_to(prefix / target)
        return
    path.write_text(f'#!/bin/sh\nexec "{prefix / target}" {" ".join(runs[1:])} "$@"\n')
    path.chmod(0o755)


def _lay_out_entry(name: str, entry: dict, table: dict, prefix: Path, prefixes: Prefixes, cuda: str | None,
                   platform: Platform, target: Platform, cache: Path) -> None:
    """One stand-in's files, programs and activation; `platform` is what the prefix holds (the build
    machine's or the target's), `target` the platform the build is for."""
    def placed(text: str, files_of: Platform) -> str:
        """Folders and values with the platform's folder names and the prefixes filled in."""
        return text.format(cuda_target=files_of.cuda_target, triplet=files_of.triplet, prefix=prefix,
                           PREFIX=prefixes.host, BUILD_PREFIX=prefixes.build)

    def layout(of: dict[str, str | list[str]], files_of: Platform) -> dict[str, list[str]]:
        return {placed(inside, files_of): [placed(d, files_of) for d in ([to] if isinstance(to, str) else to)]
                for inside, to in of.items()}

    if entry.get("note"):
        prefixes.notes.append(f"{name}: {entry['note']}")
    def wheels(key: str) -> list[str]:
        wheels_by_cuda = table[entry[f"{key}_of"]]["pypi"] if f"{key}_of" in entry else entry["pypi"]
        wanted = wheels_by_cuda.get("any") or wheels_by_cuda.get(cuda or "")
        if wanted is None:
            raise RehearsalError(f"{STANDINS}: `{name}` has no wheels for CUDA {cuda}")
        return [w.format(nvcc=NVCC_RELEASES[cuda]) if "{nvcc}" in w else w for w in wanted]

    if "pypi" in entry or "wheels_of" in entry:
        layouts = [(platform, entry["layout"], wheels("wheels"))]
        if "target_layout" in entry:
            layouts.append((target, entry["target_layout"], wheels("target_wheels")))
        for files_of, of, wanted in layouts:
            unpacked = [_unpacked_wheel(w, cache) for w in _pip_download(wanted, cache, files_of)]
            _copy_layout(unpacked, layout(of, files_of), prefix, entry.get("dev_links", False))
    if "debian" in entry:
        unpacked = _debian_unpacked(entry["debian"], entry.get("suite", "main"), cache, platform.debian_arch)
        _copy_layout(unpacked, layout(entry["layout"], platform), prefix, entry.get("dev_links", False))
    for path, text in entry.get("files", {}).items():
        (prefix / path).parent.mkdir(parents=True, exist_ok=True)
        (prefix / path).unlink(missing_ok=True)
        (prefix / path).write_text(text)
    for folder, programs in entry.get("library_path", {}).items():
        for program in programs:
            _wrap_in_place(prefix, placed(program, platform), prefix / placed(folder, platform))
    for program, runs in entry.get("programs", {}).items():
        _add_program(prefix, placed(program, platform), [placed(word, target) for word in runs])
    activation = entry.get("conda", {}).get("activation", {}).get("env", {})
    prefixes.env.update({k: placed(str(activation[k]), target) for k in entry.get("activation_env", [])})
    prefixes.env.update({k: placed(str(v), target) for k, v in entry.get("env", {}).items()})
    for variable, value in entry.get("env_append", {}).items():
        prefixes.env[variable] = f"{prefixes.env.get(variable, '')} {placed(value, target)}".strip()
    prefixes.cmake_args += [placed(arg, target) for arg in entry.get("cmake_args", [])]


def lay_out(requirements: dict[str, list[str]], cuda: str | None, workdir: Path, cache: Path,
            target_platform: str = BUILD_PLATFORM) -> Prefixes:
    """Fill BUILD_PREFIX (the build machine's, linux-64) and PREFIX (target_platform's) in workdir with the
    stand-ins of the recipe's build and host lists."""
    # one rehearsal at a time downloads and unpacks into the shared cache
    with cache_lock(cache):
        return _lay_out(requirements, cuda, workdir, cache, target_platform)


def _lay_out(requirements: dict[str, list[str]], cuda: str | None, workdir: Path, cache: Path,
             target_platform: str) -> Prefixes:
    table = load_standins()
    if target_platform not in PLATFORMS:
        raise RehearsalError(f"no stand-ins are laid out for {target_platform}: {', '.join(PLATFORMS)} only")
    target = PLATFORMS[target_platform]
    prefixes = Prefixes(build=workdir / "build_prefix", host=workdir / "prefix")
    for folder in (prefixes.build, prefixes.host):
        shutil.rmtree(folder, ignore_errors=True)
    (prefixes.build / "bin").mkdir(parents=True)
    host_specs = requirements.get("host", [])
    if any(package_name(s) == "python" and table["python"].get("host_venv") for s in host_specs):
        venv.EnvBuilder(with_pip=True, symlinks=True).create(prefixes.host)
    else:
        prefixes.host.mkdir(parents=True)
    for section, prefix, platform in (("build", prefixes.build, PLATFORMS[BUILD_PLATFORM]),
                                      ("host", prefixes.host, target)):
        tools: list[str] = []
        tool_specs: dict[str, str] = {}
        venv_packages: list[str] = []
        for spec in requirements.get(section, []):
            name = package_name(spec)
            entry = table.get(name)
            if entry is None:
                raise RehearsalError(f"{STANDINS}: no stand-in for `{name}` (asked for in {section}: `{spec}`)")
            prefixes.laid_out.setdefault(section, []).append(name)
            for program in entry.get("system", []):
                if section == "host" and entry.get("host_venv"):
                    break
                found = shutil.which(program)
                if found is None:
                    raise RehearsalError(f"{STANDINS}: `{name}` stands in as this machine's `{program}`, which is not installed")
                (prefix / "bin" / program).symlink_to(found)
            for tool in entry.get("tools", []):
                tools.append(tool)
                tool_specs[tool] = _pip_spec(spec)
            venv_packages += entry.get("venv", [])
            _lay_out_entry(name, entry, table, prefix, prefixes, cuda, platform, target, cache)
        if tools:
            env = _tool_env(tools, tool_specs, cache)
            for tool in tools:
                (prefix / "bin" / tool).symlink_to(env / "bin" / tool)
        if venv_packages:
            _pip_install(prefixes.host / "bin" / "python", venv_packages)
    return prefixes
