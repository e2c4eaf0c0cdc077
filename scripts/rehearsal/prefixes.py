"""BUILD_PREFIX and PREFIX holding exactly what the evaluated recipe asks for, from stand-ins.

standins.yaml says which real PyPI or Debian package stands in for each conda package. Downloads
are kept in the cache folder, so a second rehearsal on the same machine fetches nothing.
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

from bootstrap import PipFailed, cached_venv, pip_install
from feedstock.reader import load_yaml

STANDINS = Path(__file__).with_name("standins.yaml")
DEBIAN_MIRROR = "http://deb.debian.org/debian"
DEBIAN_SUITE = "bookworm"


class RehearsalError(Exception):
    """A problem with the rehearsal's inputs, said in one line."""


@dataclass
class Prefixes:
    build: Path
    host: Path
    env: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    laid_out: dict[str, list[str]] = field(default_factory=dict)  # section -> conda names


def package_name(spec: str) -> str:
    return spec.split()[0]


def load_standins() -> dict:
    return load_yaml(STANDINS, str(STANDINS))


def _run(command: list[str], **kwargs) -> None:
    subprocess.run(command, check=True, stdin=subprocess.DEVNULL, **kwargs)


def _pip_download(requirements: list[str], cache: Path) -> list[Path]:
    folder = cache / "wheels"
    folder.mkdir(parents=True, exist_ok=True)
    wheels = []
    for requirement in requirements:
        name, _, version = requirement.partition("==")
        stem = f"{name.replace('-', '_')}-{version}-"
        found = [w for w in folder.glob("*.whl") if w.name.startswith(stem)]
        if not found:
            _run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                  "--no-deps", "--only-binary=:all:", "-d", str(folder), requirement])
            found = [w for w in folder.glob("*.whl") if w.name.startswith(stem)]
        if not found:
            raise RehearsalError(f"pip download {requirement} left no wheel in {folder}")
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


def _apt_options(cache: Path, suite_component: str) -> list[str]:
    """apt-get reading only the Debian component asked for, with its lists kept in the cache."""
    root = cache / "apt" / suite_component
    (root / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    (root / "archives" / "partial").mkdir(parents=True, exist_ok=True)
    sources = root / "sources.list"
    sources.write_text(f"deb {DEBIAN_MIRROR} {DEBIAN_SUITE} {suite_component}\n")
    return ["-o", f"Dir::Etc::SourceList={sources}", "-o", "Dir::Etc::SourceParts=/dev/null",
            "-o", f"Dir::State::Lists={root / 'lists'}", "-o", f"Dir::Cache={root}",
            "-o", "APT::Get::List-Cleanup=0"]


def _debian_unpacked(packages: list[str], component: str, cache: Path) -> list[Path]:
    folder = cache / "debs" / component
    folder.mkdir(parents=True, exist_ok=True)
    options = _apt_options(cache, component)
    missing = [p for p in packages if not list(folder.glob(f"{p}_*.deb"))]
    if missing:
        if not any((cache / "apt" / component / "lists").glob("*Packages*")):
            _run(["apt-get", *options, "update"], stdout=subprocess.DEVNULL)
        _run(["apt-get", *options, "download", *missing], cwd=folder, stdout=subprocess.DEVNULL)
    unpacked = []
    for package in packages:
        deb = sorted(folder.glob(f"{package}_*.deb"))[-1]
        target = cache / "unpacked" / deb.stem
        if not target.is_dir():
            partial = target.with_name(target.name + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir(parents=True)
            _run(["dpkg", "-x", str(deb), str(partial)])
            partial.rename(target)
        unpacked.append(target)
    return unpacked


def _copy_layout(sources: list[Path], layout: dict[str, str | list[str]], prefix: Path, dev_links: bool) -> None:
    for source in sources:
        for inside, destinations in layout.items():
            folder = source / inside
            if not folder.is_dir():
                continue
            for destination in [destinations] if isinstance(destinations, str) else destinations:
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


def _pip_spec(spec: str) -> str:
    """`cmake >=3.28,<4` -> `>=3.28,<4`; conda's `3.21.*` -> `==3.21.*`."""
    parts = spec.split()
    if len(parts) < 2:
        return ""
    version = parts[1]
    return version if version[0] in "<>=!~" else f"=={version}"


def lay_out(requirements: dict[str, list[str]], cuda: str | None, workdir: Path, cache: Path) -> Prefixes:
    """Fill BUILD_PREFIX and PREFIX in workdir with the stand-ins of the recipe's build and host lists."""
    table = load_standins()
    prefixes = Prefixes(build=workdir / "build_prefix", host=workdir / "prefix")
    for folder in (prefixes.build, prefixes.host):
        shutil.rmtree(folder, ignore_errors=True)
    (prefixes.build / "bin").mkdir(parents=True)
    host_specs = requirements.get("host", [])
    if any(package_name(s) == "python" and table["python"].get("host_venv") for s in host_specs):
        venv.EnvBuilder(with_pip=True, symlinks=True).create(prefixes.host)
    else:
        prefixes.host.mkdir(parents=True)
    for section, prefix in (("build", prefixes.build), ("host", prefixes.host)):
        tools: list[str] = []
        tool_specs: dict[str, str] = {}
        venv_packages: list[str] = []
        for spec in requirements.get(section, []):
            name = package_name(spec)
            entry = table.get(name)
            if entry is None:
                raise RehearsalError(f"{STANDINS}: no stand-in for `{name}` (asked for in {section}: `{spec}`)")
            prefixes.laid_out.setdefault(section, []).append(name)
            if entry.get("note"):
                prefixes.notes.append(f"{name}: {entry['note']}")
            for program in entry.get("system", []):
                if section == "host" and entry.get("host_venv"):
                    break
                found = shutil.which(program)
                if found is None:
                    raise RehearsalError(f"{STANDINS}: `{name}` stands in as this machine's `{program}`, which is not installed")
                (prefix / "bin" / program).symlink_to(found)
            prefixes.env.update(entry.get("env", {}))
            for tool in entry.get("tools", []):
                tools.append(tool)
                tool_specs[tool] = _pip_spec(spec)
            venv_packages += entry.get("venv", [])
            if "pypi" in entry:
                wheels_by_cuda = entry["pypi"]
                wanted = wheels_by_cuda.get("any") or wheels_by_cuda.get(cuda or "")
                if wanted is None:
                    raise RehearsalError(f"{STANDINS}: `{name}` has no wheels for CUDA {cuda}")
                unpacked = [_unpacked_wheel(w, cache) for w in _pip_download(wanted, cache)]
                _copy_layout(unpacked, entry["layout"], prefix, entry.get("dev_links", False))
            if "debian" in entry:
                unpacked = _debian_unpacked(entry["debian"], entry.get("suite", "main"), cache)
                _copy_layout(unpacked, entry["layout"], prefix, entry.get("dev_links", False))
        if tools:
            env = _tool_env(tools, tool_specs, cache)
            for tool in tools:
                (prefix / "bin" / tool).symlink_to(env / "bin" / tool)
        if venv_packages:
            _pip_install(prefixes.host / "bin" / "python", venv_packages)
    # Debian's protoc looks for its libraries in the system folders only; conda's finds them by rpath
    protoc = prefixes.build / "bin" / "protoc"
    if protoc.exists():
        real = protoc.with_name("protoc.debian")
        protoc.rename(real)
        protoc.write_text(f'#!/bin/sh\nLD_LIBRARY_PATH="{prefixes.build / "lib"}" exec "{real}" "$@"\n')
        protoc.chmod(0o755)
    return prefixes
