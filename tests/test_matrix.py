"""The committed .ci_support files: the ten jobs the brief describes, named as conda-smithy names them."""

from __future__ import annotations

import re
from collections import defaultdict

import yaml

from conftest import REPO

CI_SUPPORT = REPO / ".ci_support"


def variant_files() -> dict[str, dict]:
    return {p.stem: yaml.safe_load(p.read_text()) for p in sorted(CI_SUPPORT.glob("*.yaml"))}


def conda_smithy_name(platform: str, config: dict, split_keys: set[str]) -> str:
    key = "".join(k + str(config[k][0]) for k in sorted(split_keys) if k != "target_platform")
    name = platform.replace("-", "_") + "_" + key.replace("*", "_").replace(" ", "_")
    return re.sub(r'[<>:?*,"/|\\]', "", name)


def test_there_are_exactly_the_ten_described_configs() -> None:
    jobs = sorted((c["target_platform"][0], str(c["cuda_compiler_version"][0])) for c in variant_files().values())
    expected = sorted([(p, cuda) for p in ("linux-64", "linux-aarch64", "win-64") for cuda in ("None", "12.9", "13.0")]
                      + [("osx-arm64", "None")])
    assert jobs == expected


def test_every_file_name_follows_conda_smithys_rule() -> None:
    by_platform: dict[str, dict[str, dict]] = defaultdict(dict)
    for stem, config in variant_files().items():
        by_platform[config["target_platform"][0]][stem] = config
    for platform, configs in by_platform.items():
        # the split keys are exactly the ones whose single value differs between a platform's files
        keys = set.union(*(set(c) for c in configs.values()))
        split = {k for k in keys if len({str(c.get(k)) for c in configs.values()}) > 1}
        for stem, config in configs.items():
            assert all(len(config[k]) == 1 for k in split)
            assert stem == conda_smithy_name(platform, config, split)


def test_cuda_13_configs_use_the_newer_glibc_on_linux() -> None:
    for config in variant_files().values():
        if config["target_platform"][0].startswith("linux"):
            expected = "2.28" if config["cuda_compiler_version"] == ["13.0"] else "2.17"
            assert config["c_stdlib_version"] == [expected]


def test_cpu_configs_carry_python_3_11_to_3_14() -> None:
    for config in variant_files().values():
        if config["cuda_compiler_version"] == ["None"]:
            versions = [v.split(".*")[0] for v in config["python"]]
            assert versions == ["3.11", "3.12", "3.13", "3.14"]


def test_cross_compiled_aarch64_builds_in_the_x86_64_image() -> None:
    for stem, config in variant_files().items():
        if stem.startswith("linux_"):
            assert config["docker_image"] == ["quay.io/condaforge/linux-anvil-x86_64:alma10"]


def test_the_migrations_the_matrix_relies_on_are_kept() -> None:
    migrations = {p.name: yaml.safe_load(p.read_text()) for p in (CI_SUPPORT / "migrations").glob("*.yaml")}
    assert migrations["cuda130.yaml"]["__migrator"]["primary_key"] == "cuda_compiler_version"
    assert migrations["python314.yaml"]["__migrator"]["primary_key"] == "python"
    assert migrations["cuda130.yaml"]["cuda_compiler_version"] == [13.0]
    assert migrations["python314.yaml"]["python"] == ["3.14.* *_cp314"]
