"""Audit a built ONNX Runtime plugin EP library before it ships.

    python check_plugin_binary.py LIBRARY [--platform auto|elf|pe] [--target-platform PLATFORM]
    python check_plugin_binary.py --objects --target-platform PLATFORM FILE...

Exit 0 when the library exports exactly the plugin entry points, is no provider bridge, links no
cuDNN and depends only on allowlisted libraries, and, given --target-platform, is built for that
conda platform's machine; otherwise print one `FAIL [rule] ...` line per problem and exit 1. With
--objects, each FILE (an object or library of the build) is checked for the machine alone. Exit 2
when a file cannot be read as the requested format. ELF is read with pyelftools and PE with pefile.
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
from dataclasses import dataclass
from pathlib import Path

import pefile
from elftools.common.exceptions import ELFError
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

ENTRY_POINTS = ("CreateEpFactories", "ReleaseEpFactory")
# The core treats a library exporting GetProvider as a provider bridge, which only works with the
# exact core version it was built against.
PROVIDER_BRIDGE_EXPORT = "GetProvider"
# Provider bridges call back into the core through this symbol; a plugin must not need it.
PROVIDER_BRIDGE_IMPORT = "Provider_GetHost"
# Loaded by the plugin itself when a model needs them (cuDNN for convolutions and the like, cuFFT for Rfft and
# Irfft); linking one would load it into every process that registers the plugin
LOADED_LAZILY = {"cuDNN": ("libcudnn*", "cudnn*.dll"), "cuFFT": ("libcufft*", "cufft64_*.dll")}
# The machine a conda platform's binaries are built for (ELF e_machine, PE FileHeader.Machine): a
# cross-compiled build that ships the build machine's code fails here (tests/test_rehearsal.py)
TARGET_MACHINES = {"linux-64": "EM_X86_64", "linux-aarch64": "EM_AARCH64", "win-64": "IMAGE_FILE_MACHINE_AMD64"}


@dataclass(frozen=True)
class Allowance:
    why: str
    elf: tuple[str, ...] = ()
    pe: tuple[str, ...] = ()

    def patterns(self, binary_format: str) -> tuple[str, ...]:
        return self.elf if binary_format == "elf" else self.pe


# Every dynamic dependency must match one of these (fnmatch; PE names compare case-insensitively).
ALLOWED_DEPENDENCIES = (
    Allowance("CUDA runtime, run-exported by cuda-cudart-dev", elf=("libcudart.so.*",), pe=("cudart64_*.dll",)),
    Allowance("cuBLAS and cuBLASLt, run-exported by libcublas-dev",
              elf=("libcublas.so.*", "libcublasLt.so.*"), pe=("cublas64_*.dll", "cublasLt64_*.dll")),
    Allowance("the CUDA driver, which comes with the system (__cuda), never with a package",
              elf=("libcuda.so.1",), pe=("nvcuda.dll",)),
    Allowance("glibc, present in every linux process",
              elf=("libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "ld-linux*.so.*")),
    Allowance("C++ runtime, run-exported by the compiler", elf=("libstdc++.so.6", "libgcc_s.so.1")),
    Allowance("MSVC C++ runtime and the universal CRT, run-exported by the compiler",
              pe=("msvcp140*.dll", "vcruntime140*.dll", "ucrtbase.dll", "api-ms-win-crt-*.dll")),
    Allowance("Windows system libraries behind the logging, tracing, stack traces and environment queries of "
              "the ORT code linked in; part of every Windows installation",
              pe=("kernel32.dll", "advapi32.dll", "dbghelp.dll", "shell32.dll", "user32.dll",
                  "api-ms-win-core-*.dll", "api-ms-win-eventing-*.dll", "api-ms-win-service-*.dll")),
)


@dataclass(frozen=True)
class LibraryFacts:
    binary_format: str
    exported_functions: frozenset[str]
    imported_symbols: frozenset[str]
    dependencies: tuple[str, ...]
    machine: str = ""


@dataclass(frozen=True)
class Violation:
    rule: str
    subject: str
    reason: str

    def __str__(self) -> str:
        return f"FAIL [{self.rule}] {self.subject}: {self.reason}"


class UnreadableLibrary(Exception):
    pass


def read_elf(path: Path) -> LibraryFacts:
    try:
        with path.open("rb") as stream:
            elf = ELFFile(stream)
            machine = str(elf.header["e_machine"])
            symbols = [symbol for table in elf.iter_sections(type="SHT_DYNSYM")
                       if isinstance(table, SymbolTableSection) for symbol in table.iter_symbols()]
            needed = [tag.needed for dynamic in elf.iter_sections(type="SHT_DYNAMIC")
                      if isinstance(dynamic, DynamicSection) for tag in dynamic.iter_tags("DT_NEEDED")]
    except ELFError as error:
        raise UnreadableLibrary(f"{path} is not a readable ELF file: {error}") from error
    defined = [s for s in symbols if s.name and s["st_shndx"] != "SHN_UNDEF"]
    return LibraryFacts(
        binary_format="elf",
        exported_functions=frozenset(
            s.name for s in defined
            if s["st_info"]["type"] in ("STT_FUNC", "STT_GNU_IFUNC")
            and s["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK", "STB_GNU_UNIQUE")
            and s["st_other"]["visibility"] in ("STV_DEFAULT", "STV_PROTECTED")
        ),
        imported_symbols=frozenset(s.name for s in symbols if s.name and s["st_shndx"] == "SHN_UNDEF"),
        dependencies=tuple(needed),
        machine=machine,
    )


def read_pe(path: Path) -> LibraryFacts:
    try:
        pe = pefile.PE(str(path), fast_load=True)
    except pefile.PEFormatError as error:
        raise UnreadableLibrary(f"{path} is not a readable PE file: {error}") from error
    pe.parse_data_directories(directories=[
        pefile.DIRECTORY_ENTRY[name] for name in (
            "IMAGE_DIRECTORY_ENTRY_EXPORT", "IMAGE_DIRECTORY_ENTRY_IMPORT", "IMAGE_DIRECTORY_ENTRY_DELAY_IMPORT")
    ])
    export_directory = getattr(pe, "DIRECTORY_ENTRY_EXPORT", None)
    exports = export_directory.symbols if export_directory else []
    # Delay-loaded DLLs are still needed the first time the library calls into them.
    imports = [*getattr(pe, "DIRECTORY_ENTRY_IMPORT", []), *getattr(pe, "DIRECTORY_ENTRY_DELAY_IMPORT", [])]
    return LibraryFacts(
        binary_format="pe",
        # PE exports carry no function/data distinction; ordinal-only exports get a visible name.
        exported_functions=frozenset(e.name.decode() if e.name else f"#{e.ordinal}" for e in exports),
        imported_symbols=frozenset(i.name.decode() for entry in imports for i in entry.imports if i.name),
        dependencies=tuple(entry.dll.decode() for entry in imports),
        machine=pefile.MACHINE_TYPE.get(pe.FILE_HEADER.Machine, hex(pe.FILE_HEADER.Machine)),
    )


def detect_format(path: Path) -> str:
    with path.open("rb") as stream:
        magic = stream.read(4)
    if magic == b"\x7fELF":
        return "elf"
    if magic[:2] == b"MZ":
        return "pe"
    raise UnreadableLibrary(f"{path} is neither an ELF nor a PE file")


def matches(name: str, patterns: tuple[str, ...], binary_format: str) -> bool:
    if binary_format == "pe":
        return any(fnmatch.fnmatchcase(name.lower(), pattern.lower()) for pattern in patterns)
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def allowance_for(name: str, binary_format: str) -> Allowance | None:
    return next((allowance for allowance in ALLOWED_DEPENDENCIES
                 if matches(name, allowance.patterns(binary_format), binary_format)), None)


def export_violations(facts: LibraryFacts) -> list[Violation]:
    violations = [Violation("entry-points", name, "is not exported; the core cannot load the plugin without it")
                  for name in ENTRY_POINTS if name not in facts.exported_functions]
    for name in sorted(facts.exported_functions - set(ENTRY_POINTS)):
        if name == PROVIDER_BRIDGE_EXPORT:
            violations.append(Violation("no-provider-bridge-export", name, "is exported, so the core loads this "
                                        "library as a provider bridge locked to one core version"))
        else:
            violations.append(Violation("exports-only-entry-points", name,
                                        f"is exported beyond {' and '.join(ENTRY_POINTS)}"))
    return violations


def import_violations(facts: LibraryFacts) -> list[Violation]:
    if PROVIDER_BRIDGE_IMPORT not in facts.imported_symbols:
        return []
    return [Violation("no-provider-bridge-import", PROVIDER_BRIDGE_IMPORT,
                      "is needed from outside the library: it expects the core's provider-bridge host")]


def dependency_violations(facts: LibraryFacts) -> list[Violation]:
    violations = []
    for name in facts.dependencies:
        lazy = next((library for library, patterns in LOADED_LAZILY.items()
                     if matches(name, patterns, facts.binary_format)), None)
        if lazy is not None:
            violations.append(Violation("loaded-lazily", name, f"is linked; {lazy} must be loaded lazily at run time"))
        elif allowance_for(name, facts.binary_format) is None:
            violations.append(Violation("dependency-allowlist", name, "is a dynamic dependency outside the allowlist"))
    return violations


def allowed_reasons(facts: LibraryFacts) -> dict[str, str]:
    return {name: allowance.why for name in facts.dependencies
            if (allowance := allowance_for(name, facts.binary_format)) is not None}


def machine_violations(subject: str, facts: LibraryFacts, target_platform: str | None) -> list[Violation]:
    expected = TARGET_MACHINES.get(target_platform or "")
    if expected is None or facts.machine == expected:
        return []
    return [Violation("target-machine", subject, f"{facts.machine} is not {target_platform}'s machine ({expected})")]


def audit(facts: LibraryFacts, target_platform: str | None = None, subject: str = "library") -> list[Violation]:
    return (export_violations(facts) + import_violations(facts) + dependency_violations(facts)
            + machine_violations(subject, facts, target_platform))


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("library", type=Path, nargs="+")
    parser.add_argument("--platform", choices=("auto", "elf", "pe"), default="auto",
                        help="binary format to read; auto decides from the file's magic bytes")
    parser.add_argument("--target-platform", choices=sorted(TARGET_MACHINES),
                        help="the conda platform the files must be built for")
    parser.add_argument("--objects", action="store_true",
                        help="check each file (objects of the build) for the target platform's machine alone")
    arguments = parser.parse_args(argv)
    if arguments.objects and arguments.target_platform is None:
        parser.error("--objects needs --target-platform")
    if not arguments.objects and len(arguments.library) != 1:
        parser.error("give one library, or --objects with the files to check")
    return arguments


def read(path: Path, requested: str) -> LibraryFacts:
    readers = {"elf": read_elf, "pe": read_pe}
    return readers[detect_format(path) if requested == "auto" else requested](path)


def check_objects(paths: list[Path], requested: str, target_platform: str) -> int:
    failed = False
    for path in paths:
        try:
            facts = read(path, requested)
        except (OSError, UnreadableLibrary) as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        violations = machine_violations(str(path), facts, target_platform)
        for violation in violations:
            print(violation)
        if not violations:
            print(f"ok {path}: {facts.machine}")
        failed = failed or bool(violations)
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    arguments = parse_arguments(argv)
    if arguments.objects:
        return check_objects(arguments.library, arguments.platform, arguments.target_platform)
    (library,) = arguments.library
    try:
        facts = read(library, arguments.platform)
        binary_format = facts.binary_format
    except (OSError, UnreadableLibrary) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    violations = audit(facts, arguments.target_platform)
    for violation in violations:
        print(violation)
    if violations:
        return 1
    print(f"ok: {library} ({binary_format}, {facts.machine}) exports {', '.join(sorted(facts.exported_functions))}")
    for name, why in allowed_reasons(facts).items():
        print(f"  needs {name}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
