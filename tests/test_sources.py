"""Where the rehearsal and the tests get ONNX Runtime's source (scripts/standins/sources.py).

The download path runs against a real HTTP server on 127.0.0.1 that serves the mirror's files under
the recipe's and deps.txt's URL paths, reached through ORT_DOWNLOAD_BASE_URL.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import CONFIG, REPO
from feedstock.reader import version_tuple
from rehearsal import DEPENDENCIES
from standins import StandinError, cache_folder
from standins.sources import (BASE_URL_VARIABLE, DEPS_TXT, MIRROR_VARIABLE, SourcesUnavailable, WrongHash,
                               deps_txt, locate, mirror_folder, mirror_path, recipe_source)
from support.upstream_source import CACHE, archives_cmake_took, sources

CPU_DEPENDENCIES = DEPENDENCIES["cpp"]


class Server:
    """A folder served over HTTP on 127.0.0.1, laid out as `mirror/<url without https://>`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.http = ThreadingHTTPServer(("127.0.0.1", 0), partial(SimpleHTTPRequestHandler, directory=str(root)))
        self.base_url = f"http://127.0.0.1:{self.http.server_address[1]}"

    def serve(self, url: str, file: Path) -> None:
        path = self.root / mirror_path(url)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
        path.symlink_to(file)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """The mirror's source tarball under the recipe's URL, and its archives under deps.txt's URLs."""
    mirror = mirror_folder(os.environ)
    if mirror is None:
        pytest.skip(f"no mirror ({MIRROR_VARIABLE}) whose files the local server could serve")
    try:
        mirrored = locate(REPO, tmp_path / "unused", CPU_DEPENDENCIES)
    except SourcesUnavailable as reason:  # the mirror holds another version's source than the recipe's
        pytest.skip(f"the mirror cannot give the local server the recipe's sources: {reason}")
    served = Server(tmp_path / "served")
    served.serve(recipe_source(REPO).url, mirrored.tarball)
    listed = deps_txt(mirrored.read(DEPS_TXT))
    for name, archive in mirrored.archives.items():
        served.serve(listed[name][0], archive)
    thread = threading.Thread(target=served.http.serve_forever, daemon=True)
    thread.start()
    yield served
    served.http.shutdown()
    served.http.server_close()


def _environ(base_url: str) -> dict[str, str]:
    """No mirror; downloads from base_url."""
    return {MIRROR_VARIABLE: "", BASE_URL_VARIABLE: base_url}


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _sha1(path: Path) -> str:
    return hashlib.sha1(path.read_bytes()).hexdigest()


def _refused_base_url() -> str:
    """An address on 127.0.0.1 where nothing listens: a connection is refused, as without a network."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def _served_tarball(server: Server) -> Path:
    return (server.root / mirror_path(recipe_source(REPO).url)).resolve()


def _refused(feedstock: Path, cache: Path, server: Server) -> str:
    """The one line a download of the wrong bytes is refused with."""
    with pytest.raises(WrongHash) as refused:
        locate(feedstock, cache, CPU_DEPENDENCIES, _environ(server.base_url))
    message = str(refused.value)
    assert "\n" not in message
    return message


def _recipe_expecting(feedstock: Path, sha256: str) -> None:
    """The scratch recipe's source.sha256 set to this one, as a bot bump would set it."""
    recipe = feedstock / "recipe" / "recipe.yaml"
    committed = recipe_source(feedstock).sha256
    recipe.write_text(recipe.read_text().replace(f"sha256: {committed}", f"sha256: {sha256}"))
    assert recipe_source(feedstock).sha256 == sha256


