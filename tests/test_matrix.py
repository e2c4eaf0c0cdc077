"""The committed .ci_support files: a CPU job per platform, and one per CUDA version where CUDA builds."""

from __future__ import annotations

import yaml

from conftest import REPO

CI_SUPPORT = REPO / ".ci_support"


def variant_files() -> dict[str, dict]:
    return {p.stem: yaml.safe_load(p.read_text()) for p in sorted(CI_SUPPORT.glob("*.yaml"))}


def test_there_is_one_cpu_config_per_platform_and_one_per_cuda_version() -> None:
    jobs = sorted((c["target_platform"][0], str(c["cuda_compiler_version"][0])) for c in variant_files().values())
    expected = sorted([(p, cuda) for p in ("linux-64", "linux-aarch64", "win-64") for cuda in ("None", "12.9", "13.0")]
                      + [("osx-arm64", "None")])
    assert jobs == expected


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
