"""Cached virtual environments, and the running script put inside the feedstock's own one.

Every venv the feedstock needs comes from `cached_venv`: the entry points' `.venv/`, the tests' per-core
environments, the rehearsal's build tools and the tests' conda-smithy. Standard library only, because
`ensure` runs before anything is installed.

The entry points (`render.py`, `run_tests.py`, `rehearse.py`) call `ensure(...)` before importing
anything that is not in the standard library. When the interpreter already has every pinned
distribution at its pinned version it carries on; otherwise `.venv/` is created (or refreshed when the
requirements changed) and the script is started again with that interpreter, with the same arguments.
Exact versions, not mere imports, because the renderer's bytes depend on its jinja2 and PyYAML.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import venv
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import NoReturn

try:
    import fcntl
except ImportError:  # Windows: no lock; the test suite, whose workers share the caches, runs on Linux
    fcntl = None

REPO = Path(__file__).resolve().parent.parent
VENV = REPO / ".venv"
PYPROJECT = REPO / "pyproject.toml"
PIN = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")
# present from the first moment of a venv's creation until its first install has succeeded
UNFINISHED = ".unfinished"


class PipFailed(Exception):
    """`pip install` exited non-zero; `reason` is its exit status and first error, in one line."""

    def __init__(self, naming: str, env: Path, returncode: int, output: str) -> None:
        said = [line.strip() for line in output.splitlines() if line.strip()]
        first = next((line for line in said if line.startswith("ERROR:")), said[0] if said else "no output")
        self.output = output
        self.reason = f"pip exited {returncode} ({first})"
        super().__init__(f"cannot install {naming} into {env}: {self.reason}")


def venv_python(env: Path) -> Path:
    return env / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def pip_install(python: Path, args: list[str], *, naming: str, environ: Mapping[str, str] | None = None) -> None:
    """`pip install ARGS` with `python`; `naming` says what ARGS install, for the error message."""
    result = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, env=environ, check=False,
    )
    if result.returncode != 0:
        raise PipFailed(naming, python.parent.parent, result.returncode, result.stderr + result.stdout)


@contextlib.contextmanager
def cache_lock(path: Path) -> Iterator[None]:
    """Held while the cached `path` is checked and made: processes that share a cache (the test suite's
    workers) take turns, and the one that comes second finds what the first made. The lock is the file
    `<path>.lock` beside it, which stays."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f"{path.name}.lock", "w") as handle:
        if fcntl is not None:
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def cached_venv(env: Path, key: str, install: Callable[[Path], None], *, stamp: str = "installed") -> Path:
    """The interpreter of the venv at `env`, once `install(interpreter)` has succeeded there for `key`.

    While `env/<stamp>.sha256` holds `key`, the venv is reused and `install` is not run. A venv that
    already exists is installed into in place; a new one that `install` fails in, or that an interrupt
    stops, is removed, as is one a killed process left unfinished: a half-made environment would
    pass for a working one next time.
    """
    with cache_lock(env):
        python = venv_python(env)
        done = env / f"{stamp}.sha256"
        if (env / UNFINISHED).exists():
            shutil.rmtree(env)
        if python.exists() and done.is_file() and done.read_text().strip() == key:
            return python
        fresh = not python.exists()
        try:
            if fresh:
                shutil.rmtree(env, ignore_errors=True)
                env.mkdir(parents=True)
                (env / UNFINISHED).touch()
                venv.EnvBuilder(with_pip=True).create(env)
            install(python)
            done.write_text(key + "\n")
            (env / UNFINISHED).unlink(missing_ok=True)
        except BaseException:
            if fresh:
                shutil.rmtree(env, ignore_errors=True)
            raise
        return python


def _files(requirements: Path) -> list[Path]:
    """The requirements file and those it includes with `-r`."""
    found = [requirements]
    for line in requirements.read_text().splitlines():
        if line.startswith("-r "):
            found += _files(requirements.parent / line[3:].strip())
    return found


def _pins(requirements: Path) -> dict[str, str]:
    pins = {}
    for path in _files(requirements):
        for line in path.read_text().splitlines():
            match = PIN.fullmatch(line.split("#")[0].strip())
            if match:
                pins[match.group(1)] = match.group(2)
    return pins


def unmet_pins(requirements: Path) -> list[str]:
    """The pins of `requirements` this interpreter does not satisfy: the distribution is missing or at
    another version."""
    unmet = []
    for name, version in _pins(requirements).items():
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            installed = None
        if installed != version:
            unmet.append(f"{name}=={version} (found {installed or 'none'})")
    return unmet


def _digest(requirements: Path) -> str:
    """Changes whenever the file, one it includes, or the tools' own pyproject.toml changes."""
    digest = hashlib.sha256()
    for path in _files(requirements) + ([PYPROJECT] if PYPROJECT.is_file() else []):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _exit_cannot_install(requirements: Path, why: str) -> NoReturn:
    print(f"bootstrap: cannot install {requirements.relative_to(REPO)} into {VENV.relative_to(REPO)}/: {why}",
          file=sys.stderr)
    raise SystemExit(2)


def _provision(requirements: Path) -> None:
    def install(python: Path) -> None:
        print(f"bootstrap: installing {requirements.relative_to(REPO)} into {VENV.relative_to(REPO)}/",
              file=sys.stderr)
        # the tools themselves, editable: their modules import each other, and the commands of
        # pyproject.toml's [project.scripts] are in .venv/bin/ (a copy of this file alone has no project)
        tools = ["--editable", str(REPO)] if PYPROJECT.is_file() else []
        pip_install(python, ["-r", str(requirements), *tools], naming=str(requirements))

    try:
        # one stamp per requirements file: the renderer's and the tests' share .venv/
        cached_venv(VENV, _digest(requirements), install,
                    stamp=f"{requirements.parent.name}-{requirements.stem}")
    except PipFailed as failure:
        _exit_cannot_install(requirements, f"{failure.reason}; is the package index reachable?")
    except (OSError, subprocess.CalledProcessError) as error:
        _exit_cannot_install(requirements, f"creating the environment failed ({error})")


def ensure(requirements: Path, *, always_venv: bool = False) -> None:
    """Return when this interpreter has every pin of `requirements`; else re-run this process in `.venv/`.

    `always_venv` insists on `.venv/` even when the current interpreter could do: the test suite
    wants an environment of its own, the renderer only wants to start fast.
    """
    inside = Path(sys.prefix).resolve() == VENV.resolve()
    if inside:
        if unmet_pins(requirements):
            _provision(requirements)
        unmet = unmet_pins(requirements)
        if unmet:
            _exit_cannot_install(requirements, f"after installing, {', '.join(unmet)}")
        return
    if not always_venv and not unmet_pins(requirements):
        return
    _provision(requirements)
    python = str(venv_python(VENV))
    os.execv(python, [python, *sys.argv])
