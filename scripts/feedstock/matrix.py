"""Stage 2: the build matrix, as conda-smithy derives it from the pinning and the recipe.

conda-smithy renders the recipe for every combination of the pinning's values, notes which keys each
built output reads, and writes one `.ci_support` file per value of the keys that every output loops
over (`_collapse_subpackage_variants` in conda_smithy/configure_feedstock.py). The keys each output
reads are declared here, next to the skip rule that decides where it is built; the test suite
evaluates the rendered recipe independently and checks that both agree.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import InputError
from .inputs import CONFIG, PINNING, Config, Platform
from .reader import Node, load_yaml

NONE = "None"  # how conda-forge spells "no CUDA" in cuda_compiler_version
# A variant file's content as conda-smithy writes it: mostly lists of strings, plus zip_keys (lists of
# lists) and pin_run_as_build (a mapping); it is YAML-shaped data, typed as such.
VariantValues = dict[str, Any]

# Keys conda-smithy keeps in every file whenever the pinning has them, used or not.
ALWAYS_KEPT = ("channel_sources", "channel_targets", "docker_image", "github_actions_labels",
               "MACOSX_DEPLOYMENT_TARGET", "MACOSX_SDK_VERSION", "macos_machine", "pin_run_as_build",
               "target_platform", "zip_keys")

_COMPILER_KEYS = ("c_compiler", "c_compiler_version", "cxx_compiler", "cxx_compiler_version",
                  "c_stdlib", "c_stdlib_version")
# What each output reads, by conda-smithy's rule: a variable in a skip, selector or ${{ }}, compiler()
# and stdlib(), and every host/build dependency named without a version.
USED_KEYS = {
    "plugin": frozenset({"target_platform", "cuda_compiler", "cuda_compiler_version", "cudnn", *_COMPILER_KEYS}),
    "cpp": frozenset({"target_platform", "cuda_compiler_version", *_COMPILER_KEYS}),
    "python": frozenset({"target_platform", "cuda_compiler_version", "python", "numpy", *_COMPILER_KEYS}),
}


def is_built(output: str, variant: dict[str, str]) -> bool:
    """The recipe's skip rules: the plugin only with CUDA, the CPU outputs only without."""
    cuda = variant.get("cuda_compiler_version", NONE) != NONE
    return cuda if output == "plugin" else not cuda


@dataclass(frozen=True)
class Pinning:
    snapshot: str
    zip_keys: dict[str, tuple[tuple[str, ...], ...]]  # by OS
    docker_image: dict[str, str]  # by build platform
    common: VariantValues
    platforms: dict[str, dict[str, list[str]]]  # by platform name or OS

    def values_for(self, platform: Platform) -> VariantValues:
        """Every key's values for one target platform, the way the selectors would leave them."""
        specific = self.platforms.get(platform.name, self.platforms.get(platform.os))
        if specific is None:
            raise InputError(PINNING, "platforms", f"no entry for {platform.name} (nor for {platform.os})")
        values: VariantValues = {**self.common, **specific, "target_platform": [platform.name]}
        if platform.macos_sdk:
            values["MACOSX_SDK_VERSION"] = [platform.macos_sdk]
        if platform.os == "linux":
            image = self.docker_image.get(platform.build_platform)
            if image is None:
                raise InputError(PINNING, "docker_image", f"no image for build platform {platform.build_platform}")
            values["docker_image"] = [image]
        return values


def load_pinning(root: Path) -> Pinning:
    top = Node(load_yaml(root / PINNING, PINNING), PINNING, "")
    fields = top.mapping({"snapshot", "zip_keys", "docker_image", "common", "platforms"})
    zip_keys = {
        os_name: tuple(tuple(key.text() for key in group.items()) for group in groups.items())
        for os_name, groups in fields["zip_keys"].entries().items()
    }
    platforms = {}
    for name, entry in fields["platforms"].entries().items():
        platforms[name] = {key: [v.text() for v in values.items()] for key, values in entry.entries().items()}
    common = {}
    for key, values in fields["common"].entries().items():
        common[key] = values.value if key == "pin_run_as_build" else [v.text() for v in values.items()]
    return Pinning(
        snapshot=fields["snapshot"].text(),
        zip_keys=zip_keys,
        docker_image={k: v.text() for k, v in fields["docker_image"].entries().items()},
        common=common,
        platforms=platforms,
    )


@dataclass(frozen=True)
class CiConfig:
    """One `.ci_support/<name>.yaml`: one CI job."""

    name: str
    platform: Platform
    values: VariantValues
    builds: tuple[str, ...] = field(default=())  # output keys built in this job

    @property
    def cuda_version(self) -> str | None:
        version = self.values["cuda_compiler_version"][0]
        return None if version == NONE else version

    @property
    def pythons(self) -> tuple[str, ...]:
        return tuple(v.split(".*")[0] for v in self.values.get("python", [])) if "python" in self.builds else ()