def test_downloads_matching_the_recipes_sha256_and_deps_txts_sha1s_are_cached_and_used(
        server: Server, feedstock: Path, tmp_path: Path) -> None:
    _recipe_expecting(feedstock, _sha256(_served_tarball(server)))
    cache = tmp_path / "cache"
    located = locate(feedstock, cache, CPU_DEPENDENCIES, _environ(server.base_url))
    assert located.tarball.is_relative_to(cache)
    assert located.tarball.read_bytes() == _served_tarball(server).read_bytes()
    listed = deps_txt(located.read(DEPS_TXT))
    assert sorted(located.archives) == sorted(CPU_DEPENDENCIES)
    for name, archive in located.archives.items():
        url, sha1 = listed[name]
        # where ORT's -Donnxruntime_CMAKE_DEPS_MIRROR_DIR looks for it
        assert archive == located.deps_mirror / mirror_path(url)
        assert _sha1(archive) == sha1
    assert _files(cache) == sorted([located.tarball, *located.archives.values()])


def test_kept_downloads_are_used_without_the_network(server: Server, feedstock: Path, tmp_path: Path) -> None:
    _recipe_expecting(feedstock, _sha256(_served_tarball(server)))
    cache = tmp_path / "cache"
    first = locate(feedstock, cache, CPU_DEPENDENCIES, _environ(server.base_url))
    again = locate(feedstock, cache, CPU_DEPENDENCIES, _environ(_refused_base_url()))
    assert again == first


def test_a_source_tarball_whose_sha256_is_not_the_recipes_is_refused_and_nothing_is_cached(
        server: Server, tmp_path: Path) -> None:
    _, url, expected = recipe_source(REPO)
    actual = _sha256(_served_tarball(server))
    if actual == expected:
        pytest.skip("the mirror holds the tag's own tarball: no wrong bytes to serve")
    cache = tmp_path / "cache"
    message = _refused(REPO, cache, server)
    assert message.startswith(url) and expected in message and actual in message
    assert _files(cache) == []


def test_an_archive_whose_sha1_is_not_deps_txts_is_refused_and_nothing_of_it_is_cached(
        server: Server, feedstock: Path, tmp_path: Path) -> None:
    _recipe_expecting(feedstock, _sha256(_served_tarball(server)))
    listed = deps_txt(locate(REPO, tmp_path / "unused", CPU_DEPENDENCIES).read(DEPS_TXT))
    (re2_url, re2_sha1), (date_url, _) = listed["re2"], listed["date"]
    wrong = (server.root / mirror_path(date_url)).resolve()
    server.serve(re2_url, wrong)
    cache = tmp_path / "cache"
    message = _refused(feedstock, cache, server)
    assert message.startswith(re2_url) and re2_sha1 in message and _sha1(wrong) in message
    # what the cache holds is what was checked before re2: the tarball and the archives listed before it
    checked = {_sha256(_served_tarball(server))} | {sha1 for name, (_, sha1) in listed.items()
                                                    if name in CPU_DEPENDENCIES and name != "re2"}
    assert _files(cache) and all({_sha256(p), _sha1(p)} & checked for p in _files(cache))
    assert not any(p.as_posix().endswith(mirror_path(re2_url)) for p in _files(cache))


def test_a_dependency_that_deps_txt_does_not_list_is_an_error_not_a_skip() -> None:
    sources()
    with pytest.raises(StandinError, match="lists no no_such_dependency"):
        locate(REPO, CACHE, ("no_such_dependency",))


def test_without_a_mirror_or_a_reachable_download_the_sources_are_unavailable_saying_why(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with pytest.raises(SourcesUnavailable) as unavailable:
        locate(REPO, cache, CPU_DEPENDENCIES, _environ(_refused_base_url()))
    message = str(unavailable.value)
    assert message.startswith(recipe_source(REPO).url) and "cannot download" in message and MIRROR_VARIABLE in message
    assert _files(cache) == []


def test_rehearse_without_sources_exits_2_with_the_reason_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "rehearse.py"), "onnxruntime-cpp",
                           "--workdir", str(tmp_path / "work"), "--cache", str(tmp_path / "cache")],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          env={**os.environ, **_environ(_refused_base_url())})
    assert done.returncode == 2
    assert done.stderr.startswith(f"rehearse: {recipe_source(REPO).url}") and done.stderr.count("\n") == 1


