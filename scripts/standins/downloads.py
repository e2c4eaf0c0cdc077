"""What a rehearsal takes from PyPI and Debian, downloaded once into its cache folder and unpacked there:
the files of the stand-in packages that this machine lacks (scripts/standins/environment.py), and the
tool environments of the rehearsal's own helpers.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from bootstrap import PipFailed, cached_venv, pip_install
from standins import StandinError

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
# wheels whose build machine's files serve every target: headers alone, or the compiler itself (the package
# index this machine reaches has no aarch64 wheel of CCCL 13.2, nvcc, its crt or nvvm)
BUILD_MACHINE_WHEELS = {"nvidia-cuda-cccl", "nvidia-cuda-nvcc", "nvidia-cuda-crt", "nvidia-nvvm"}


def _run(command: list[str], **kwargs) -> None:
    subprocess.run(command, check=True, stdin=subprocess.DEVNULL, **kwargs)


def pip_download(requirements: list[str], cache: Path, platform: Platform) -> list[Path]:
    """Each `name==version` requirement's wheel for `platform` (for the build machine, where BUILD_MACHINE_WHEELS
    names it), downloaded into the cache unless it is there."""
    folder = cache / "wheels"
    folder.mkdir(parents=True, exist_ok=True)
    wheels = []
    for requirement in requirements:
        name, _, version = requirement.partition("==")
        stem = f"{name.replace('-', '_')}-{version}-"
        runs_on = PLATFORMS[BUILD_PLATFORM] if name in BUILD_MACHINE_WHEELS else platform

        def matching(stem: str = stem, runs_on: Platform = runs_on) -> list[Path]:
            return [w for w in folder.glob("*.whl") if w.name.startswith(stem)
                    and (w.name.endswith(f"_{runs_on.machine}.whl") or w.name.endswith("-any.whl"))]

        found = matching()
        if not found:
            wanted = [argument for tag in runs_on.wheel_platforms for argument in ("--platform", tag)]
            _run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                  "--no-deps", "--only-binary=:all:", *wanted, "-d", str(folder), requirement])
            found = matching()
        if not found:
            raise StandinError(f"pip download {requirement} left no {runs_on.machine} wheel in {folder}")
        wheels.append(found[0])
    return wheels


def unpacked_wheel(wheel: Path, cache: Path) -> Path:
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
    return cache / "apt" / (suite_component if arch == PLATFORMS[BUILD_PLATFORM].debian_arch
                            else f"{suite_component}-{arch}")


def _apt_options(cache: Path, suite_component: str, arch: str) -> list[str]:
    """apt-get reading only the Debian component and architecture asked for, with its lists kept in the cache.
    Run as root, apt-get downloads as its user _apt, which cannot write into the cache and says so in a warning
    per file; APT::Sandbox::User=root keeps it as the user it was started as."""
    root = _apt_root(cache, suite_component, arch)
    (root / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    (root / "archives" / "partial").mkdir(parents=True, exist_ok=True)
    sources = root / "sources.list"
    sources.write_text(f"deb {DEBIAN_MIRROR} {DEBIAN_SUITE} {suite_component}\n")
    return ["-o", f"Dir::Etc::SourceList={sources}", "-o", "Dir::Etc::SourceParts=/dev/null",
            "-o", f"Dir::State::Lists={root / 'lists'}", "-o", f"Dir::Cache={root}",
            "-o", "APT::Get::List-Cleanup=0", "-o", f"APT::Architecture={arch}", "-o", f"APT::Architectures={arch}",
            "-o", "APT::Sandbox::User=root"]


def debian_packages(packages: list[str], component: str, cache: Path, arch: str) -> list[Path]:
    """Debian's packages of this suite and component, for `arch` (or all), downloaded into the cache."""
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
    return [debs(package)[-1] for package in packages]


def debian_unpacked(packages: list[str], component: str, cache: Path, arch: str) -> list[Path]:
    """Each of the packages unpacked (dpkg -x) into a folder of its own in the cache."""
    unpacked = []
    for deb in debian_packages(packages, component, cache, arch):
        target = cache / "unpacked" / deb.stem
        if not target.is_dir():
            partial = target.with_name(target.name + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir(parents=True)
            _run(["dpkg", "-x", str(deb), str(partial)])
            partial.rename(target)
        unpacked.append(target)
    return unpacked


def _pip_install(python: Path, requirements: list[str]) -> None:
    try:
        pip_install(python, requirements, naming=" ".join(requirements))
    except PipFailed as failure:
        raise StandinError(str(failure)) from None


def tool_python(requirements: list[str], cache: Path) -> Path:
    """The interpreter of a cached environment holding these PyPI requirements."""
    requirements = sorted(requirements)
    digest = hashlib.sha256("\n".join(requirements).encode()).hexdigest()[:12]
    env = cache / f"tools-{digest}"
    return cached_venv(env, digest, lambda python: _pip_install(python, requirements))
