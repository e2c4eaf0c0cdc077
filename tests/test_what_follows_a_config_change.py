"""The README's table of what to run after each change of the config, checked against the real tools.

Every key of the config has a row. A change whose row says render only leaves the real conda-smithy's
rerender with nothing to change once rendered; a change whose row says rerender does change what
conda-smithy writes, while the render alone is already current.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CONFIG, REPO
from feedstock.reader import version_tuple
from support.smithy import Smithy
from support.clean_clone import clean_copy, git

def _without_first_architecture() -> tuple[str, str]:
    """The newest listed CUDA's win-64 list, as the config writes it, and the same list less its first entry."""
    newest = max(CONFIG.cuda.versions, key=version_tuple)
    text = (REPO / "config" / "feedstock.yaml").read_text()
    line = re.search(rf'(?ms)^    "{re.escape(newest)}":\n.*?^(        win-64: \[[^\]]*\])$', text).group(1)
    return line, re.sub(r"\[[^,\]]+, ", "[", line, count=1)


# One representative change per key: (the config's text, what it becomes).
CHANGES = {
    "feedstock.name": ("  name: onnxruntime\n  summary", "  name: onnxruntime-renamed\n  summary"),
    "feedstock.summary": ("summary: ONNX Runtime, with", "summary: ONNX Runtime (renamed), with"),
    "about.homepage": ("homepage: https://onnxruntime.ai/", "homepage: https://onnxruntime.ai/docs/"),
    "license.spdx": ("  spdx: MIT\n  files", "  spdx: Apache-2.0\n  files"),
    "license.vendored": ("    - {dep: gsl, spdx: MIT, file: LICENSE}\n", ""),
    "maintainers": ("  - hmaarrfk\n", "  - hmaarrfk\n  - someone-else\n"),
    "source.url": ("tags/v{version}.tar.gz", "tags/v{version}.tar.gz?mirror"),
    "min_core_version": (f'min_core_version: "{CONFIG.min_core_version}"', 'min_core_version: "99.0.0"'),
    "cudnn.as": ("  as: run", "  as: constraint"),
    "python.minimum": (f'minimum: "{CONFIG.python.minimum}"', f'minimum: "3.{int(CONFIG.python.minimum[2:]) + 1}"'),
    "python.requirements": ("    - packaging\n", "    - packaging\n    - sympy\n"),
    "outputs.<output>.name": ("name: onnxruntime-ep-cuda\n", "name: onnxruntime-ep-cuda-renamed\n"),
    "outputs.plugin.ep_name": ("ep_name: CUDAExecutionProvider", "ep_name: CudaEP"),
    "cuda.nvcc_threads": (f"  nvcc_threads: {CONFIG.cuda.nvcc_threads}",
                          f"  nvcc_threads: {CONFIG.cuda.nvcc_threads + 1}"),
    "cuda.versions.<version>.architectures.<platform>": _without_first_architecture(),
    "platforms.<platform>.macos_sdk": ('macos_sdk: "13.3"', 'macos_sdk: "14.0"'),
    "runners.<os>": ("16cpu-on-win-64\n", "32cpu-on-win-64\n"),
    "runner_size.free_gib": (f"  free_gib: {CONFIG.runner_size.free_gib}",
                             f"  free_gib: {CONFIG.runner_size.free_gib - 2}"),
}
# Keys under these hold names (platforms, versions, OSes, outputs), not a fixed vocabulary: rows name them so.
PLACEHOLDERS = {"platforms": "<platform>", "versions": "<version>", "architectures": "<platform>",
                "runners": "<os>", "outputs": "<output>"}
# Keys only the plugin output has, which rows name as such
PLUGIN_ONLY = ("ep_name", "library.unix", "library.win")
BOT_FIELDS = {"context.version", "source.sha256", "build.number"}
# keys the config may leave out (python.maximum: no upper bound), which a row names all the same
OPTIONAL = {"python.maximum"}


def readme_rows() -> dict[str, str]:
    """Each key the README's table names -> what it says to run."""
    section = (REPO / "README.md").read_text().split("What to run after each change", 1)[1].split("\n\n", 2)[1]
    rows = {}
    for keys, then in re.findall(r"^\| (.+) \| ([^|]+) \|$", section, re.MULTILINE):
        for key in re.findall(r"`([^`/]+)`", re.sub(r" \([^)]*\)", "", keys)):
            rows[key] = then.strip()
    return rows


def config_keys() -> set[str]:
    """The config's keys down to their values, names that are data shown as their placeholder."""
    def walk(value: object, path: tuple[str, ...]) -> set[str]:
        if not isinstance(value, dict) or not value:
            return {".".join(path)}
        parent = path[-1] if path else ""
        return set().union(*(walk(inner, (*path, PLACEHOLDERS.get(parent, str(name))))
                             for name, inner in value.items()))

    # the keys the config gives: a value left at its default is not in the file
    keys = walk(CONFIG.model_dump(by_alias=True, exclude_defaults=True), ())
    plugin_only = {f"outputs.<output>.{key}" for key in PLUGIN_ONLY}
    return keys - plugin_only | {f"outputs.plugin.{key}" for key in PLUGIN_ONLY}


def test_every_config_key_has_a_row_saying_what_to_run() -> None:
    assert sorted(config_keys() - set(readme_rows())) == []


def test_the_table_names_no_key_the_config_does_not_have() -> None:
    keys = config_keys()
    # a row may name a key whose entries are added or dropped
    keys |= {key.rsplit(".", n)[0] for key in keys for n in range(1, key.count(".") + 1)}
    assert sorted(set(readme_rows()) - keys - BOT_FIELDS - OPTIONAL) == []


def _apply(root: Path, keys: list[str]) -> None:
    config = root / "config" / "feedstock.yaml"
    text = config.read_text()
    for key in keys:
        old, new = CHANGES[key]
        assert old in text, key
        text = text.replace(old, new, 1)
    config.write_text(text)


def _render(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(root / "scripts" / "render.py"), *args], capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=120)


def test_the_changes_that_need_only_a_render_leave_the_rerender_nothing_to_do(conda_smithy: Smithy,
                                                                                tmp_path: Path) -> None:
    rows = readme_rows()
    render_only = [key for key in CHANGES if rows[key] == "render"]
    # a sample, but one that reaches every section of the config the table says needs only a render
    assert {key.split(".")[0] for key in render_only} == {key.split(".")[0] for key, then in rows.items()
                                                         if then == "render"}
    root = clean_copy(tmp_path)
    _apply(root, render_only)
    assert _render(root).returncode == 0
    git(root, "add", "--all")
    git(root, "commit", "--quiet", "-m", "config changes")
    result = conda_smithy.rerender(root)
    assert result.returncode == 0, result.stderr[-4000:]
    assert git(root, "status", "--porcelain", "--untracked-files=all") == ""


@pytest.mark.parametrize("key", ["platforms.<platform>.macos_sdk", "runners.<os>"])
def test_a_change_the_rerender_follows_is_said_so(conda_smithy: Smithy, tmp_path: Path, key: str) -> None:
    root = clean_copy(tmp_path)
    _apply(root, [key])
    assert _render(root).returncode == 0
    assert _render(root, "--check").returncode == 0
    git(root, "add", "--all")
    git(root, "commit", "--quiet", "-m", "config change")
    result = conda_smithy.rerender(root)
    assert result.returncode == 0, result.stderr[-4000:]
    changed = git(root, "status", "--porcelain", "--untracked-files=all")
    assert ".ci_support/" in changed
    assert "rerender" in readme_rows()[key]
