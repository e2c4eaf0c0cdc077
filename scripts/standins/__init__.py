"""The stand-in environment: conda-forge's packages as this machine and the GPU machine can have them.

- `channel`: the stand-in channel, one package for each entry of `standins.yaml`, built by rattler-build;
- `environment`: build and host environments made from that channel, with this machine's files;
- `downloads`: what those environments take from PyPI and Debian;
- `sources`: ONNX Runtime's source and the archives its CMake fetches, from a mirror or the recipe's URLs;
- `resolve`: rattler's solver over the channel, for the recipe's environments;
- `evaluate`: the recipe as rattler-build evaluates it for one job.

The rehearsal (`scripts/rehearse.py`), the render (`scripts/render.py`) and the GPU machine
(`scripts/device/`) import this package, and nothing else of each other. A package built against it is a
rehearsal, never a conda-forge build.
"""

from __future__ import annotations

from pathlib import Path


class StandinError(Exception):
    """A problem with the stand-in environment's inputs, said in one line."""


def cache_folder(root: Path) -> Path:
    """Where the feedstock at `root` keeps what the stand-in environment downloads and builds: the sources
    (`sources/`), the channels, and the rehearsals' results."""
    return root / ".cache" / "rehearsal"
