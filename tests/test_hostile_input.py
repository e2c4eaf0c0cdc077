"""Hostile or broken input files: each is refused in one line `file: key: problem`, exit 2, with nothing
written, at once and within bounded memory, in the config and in every YAML file the bot and conda-smithy
own that the render reads."""

from __future__ import annotations

import json
import re
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import OSX_CPU_JOB
from feedstock.inputs import load_config
from feedstock.reader import MAX_BYTES, MAX_DEPTH, MAX_VALUES
from support.tree import snapshot
from support.yaml_files import read_yaml

MIGRATION = ".ci_support/migrations/cuda130.yaml"
# every YAML file a render reads; each is a mapping, so a key appended at its end is read as one of its keys
READ = ["config/feedstock.yaml", "recipe/recipe.yaml", "conda-forge.yml", OSX_CPU_JOB, MIGRATION]
# ten times what a render takes: a regression fails here instead of eating the machine
MEMORY = 512 * 1024 * 1024


def alias_bomb() -> str:
    """Ten lines that a loader which follows aliases expands to 9**9 strings (a 10 KB one ran a render for
    60 s and 5.4 GB before it was killed)."""
    lines = ['zz_a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"zz_{b}: &{b} [{', '.join([f'*{a}'] * 9)}]" for a, b in zip("abcdefgh", "bcdefghi", strict=True)]
    return "\n".join(lines) + "\n"


# what is appended to a file, and the one line a render says of it (`{line}`: the line appended)
HOSTILE: dict[str, tuple[Callable[[], str], str]] = {
    "an alias bomb": (alias_bomb, "line {line}: &a: YAML anchors and aliases are refused, as no input needs them "
                                  "and a few lines of them can expand to gigabytes"),
    "a NUL byte": (lambda: "zz: \0\n", "line {line}: not valid YAML (character #x0000 is not allowed)"),
    "nesting 100,000 deep": (lambda: "zz: " + "[" * 100_000 + "]" * 100_000 + "\n",
                             f"line {{line}}: nested deeper than {MAX_DEPTH} levels"),
    "a 1 MiB value": (lambda: "zz: " + "x" * 1024 * 1024 + "\n",
                      f"(file): {{size:,}} bytes, more than an input may have ({MAX_BYTES // 1024} KiB)"),
    "20,000 values": (lambda: "zz: [" + "a, " * 20_000 + "]\n",
                      f"line {{line}}: more than {MAX_VALUES:,} values, far more than an input has"),
    "a date with a 13th month": (lambda: "zz: 2024-13-45\n", "line {line}: '2024-13-45' cannot be read (month must "
                                                             "be in 1..12)"),
}


def _bounded_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def refused(root: Path) -> list[str]:
    """What a render and a --check of `root` say on stderr, each asserted to exit 2 within bounded memory, with a
    bounded message, having written nothing."""
    before = snapshot(root)
    said = []
    for args in ((), ("--check",)):
        # bounded in memory, not in time, so that a slow machine cannot fail it: an input that expands
        # (an alias bomb ran out to 5.4 GB) breaks the memory bound and exits 1 with a MemoryError
        result = subprocess.run([sys.executable, str(root / "scripts" / "render.py"), *args], capture_output=True,
                                text=True, stdin=subprocess.DEVNULL, timeout=300, preexec_fn=_bounded_memory)
        assert (result.returncode, result.stdout) == (2, ""), result.stderr[-2000:]
        assert len(result.stderr) < 2048, len(result.stderr)
        said.append(result.stderr)
    assert said[0] == said[1]
    assert snapshot(root) == before
    return said[0].splitlines()


@pytest.mark.parametrize(("case", "path"), [
    (case, path) for case in HOSTILE for path in READ
    # conda-forge's migrations are read as text, as conda-smithy reads them: nothing there is a date
    if (case, path) != ("a date with a 13th month", MIGRATION)])
def test_a_hostile_yaml_file_is_one_line_and_exit_2(feedstock: Path, case: str, path: str) -> None:
    append, problem = HOSTILE[case]
    target = feedstock / path
    text = target.read_text()
    target.write_text(text + append())
    (feedstock / "recipe" / "variants.yaml").unlink()  # a render would have to restore it
    lines = refused(feedstock)
    assert lines == [f"{path}: " + problem.format(line=len(text.splitlines()) + 1, size=target.stat().st_size)]


def prefix_summary(config: Path, text: str) -> None:
    """Puts TEXT at the start of the config's summary. Plain string splicing: re.sub would parse a replacement
    of 50 MB as a template, which takes half a minute."""
    head, marker, tail = config.read_text().partition("\n  summary: ")
    assert marker, f"{config} has no summary line"
    config.write_text(head + marker + text + tail)


def test_a_50_mb_summary_is_refused_before_it_is_read(feedstock: Path) -> None:
    config = feedstock / "config" / "feedstock.yaml"
    prefix_summary(config, "x" * 50_000_000 + " ")
    lines = refused(feedstock)
    assert lines == [f"config/feedstock.yaml: (file): {config.stat().st_size:,} bytes, more than an input may have "
                     f"({MAX_BYTES // 1024} KiB)"]


def test_a_summary_of_more_than_a_line_is_refused_and_quoted_in_part(feedstock: Path) -> None:
    config = feedstock / "config" / "feedstock.yaml"
    prefix_summary(config, "x" * 200_000 + " ")
    lines = refused(feedstock)
    assert lines == ["config/feedstock.yaml: feedstock.summary: '" + "x" * 79 + "... is not a one-line summary of at "
                     "most 200 characters"]


@pytest.mark.parametrize("summary", ["ONNX Runtime: the C and C++ library", "ONNX Runtime's C library #1 (CPU)",
                                     'A "quoted" back\\slash, and {{ braces }}'])
def test_a_summary_with_yaml_syntax_in_it_reaches_the_recipe_as_written(feedstock: Path, summary: str) -> None:
    """A ": " would make the recipe's summary a mapping, a " #" would cut it; the recipe gets the text itself."""
    config = feedstock / "config" / "feedstock.yaml"
    written = "    summary: ONNX Runtime's C and C++ library (CPU execution provider)\n"
    config.write_text(config.read_text().replace(written, f"    summary: {json.dumps(summary)}\n"))
    assert load_config(feedstock).outputs.cpp.summary == summary

    done = subprocess.run([sys.executable, str(feedstock / "scripts" / "render.py")], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=300)

    assert done.returncode == 0, done.stderr
    recipe = read_yaml(feedstock / "recipe" / "recipe.yaml")
    summaries = {o["package"]["name"]: o["about"]["summary"] for o in recipe["outputs"] if "package" in o}
    assert summaries["onnxruntime-cpp"] == summary


def test_thousands_of_unknown_keys_are_twenty_lines_and_a_count(feedstock: Path) -> None:
    config = feedstock / "config" / "feedstock.yaml"
    config.write_text(config.read_text() + "".join(f"colour_{i}: blue\n" for i in range(2_000)))
    lines = refused(feedstock)
    assert lines == [f"config/feedstock.yaml: colour_{i}: unknown key" for i in range(20)] + [
        "... and 1,980 more problems"]


def test_a_key_with_control_characters_is_escaped_and_cut(feedstock: Path) -> None:
    config = feedstock / "config" / "feedstock.yaml"
    config.write_text(config.read_text() + '"\\e[2J\\nclear' + "x" * 1000 + '": 1\n')
    lines = refused(feedstock)
    assert lines == ['config/feedstock.yaml: "\\u001b[2J\\nclear' + "x" * 70 + '...": unknown key']


PATCH = "patches/0001-keep-ort-endian-h-off-the-unit-test-include-path.patch"


@pytest.mark.parametrize("where", ["outside the tree", "inside recipe/"])
def test_a_listed_patch_that_is_a_symbolic_link_is_refused(feedstock: Path, tmp_path: Path, where: str) -> None:
    patch = feedstock / "recipe" / PATCH
    target = tmp_path / "elsewhere.patch" if where == "outside the tree" else feedstock / "recipe" / "elsewhere.patch"
    patch.rename(target)
    patch.symlink_to(target)
    assert refused(feedstock) == [f"config/feedstock.yaml: source.patches[0]: recipe/{PATCH} is a symbolic link; a "
                                  "patch is a regular file inside recipe/"]


def test_a_listed_patch_in_a_folder_that_links_out_of_the_recipe_is_refused(feedstock: Path, tmp_path: Path) -> None:
    folder = feedstock / "recipe" / "patches"
    folder.rename(tmp_path / "patches")
    folder.symlink_to(tmp_path / "patches")
    assert refused(feedstock) == [f"config/feedstock.yaml: source.patches[0]: recipe/{PATCH} is outside recipe/: a "
                                  "folder on its way is a symbolic link"]


def test_a_patch_in_the_recipe_that_is_not_listed_is_named(feedstock: Path) -> None:
    (feedstock / "recipe" / "patches" / "0002-forgotten.patch").write_text("--- a/x\n+++ b/x\n")
    assert refused(feedstock) == ["config/feedstock.yaml: source.patches: recipe/patches/0002-forgotten.patch is not "
                                  "listed; list it, or delete it"]


def test_a_conda_forge_yml_of_another_shape_is_one_line(feedstock: Path) -> None:
    forge = feedstock / "conda-forge.yml"
    text, count = re.subn(r"(?m)^build_platform:\n(?:  .*\n)+", "build_platform: [linux_64]\n", forge.read_text())
    assert count == 1
    forge.write_text(text)
    assert refused(feedstock) == [
        "conda-forge.yml: build_platform: Input should be a valid dictionary, got ['linux_64']"]


def test_a_hand_edit_that_adds_a_key_that_is_not_text_is_reported_as_one(feedstock: Path) -> None:
    variants = feedstock / "recipe" / "variants.yaml"
    variants.write_text(variants.read_text() + "? [a]\n: b\n")
    config = feedstock / "config" / "feedstock.yaml"
    config.write_text(config.read_text().replace("16cpu-on-linux", "32cpu-on-linux"))  # a render would rewrite it
    result = subprocess.run([sys.executable, str(feedstock / "scripts" / "render.py")], capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, timeout=60)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "recipe/variants.yaml: (file): edited by hand, and a render would change it" in result.stderr.splitlines()
