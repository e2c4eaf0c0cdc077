"""Adds conda-forge's EP plugin auto-registration to an installed onnxruntime wheel.

The `onnxruntime` output's build script (recipe/build_python.py) runs this after `pip install`, with the
environment's site-packages folder as its argument: `python install_autoregistration.py SP_DIR`.

The tests call the same functions, so they exercise the files exactly as the package ships them.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def install_helper(site_packages: Path) -> None:
    """Install the upstream-compatible `onnxruntime_ep_cuda` package, which holds the manifest reader."""
    shutil.copytree(
        HERE / "onnxruntime_ep_cuda",
        site_packages / "onnxruntime_ep_cuda",
        ignore=shutil.ignore_patterns("__pycache__"),
    )


def install_hook(site_packages: Path) -> None:
    """Install `_conda_ep_autoregister.py` with its manifest reader beside it, and append its call to
    `onnxruntime/__init__.py`. The hook imports the reader from inside the onnxruntime package, where
    nothing on sys.path can stand in for it."""
    package = site_packages / "onnxruntime"
    init = package / "__init__.py"
    source = init.read_text(encoding="utf-8")
    hook = (HERE / "init_hook.py").read_text(encoding="utf-8")
    if hook in source:
        raise SystemExit(f"{init} already has the EP auto-registration hook")
    shutil.copyfile(HERE / "ep_autoregister.py", package / "_conda_ep_autoregister.py")
    shutil.copyfile(HERE / "onnxruntime_ep_cuda" / "_manifest.py", package / "_conda_ep_manifest.py")
    init.write_text(f"{source.rstrip()}\n\n\n{hook}", encoding="utf-8")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(f"usage: {argv[0]} SITE_PACKAGES", file=sys.stderr)
        return 2
    site_packages = Path(argv[1])
    install_helper(site_packages)
    install_hook(site_packages)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
