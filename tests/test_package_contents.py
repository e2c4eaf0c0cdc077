"""The plugin's package_contents test as rattler-build runs it when it packages the plugin.

The test is strict: a file in the package that none of its globs matches fails the build. rattler-build
also puts the files of the recipe's test sections into the package (etc/conda/test-files/<name>/), which
the first GPU build of the package showed ("Strict mode: 7 unmatched files found",
docs/gpu-runs/2026-12-02-packages.md). Here rattler-build packages the files the test lists, with the
recipe's own test sections as rendered for the newest linux-64 CUDA job.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import NEWEST_CUDA_JOB, REPO
from support.yaml_files import read_yaml

from rattler_render import render

PLUGIN = "onnxruntime-ep-cuda"


def plugin_tests() -> list[dict]:
    lists = read_yaml(NEWEST_CUDA_JOB)
    # the job's file lists every Python, which the plugin does not read: each variant renders the same tests
    plugin = next(r for r in render(REPO / "recipe" / "recipe.yaml", lists, "linux-64", "linux-64") if r.name == PLUGIN)
    return plugin.recipe["tests"]


# rattler-build packages in a child process: its worker threads can abort the interpreter's shutdown, which
# must never be pytest's
PACKAGE = """
import os, sys
from pathlib import Path
from rattler_build import Stage0Recipe, ToolConfiguration, VariantConfig
recipe_dir, scratch = Path(sys.argv[1]), Path(sys.argv[2])
(variant,) = Stage0Recipe.from_file(recipe_dir / "recipe.yaml").render(VariantConfig())
try:
    variant.run_build(tool_config=ToolConfiguration(test_strategy="skip"), output_dir=scratch / "output",
                      channels=[(scratch / "channel").as_uri()], no_build_id=True)
    print("ok")
except Exception as error:  # rattler-build's PyBuildError: its message says which check failed
    print(error)
sys.stdout.flush()
os._exit(0)
"""


def package(tests: list[dict], scratch: Path) -> str:
    """rattler-build's verdict on a package that holds exactly the files the contents test names, with these
    test sections: "ok", or its error."""
    (contents,) = [t["package_contents"] for t in tests if "package_contents" in t]
    named = [f for f in contents["files"] if "*" not in f]
    recipe_dir = scratch / "recipe"
    shutil.copytree(REPO / "recipe", recipe_dir)
    recipe = {"package": {"name": PLUGIN, "version": "0"},
              "build": {"number": 0,
                        "script": [f'mkdir -p "$(dirname "$PREFIX/{f}")" && touch "$PREFIX/{f}"' for f in named]},
              "tests": tests}
    (recipe_dir / "recipe.yaml").write_text(json.dumps(recipe))
    (scratch / "channel").mkdir()
    done = subprocess.run([sys.executable, "-c", PACKAGE, str(recipe_dir), str(scratch)], capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip()


def test_the_strict_contents_test_accepts_the_package_rattler_build_makes(tmp_path: Path) -> None:
    assert package(plugin_tests(), tmp_path) == "ok"


def test_without_the_test_files_glob_the_strict_contents_test_fails(tmp_path: Path) -> None:
    tests = plugin_tests()
    for test in tests:
        if "package_contents" in test:
            kept = [f for f in test["package_contents"]["files"] if not f.startswith("etc/conda/test-files/")]
            assert len(kept) < len(test["package_contents"]["files"])
            test["package_contents"]["files"] = kept
    if not any("files" in t for t in tests if "script" in t):
        pytest.skip("no test section carries recipe files, so rattler-build adds none to the package")
    assert "unmatched" in package(tests, tmp_path)
