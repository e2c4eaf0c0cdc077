"""The one builder of cached virtual environments (scripts/bootstrap.py), run for real.

What gets installed is a wheel written here, installed with `--no-index`: no package index is needed.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import bootstrap
from bootstrap import UNFINISHED, PipFailed, cached_venv, pip_install

# each test makes virtual environments with pip, for a minute and a half of CPU in all
pytestmark = pytest.mark.slow

ENTRY_POINT = """\
import importlib.metadata, sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).parent))
import bootstrap
bootstrap.ensure(Path(__file__).with_name("requirements.txt"))
print(sys.prefix, importlib.metadata.version("demo"))
"""


def wheel(folder: Path, version: str) -> Path:
    """A pure-Python wheel of `demo` at `version`: the smallest thing pip installs as a distribution."""
    info = f"demo-{version}.dist-info"
    files = {
        "demo.py": f"VERSION = {version!r}\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: demo\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test_bootstrap\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in [*files, f"{info}/RECORD"])
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"demo-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return path


def installed_version(python: Path) -> str:
    return subprocess.run([str(python), "-c", "import demo; print(demo.VERSION)"],
                          capture_output=True, text=True, check=True).stdout.strip()


def install_offline(what: Path | str):
    return lambda python: pip_install(python, ["--no-index", str(what)], naming=str(what))


def test_a_cached_venv_is_reused_without_running_pip_again(tmp_path: Path) -> None:
    demo = wheel(tmp_path / "wheels", "1.0")
    python = cached_venv(tmp_path / "env", "key", install_offline(demo))
    demo.unlink()  # pip run again would fail: the wheel is gone
    assert cached_venv(tmp_path / "env", "key", install_offline(demo)) == python
    assert installed_version(python) == "1.0"


def test_a_new_key_installs_again_into_the_same_venv(tmp_path: Path) -> None:
    python = cached_venv(tmp_path / "env", "one", install_offline(wheel(tmp_path / "wheels", "1.0")))
    assert cached_venv(tmp_path / "env", "two", install_offline(wheel(tmp_path / "wheels", "2.0"))) == python
    assert installed_version(python) == "2.0"


def test_a_failing_pip_leaves_no_venv_and_names_what_it_installed(tmp_path: Path) -> None:
    missing = tmp_path / "requirements-nobody-has.txt"
    missing.write_text("no-such-distribution==1.0\n")
    with pytest.raises(PipFailed) as failure:
        cached_venv(tmp_path / "env", "key", lambda python: pip_install(
            python, ["--no-index", "-r", str(missing)], naming=str(missing)))
    assert str(failure.value).startswith(f"cannot install {missing} into {tmp_path / 'env'}: pip exited 1 (ERROR: ")
    assert "no-such-distribution" in failure.value.reason
    assert not (tmp_path / "env").exists()


def test_a_failing_pip_keeps_a_venv_that_worked_before(tmp_path: Path) -> None:
    python = cached_venv(tmp_path / "env", "one", install_offline(wheel(tmp_path / "wheels", "1.0")))
    with pytest.raises(PipFailed):
        cached_venv(tmp_path / "env", "two", install_offline(tmp_path / "wheels" / "demo-2.0-py3-none-any.whl"))
    assert installed_version(python) == "1.0"
    # still unstamped for the new key: the next call tries again
    assert cached_venv(tmp_path / "env", "two", install_offline(wheel(tmp_path / "wheels", "2.0"))) == python
    assert installed_version(python) == "2.0"


def test_an_interrupted_first_install_leaves_no_venv(tmp_path: Path) -> None:
    def interrupted(python: Path) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cached_venv(tmp_path / "env", "key", interrupted)
    assert not (tmp_path / "env").exists()


def test_a_venv_whose_builder_was_killed_is_built_again_from_nothing(tmp_path: Path) -> None:
    env = tmp_path / "env"
    killed = subprocess.run([sys.executable, "-c", (
        "import os, signal, sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]); import bootstrap\n"
        "def install(python):\n"
        "    (python.parent.parent / 'half-made').touch()\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "bootstrap.cached_venv(Path(sys.argv[2]), 'key', install)"),
        str(Path(bootstrap.__file__).parent), str(env)], capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL
    assert (env / "half-made").exists() and bootstrap.venv_python(env).exists()
    python = cached_venv(env, "key", install_offline(wheel(tmp_path / "wheels", "1.0")))
    assert installed_version(python) == "1.0"
    assert not (env / "half-made").exists() and not (env / UNFINISHED).exists()


@pytest.fixture
def entry_point(tmp_path: Path) -> Path:
    """A script that calls `bootstrap.ensure` for its requirements.txt, in a repository of its own."""
    scripts = tmp_path / "repo" / "scripts"
    scripts.mkdir(parents=True)
    shutil.copy2(bootstrap.__file__, scripts / "bootstrap.py")
    (scripts / "entry.py").write_text(ENTRY_POINT)
    return scripts / "entry.py"


def run_entry_point(entry: Path, pin: str) -> subprocess.CompletedProcess[str]:
    (entry.parent / "requirements.txt").write_text(
        f"--no-index\n--find-links {entry.parents[2] / 'wheels'}\ndemo=={pin}\n")
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_"))}
    return subprocess.run([sys.executable, str(entry)], capture_output=True, text=True, env=environment,
                          stdin=subprocess.DEVNULL, timeout=300)


def test_ensure_runs_the_script_again_in_a_venv_it_keeps_until_the_requirements_change(entry_point: Path) -> None:
    venv = entry_point.parents[1] / ".venv"
    wheel(entry_point.parents[2] / "wheels", "1.0")
    first = run_entry_point(entry_point, "1.0")
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == [str(venv), "1.0"]
    assert "bootstrap: installing scripts/requirements.txt into .venv/" in first.stderr
    shutil.rmtree(entry_point.parents[2] / "wheels")  # pip run again would fail: nothing to install from
    again = run_entry_point(entry_point, "1.0")
    assert (again.returncode, again.stdout.split(), again.stderr) == (0, [str(venv), "1.0"], "")
    wheel(entry_point.parents[2] / "wheels", "2.0")
    changed = run_entry_point(entry_point, "2.0")
    assert changed.returncode == 0, changed.stderr
    assert changed.stdout.split() == [str(venv), "2.0"]


def test_ensure_that_cannot_install_says_which_file_in_one_line_and_leaves_no_venv(entry_point: Path) -> None:
    result = run_entry_point(entry_point, "1.0")  # no wheels folder at all
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1].startswith(
        "bootstrap: cannot install scripts/requirements.txt into .venv/: pip exited 1 (ERROR: ")
    assert not (entry_point.parents[1] / ".venv").exists()


def test_two_processes_asking_for_one_venv_at_once_build_it_once_and_both_get_it(tmp_path: Path) -> None:
    env, installs = tmp_path / "env", tmp_path / "installs.txt"
    builder = (
        "import sys, time; from pathlib import Path; sys.path.insert(0, sys.argv[1]); import bootstrap\n"
        "def install(python):\n"
        "    with open(sys.argv[3], 'a') as log: log.write('installed\\n')\n"
        "    time.sleep(3)\n"
        "print(bootstrap.cached_venv(Path(sys.argv[2]), 'key', install))")
    both = [subprocess.Popen([sys.executable, "-c", builder, str(Path(bootstrap.__file__).parent), str(env),
                              str(installs)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    said = [process.communicate(timeout=300) for process in both]
    assert [process.returncode for process in both] == [0, 0], said
    assert installs.read_text() == "installed\n"
    assert {out.strip() for out, _ in said} == {str(bootstrap.venv_python(env))}
