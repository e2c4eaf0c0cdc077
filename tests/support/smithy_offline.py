"""Run conda-smithy's own command line with its few network calls answered on this machine.

Run by the conda-smithy environment's Python (support/smithy.py). Every HTTP request conda-smithy
makes goes through `requests`, so its transport answers here:
- conda-forge's linter hints (`.../linter_hints/hints.toml`) from the shared pinning;
- `https://github.com/<maintainer>` with 200 and `https://github.com/orgs/<maintainer>/teams` with 404,
  which is how conda-smithy, without a token, learns that a maintainer is a GitHub user;
- anything else fails as a connection error, so no answer is ever invented for it.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import requests
from requests.adapters import HTTPAdapter
from requests.models import PreparedRequest, Response

HINTS = re.compile(r"^https://raw\.githubusercontent\.com/conda-forge/conda-forge-pinning-feedstock/[^/]+/recipe/"
                   r"linter_hints/hints\.toml$")
PROFILE = re.compile(r"^https://github\.com/[A-Za-z0-9-]+/?$")
TEAMS = re.compile(r"^https://github\.com/orgs/[A-Za-z0-9-]+/teams/?$")


def _answer(request: PreparedRequest, status: int, body: bytes = b"") -> Response:
    response = Response()
    response.status_code = status
    response._content = body
    response.url = request.url or ""
    response.request = request
    return response


def send(adapter: HTTPAdapter, request: PreparedRequest, *args: object, **kwargs: object) -> Response:
    url = request.url or ""
    if HINTS.match(url):
        return _answer(request, 200, Path(os.environ["SMITHY_OFFLINE_HINTS"]).read_bytes())
    if PROFILE.match(url):
        print(f"smithy_offline: {url}: answered 200 without asking (the maintainer is assumed to exist)",
              file=sys.stderr)
        return _answer(request, 200)
    if TEAMS.match(url):
        return _answer(request, 404)
    raise requests.ConnectionError(f"smithy_offline: no network here, and no local answer for {url}")


if __name__ == "__main__":
    HTTPAdapter.send = send  # type: ignore[method-assign]
    from conda_smithy.cli import main

    sys.argv = ["conda-smithy", *sys.argv[1:]]
    sys.exit(main())