@pytest.mark.parametrize(("args", "message"), [
    (["onnxruntime-gpu"], "rehearse: config/feedstock.yaml: no output is called 'onnxruntime-gpu' (outputs.*.name: "
                          f"{CONFIG.outputs.plugin.name}, {CONFIG.outputs.cpp.name}, {CONFIG.outputs.python.name})\n"),
    # a -novec twin differs from its output in one CMake switch alone, and has jobs of its own
    ([CONFIG.outputs.cpp.novec_name], f"rehearse: config/feedstock.yaml: no output is called "
                                      f"'{CONFIG.outputs.cpp.novec_name}'"),
    ([CONFIG.outputs.plugin.name], f"rehearse: --cuda is required for {CONFIG.outputs.plugin.name} "),
    ([CONFIG.outputs.cpp.name, "--cuda", "13.4"], "rehearse: --cuda is required for "),
], ids=["unknown", "novec", "plugin-without-cuda", "cpu-with-cuda"])
def test_rehearse_takes_the_outputs_by_their_names_in_the_config(args: list[str], message: str, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "rehearse.py"), *args, "--workdir", str(tmp_path)],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert (done.returncode, done.stderr[:len(message)]) == (2, message)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_rehearsal_without_a_mirror_configures_from_what_it_downloaded(server: Server, feedstock: Path,
                                                                          tmp_path: Path) -> None:
    _recipe_expecting(feedstock, _sha256(_served_tarball(server)))
    # the stand-ins come from the tests' cache as usual; the sources are downloaded into it as well
    cache = CACHE
    workdir = tmp_path / "work"
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "rehearse.py"), "onnxruntime-cpp", "--no-sample",
                           "--workdir", str(workdir), "--feedstock", str(feedstock), "--cache", str(cache)],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          env={**os.environ, **_environ(server.base_url)})
    report = json.loads((workdir / "report.json").read_text())
    assert done.returncode == 0 and report["configure_ok"], done.stderr[-3000:] + report["configure_error"]
    assert report["sources"].startswith(f"downloaded {recipe_source(feedstock).url}")
    # ORT's CMake took each dependency from the downloaded archives, whose SHA1 it checks itself
    located = locate(feedstock, cache, CPU_DEPENDENCIES, _environ(_refused_base_url()))
    assert archives_cmake_took(workdir / "src") == set(located.archives.values())


def test_the_render_checks_the_lists_with_orts_cmake_in_the_source_a_rehearsal_downloaded(
        server: Server, feedstock: Path) -> None:
    """Without a mirror, the render finds the tarball where the rehearsal downloads it (the feedstock's
    .cache/rehearsal, which render.py and rehearse.py both use) and refuses a list ORT's CMake would not build."""
    _recipe_expecting(feedstock, _sha256(_served_tarball(server)))
    locate(feedstock, cache_folder(feedstock), (), _environ(server.base_url))
    config = feedstock / "config" / "feedstock.yaml"
    newest = max(CONFIG.cuda.versions, key=version_tuple)
    first = CONFIG.cuda.versions[newest].architectures["linux-64"][0]
    text, count = re.subn(rf'(?ms)^(    "{re.escape(newest)}":\n.*?^        linux-64: \[){re.escape(first)}',
                          rf"\g<1>0{first}", config.read_text(), count=1)
    assert count == 1
    config.write_text(text)
    done = subprocess.run([sys.executable, str(feedstock / "scripts" / "render.py")], capture_output=True, text=True,
                          env={**os.environ, **_environ(_refused_base_url())}, stdin=subprocess.DEVNULL, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "architectures.linux-64: ONNX Runtime's CMake refuses it" in done.stderr, done.stderr
