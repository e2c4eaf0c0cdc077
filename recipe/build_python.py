"""onnxruntime (Python), CPU execution provider only: builds the bindings module with ORT linked in
statically, packs it with upstream's setup.py, installs the wheel, then adds conda-forge's EP plugin
auto-registration. One script for unix and Windows: rattler-build runs it with the build (or, where
the build environment has none, the host) environment's Python.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

from cmake_common import configure, fail, linker_flags, run, stop_here_if_rehearsed, target_platform

# the wheel platform tag of each platform the recipe cross-compiles the package for
CROSS_WHEEL_TAGS = {"linux-aarch64": "linux_aarch64"}


def target_python_says(env: Mapping[str, str], code: str) -> str:
    """What the target's interpreter ($PYTHON; cross-python's, when cross-compiling) prints for `code`."""
    done = subprocess.run([env["PYTHON"], "-c", code], env=dict(env), capture_output=True, text=True, check=False)
    if done.returncode != 0 or not done.stdout.strip():
        fail(f"`{env['PYTHON']} -c '{code}'` exited {done.returncode} and said {done.stdout.strip()!r}: "
             f"{done.stderr.strip()}")
    return done.stdout.strip()


def main(env: dict[str, str]) -> None:
    # --- environment
    os.chdir(env["SRC_DIR"])
    env["LDFLAGS"] = linker_flags(env)
    platform = target_platform(env)
    # setup.py reads VERSION_NUMBER and the package tree from the build directory, where it runs
    bdist_wheel = [env["PYTHON"], str(Path(env["SRC_DIR"], "setup.py")), "bdist_wheel"]
    if env.get("CONDA_BUILD_CROSS_COMPILATION") == "1":
        if platform not in CROSS_WHEEL_TAGS:
            fail(f"no wheel platform tag is known for cross-compiling to {platform}")
        bdist_wheel += ["--plat-name", CROSS_WHEEL_TAGS[platform]]
        # FindPython has to run an interpreter of the build machine; the target's headers come from
        # cross-python's $PYTHON, which reports the target's paths
        python_cmake_args = [
            f"-DPython_EXECUTABLE={env['BUILD_PREFIX']}/bin/python",
            "-DPython_INCLUDE_DIR=" + target_python_says(env, 'import sysconfig; print(sysconfig.get_path("include"))'),
            "-DPython_NumPy_INCLUDE_DIR=" + target_python_says(env, "import numpy; print(numpy.get_include())"),
        ]
    else:
        python_cmake_args = [f"-DPython_EXECUTABLE={env['PYTHON']}"]

    # --- configure
    configure(env, ["-Donnxruntime_ENABLE_PYTHON=ON", "-Donnxruntime_BUILD_SHARED_LIB=OFF",
                    "-Donnxruntime_BUILD_UNIT_TESTS=OFF", *python_cmake_args])

    # --- build
    # its POST_BUILD steps lay out the Python package in the build folder's onnxruntime/
    build_targets = ["onnxruntime_pybind11_state"]
    if not platform.startswith("osx-"):
        # onnxruntime_pybind11_state's POST_BUILD step copies this library into the package tree without
        # depending on it (cmake/onnxruntime_python.cmake), so it must exist first; macOS does not build it
        build_targets.insert(0, "onnxruntime_providers_shared")
    stop_here_if_rehearsed(env, build_targets)
    # one target at a time: given both at once, ninja would build them side by side
    for target in build_targets:
        run(["cmake", "--build", env["ORT_BUILD_DIR"], "--target", target], env)

    # --- install
    run(bdist_wheel, env, cwd=env["ORT_BUILD_DIR"])
    wheels = sorted(Path(env["ORT_BUILD_DIR"], "dist").glob("*.whl"))
    if len(wheels) != 1:
        fail(f"setup.py bdist_wheel left {len(wheels)} wheels in {env['ORT_BUILD_DIR']}/dist, not one")
    run([env["PYTHON"], "-m", "pip", "install", "--no-deps", "--no-build-isolation", str(wheels[0])], env)
    # conda-forge's auto-registration of the EP plugins installed in this environment: copies
    # ep_autoregister.py to onnxruntime/_conda_ep_autoregister.py and its manifest reader beside it,
    # appends init_hook.py to onnxruntime/__init__.py and adds the upstream-compatible
    # onnxruntime_ep_cuda helper package
    run([env["PYTHON"], str(Path(env["RECIPE_DIR"], "python", "install_autoregistration.py")), env["SP_DIR"]], env)


if __name__ == "__main__":
    main(dict(os.environ))
