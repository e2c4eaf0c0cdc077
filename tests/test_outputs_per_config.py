"""Each output, rendered by rattler-build in every variant of every .ci_support file conda-smithy wrote:
where it builds and what it needs."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

import rattler_render
from conftest import CONFIG, REPO
from feedstock.cuda_targets import number
from feedstock.reader import version_tuple
from support.recipe_checks import RECIPE, Built, Feedstock

PLUGIN = CONFIG.outputs.plugin.name
CPU_OUTPUTS = (CONFIG.outputs.cpp.name, CONFIG.outputs.python.name)
NOVEC_OUTPUTS = (CONFIG.outputs.cpp.novec_name, CONFIG.outputs.python.novec_name)
FLOOR = CONFIG.min_core_version


@pytest.fixture(scope="module")
def feedstock() -> Feedstock:
    return Feedstock(REPO)


def configs_building(feedstock: Feedstock, output: str) -> dict[str, list[Built]]:
    found: dict[str, list[Built]] = defaultdict(list)
    for built in feedstock.built:
        if built.name == output:
            found[built.source].append(built)
    return found


def cuda_version(feedstock: Feedstock, name: str) -> str:
    return str(feedstock.ci_support[name]["cuda_compiler_version"][0])


def names(specs: list[str]) -> set[str]:
    return {spec.split()[0] for spec in specs if isinstance(spec, str)}


def platform_of(feedstock: Feedstock, name: str) -> str:
    return feedstock.ci_support[name]["target_platform"][0]


def test_the_plugin_builds_exactly_in_the_cuda_configs_of_every_cuda_platform(feedstock: Feedstock) -> None:
    cuda_configs = {name for name in feedstock.ci_support if cuda_version(feedstock, name) != "None"}
    assert {platform_of(feedstock, name) for name in cuda_configs} == set(CONFIG.cuda_platforms), cuda_configs
    assert set(configs_building(feedstock, PLUGIN)) == cuda_configs


def test_the_plugin_builds_once_per_cuda_config_whatever_the_python_list(feedstock: Feedstock) -> None:
    for name, built in configs_building(feedstock, PLUGIN).items():
        assert "python" not in set().union(*(b.used_keys for b in built)), name
        assert len(built) == 1, name


def test_the_plugin_pins_cuda_version_to_its_config_and_needs_no_python(feedstock: Feedstock) -> None:
    for name, built in configs_building(feedstock, PLUGIN).items():
        plugin = built[0]
        version = cuda_version(feedstock, name)
        assert f"cuda-version =={version}" in plugin.requirements["host"]
        assert plugin.build_string.endswith("_cuda" + version.replace(".", ""))
        for section in ("host", "run"):
            assert not {"python", "numpy", "pybind11"} & names(plugin.requirements.get(section, [])), (name, section)
        # the build script's interpreter alone, with a version, which keeps python out of the plugin's variants
        build = plugin.requirements["build"]
        assert not {"numpy", "pybind11"} & names(build), name
        assert [spec for spec in build if spec.split()[0] == "python"] == [f"python >={CONFIG.python.minimum}"], name


def test_the_plugin_needs_a_driver_and_cudnn_and_constrains_the_cores(feedstock: Feedstock) -> None:
    for name, built in configs_building(feedstock, PLUGIN).items():
        plugin = built[0]
        assert "__cuda" in plugin.requirements["run"]
        # the major it is built against, which the job's pinning gives its host `cudnn` too
        assert f"cudnn {feedstock.ci_support[name]['cudnn'][0]}.*" in plugin.requirements["run"], name
        constraints = plugin.requirements["run_constraints"]
        # old CUDA builds ship the same library file or a compiled-in CUDA provider: only CPU builds may join
        assert f"{CPU_OUTPUTS[1]} >={FLOOR} *cpu" in constraints
        assert f"{CPU_OUTPUTS[0]} >={FLOOR} *cpu" in constraints


def test_the_plugins_cudnn_follows_a_cudnn_migration(feedstock: Feedstock) -> None:
    """A cuDNN migration changes each job's `cudnn`: the plugin is then built against that major and dlopens its
    libcudnn.so.<major>, so what it requires moves with it."""
    name = next(iter(configs_building(feedstock, PLUGIN)))
    migrated = feedstock.ci_support[name] | {"cudnn": ["10"]}
    platform = platform_of(feedstock, name)
    plugins = [r for r in rattler_render.render(REPO / RECIPE, migrated, platform, feedstock.build_platform(platform))
               if r.name == PLUGIN]
    assert plugins and all("cudnn 10.*" in r.recipe["requirements"]["run"] for r in plugins)


def test_the_plugin_gets_sass_for_each_listed_gpu_and_ptx_for_the_newest(feedstock: Feedstock) -> None:
    """As ORT's CMake reads CMAKE_CUDA_ARCHITECTURES: `NNN-real` is SASS, `NNN-virtual` PTX, and a bare `NNN` SASS
    only (cuda_configuration.cmake), so every entry must say which it is."""
    for name, built in configs_building(feedstock, PLUGIN).items():
        plugin = built[0]
        listed = CONFIG.cuda_lists.get(cuda_version(feedstock, name), plugin.platform)
        entries = plugin.recipe["build"]["script"]["env"]["CUDA_ARCHITECTURES"].split(";")
        sass = [number(e) for e in entries if e.endswith("-real")]
        ptx = [number(e) for e in entries if e.endswith("-virtual")]
        assert len(sass) + len(ptx) == len(entries), (name, entries)
        assert sass == [number(a) for a in listed], name
        assert ptx == [number(listed[-1])], name


@pytest.mark.parametrize(("outputs", "suffix"), [(CPU_OUTPUTS, ""), (NOVEC_OUTPUTS, "-novec")])
def test_the_cpu_outputs_and_their_novec_twins_build_exactly_in_their_cpu_config_of_each_platform(
        feedstock: Feedstock, outputs: tuple[str, str], suffix: str) -> None:
    cpu_configs = {name for name in feedstock.ci_support if cuda_version(feedstock, name) == "None"
                   and feedstock.ci_support[name]["suffix"] == [suffix]}
    assert sorted(platform_of(feedstock, name) for name in cpu_configs) == sorted(CONFIG.platforms), cpu_configs
    for output in outputs:
        assert set(configs_building(feedstock, output)) == cpu_configs, output


def test_a_novec_package_turns_eigens_vectorization_off_and_excludes_its_twin(feedstock: Feedstock) -> None:
    for twin, novec in zip(CPU_OUTPUTS, NOVEC_OUTPUTS, strict=True):
        for name, built in configs_building(feedstock, novec).items():
            for package in built:
                assert package.recipe["build"]["script"]["env"]["ORT_DONT_VECTORIZE"] == "ON", name
                assert f"{twin} <0a0" in package.recipe["requirements"]["run_constraints"], name
    for output in CPU_OUTPUTS:
        for name, built in configs_building(feedstock, output).items():
            assert all(p.recipe["build"]["script"]["env"]["ORT_DONT_VECTORIZE"] == "OFF" for p in built), name


def test_the_plugin_admits_the_novec_cores_as_it_admits_their_twins(feedstock: Feedstock) -> None:
    for name, built in configs_building(feedstock, PLUGIN).items():
        constraints = {spec.split()[0]: spec for spec in built[0].recipe["requirements"]["run_constraints"]}
        for twin, novec in zip(CPU_OUTPUTS, NOVEC_OUTPUTS, strict=True):
            assert constraints[novec] == constraints[twin].replace(twin, novec, 1), name


def test_the_python_package_is_built_once_per_python_in_the_configs_range(feedstock: Feedstock) -> None:
    minimum = version_tuple(CONFIG.python.minimum)
    maximum = version_tuple(CONFIG.python.maximum) if CONFIG.python.maximum else None
    for name, built in configs_building(feedstock, CPU_OUTPUTS[1]).items():
        listed = [value.split(".*")[0] for value in feedstock.ci_support[name]["python"]]
        expected = ["py" + v.replace(".", "") for v in listed
                    if minimum <= version_tuple(v) and (maximum is None or version_tuple(v) <= maximum)]
        assert sorted(b.build_string.split("h")[0] for b in built) == sorted(expected), name
        assert all(b.build_string.endswith("_cpu") for b in built)


def test_every_file_the_recipe_names_is_in_the_recipe_folder(feedstock: Feedstock) -> None:
    recipe_dir = REPO / "recipe"
    for output in feedstock.recipe["outputs"]:
        script = output["build"]["script"]["file"]
        # every output builds on win-64 as well as on unix, with one Python script (rattler-build picks the
        # interpreter by the extension)
        assert Path(script).suffix == ".py" and (recipe_dir / script).is_file(), script
        for test in output.get("tests", []):
            for name in (test.get("files") or {}).get("recipe", []):
                assert (recipe_dir / name).exists(), (output["package"]["name"], name)


def test_cross_compiled_python_builds_use_cross_python_and_native_ones_do_not(feedstock: Feedstock) -> None:
    for name, built in configs_building(feedstock, CPU_OUTPUTS[1]).items():
        platform = built[0].platform
        crossing = feedstock.build_platform(platform) != platform
        for b in built:
            assert (f"cross-python_{platform}" in b.requirements["build"]) == crossing, (name, b.build_string)