def _variants(values: VariantValues, zip_groups: tuple[tuple[str, ...], ...]) -> list[dict[str, str]]:
    """The cartesian product of the lists, zipped keys moving together."""
    listed = {k: v for k, v in values.items() if isinstance(v, list)}
    axes: list[list[dict[str, str]]] = []
    zipped: set[str] = set()
    for group in zip_groups:
        present = [k for k in group if k in listed]
        if not present:
            continue
        lengths = {len(listed[k]) for k in present}
        if len(lengths) != 1:
            raise InputError(PINNING, "zip_keys", f"{', '.join(present)} have different lengths {sorted(lengths)}")
        axes.append([{k: listed[k][i] for k in present} for i in range(lengths.pop())])
        zipped.update(present)
    for key, options in listed.items():
        if key not in zipped:
            axes.append([{key: option} for option in options])
    return [dict(kv for part in combo for kv in part.items()) for combo in itertools.product(*axes)]


def ci_support_name(platform: Platform, config: VariantValues, split_keys: set[str]) -> str:
    """conda-smithy's `package_key`, prefixed with the platform (`dump_subspace_config_files`)."""
    key = "".join(k + str(config[k][0]) for k in sorted(split_keys) if k != "target_platform")
    name = f"{platform.name.replace('-', '_')}_" + key.replace("*", "_").replace(" ", "_")
    return re.sub(r'[<>:?*,"/|\\]', "", name)


def _loop_keys(values: VariantValues) -> set[str]:
    return {k for k, v in values.items() if isinstance(v, list) and len(v) > 1}


def platform_configs(platform: Platform, pinning: Pinning) -> list[CiConfig]:
    values = pinning.values_for(platform)
    zip_groups = pinning.zip_keys.get(platform.os, ())
    loop_keys = _loop_keys(values)
    built = [(out, v) for v in _variants(values, zip_groups) for out in USED_KEYS if is_built(out, v)]
    all_used = set().union(*(USED_KEYS[out] & set(v) for out, v in built))
    split = set.intersection(*(set(USED_KEYS[out]) & loop_keys for out, _ in built)) if built else set()

    kept = {k: v for k, v in values.items() if k in all_used or k in ALWAYS_KEPT}
    groups = [tuple(k for k in g if k in all_used) for g in zip_groups]
    groups = [g for g in groups if len(g) > 1]
    if groups:
        kept["zip_keys"] = [list(g) for g in groups]
    if "pin_run_as_build" in kept:
        kept["pin_run_as_build"] = {k: v for k, v in kept["pin_run_as_build"].items() if k in all_used}
        if not kept["pin_run_as_build"]:
            del kept["pin_run_as_build"]

    configs = []
    split_groups = tuple(tuple(k for k in g if k in split) for g in groups) + tuple(
        (k,) for k in sorted(split) if not any(k in g for g in groups))
    for combo in _variants({k: kept[k] for k in split}, split_groups) if split else [{}]:
        config = {k: (sorted(v) if isinstance(v, list) and k != "zip_keys" else v) for k, v in kept.items()}
        config.update({k: [value] for k, value in combo.items()})
        job_variants = _variants({k: v for k, v in config.items() if k != "zip_keys"}, tuple(groups))
        builds = tuple(out for out in USED_KEYS if any(is_built(out, v) for v in job_variants))
        configs.append(CiConfig(ci_support_name(platform, config, split), platform, config, builds))
    return configs


def _check_cuda_versions(config: Config, pinning: Pinning) -> None:
    """The config's CUDA versions must be exactly what the pinning offers each CUDA platform."""
    wanted = sorted(c.version for c in config.cuda_versions)
    for platform in config.platforms:
        offered = sorted(v for v in pinning.values_for(platform).get("cuda_compiler_version", []) if v != NONE)
        expected = wanted if platform.cuda else []
        if offered != expected:
            raise InputError(
                CONFIG, "cuda.versions" if platform.cuda else f"platforms.{platform.name}.cuda",
                f"{platform.name} gets CUDA {offered or 'none'} from {PINNING}, the config says {expected or 'none'}",
            )


def _python_version(variant_value: str) -> tuple[int, ...]:
    """`3.13.* *_cp313` -> (3, 13)"""
    return tuple(int(part) for part in variant_value.split(".*")[0].split("."))


def _check_python_versions(config: Config, pinning: Pinning) -> None:
    """The recipe skips no Python, so every one the pinning offers must lie in the config's range."""
    low = _python_version(config.python_minimum)
    high = _python_version(config.python_maximum) if config.python_maximum else None
    for platform in config.platforms:
        for value in pinning.values_for(platform).get("python", []):
            version = _python_version(value)
            if version < low or (high is not None and version > high):
                key = "python.minimum" if version < low else "python.maximum"
                raise InputError(CONFIG, key, f"{PINNING} offers {platform.name} Python {value.split('.*')[0]}, "
                                              "outside the config's range, and the recipe builds every Python it gets")


def build_matrix(config: Config, pinning: Pinning) -> list[CiConfig]:
    _check_cuda_versions(config, pinning)
    _check_python_versions(config, pinning)
    configs = [c for platform in config.platforms for c in platform_configs(platform, pinning)]
    return sorted(configs, key=lambda c: c.name)
