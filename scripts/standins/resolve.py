"""Every linux-64 job's requirements resolved against the stand-in channel, by rattler-build and rattler.

For each `.ci_support` file of linux-64, rattler-build renders the recipe with that variant file and
solves each output's build and host environments (`rattler-build build --render-only --with-solve`),
which also gives the output's run requirements with every run_export applied. Each test section with
requirements is then solved by rattler's solver as rattler-build makes a test environment: the output's
run requirements plus the test's own. A requirement the channel cannot meet (a misspelled name, an
impossible pin) fails the job and is named.

The variant file is the committed one, less `channel_sources` and `channel_targets`: rattler-build takes
its channels from them or from the caller, not both, and here the channel is the stand-ins'.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from feedstock.reader import load_yaml
from standins import StandinError

# the machine a linux-64 job's tests run on, as its solver sees it: a CUDA 13 driver and glibc 2.28
# (conda-forge's alma 8+ images); each CUDA job's own version is asked for through its run requirements
VIRTUAL = {"CONDA_OVERRIDE_CUDA": "13.9", "CONDA_OVERRIDE_GLIBC": "2.28"}
CHANNEL_ONLY_KEYS = ("channel_sources", "channel_targets")


@dataclass
class Environment:
    section: str  # build, host or test N
    specs: list[str]
    resolved: list[str] = field(default_factory=list)  # name version build
    error: str = ""


@dataclass
class Output:
    name: str
    variant: dict[str, str]
    environments: list[Environment] = field(default_factory=list)


def variant_file(job_file: Path, scratch: Path, overrides: dict[str, str] | None = None) -> Path:
    """The job's variant file in `scratch`, less CHANNEL_ONLY_KEYS, with `overrides` as single values."""
    lists = load_yaml(job_file, str(job_file)) | {k: [v] for k, v in (overrides or {}).items()}
    for key in CHANNEL_ONLY_KEYS:
        lists.pop(key, None)
    path = scratch / job_file.name
    path.write_text(yaml.safe_dump(lists))
    return path


def render_with_solve(recipe: Path, variants: Path, channel: Path) -> list[dict]:
    """rattler-build's `--render-only --with-solve` for linux-64, in a child process (it prints its
    result), with the machine's virtual packages set as VIRTUAL says."""
    program = (
        "import sys, warnings\n"
        "warnings.simplefilter('ignore')\n"
        "from rattler_build import build_recipes\n"
        "build_recipes([sys.argv[1]], render_only=True, with_solve=True, target_platform='linux-64',\n"
        "              build_platform='linux-64', channel=[sys.argv[2]], variant_config=[sys.argv[3]],\n"
        "              ignore_recipe_variants=True)\n"
    )
    done = subprocess.run([sys.executable, "-c", program, str(recipe), channel.as_uri(), str(variants)],
                          capture_output=True, text=True, env=os.environ | VIRTUAL, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        said = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        raise StandinError(f"{variants.name}: rattler-build could not resolve the recipe "
                           f"({said[-1] if said else 'no output'})")
    return json.loads(done.stdout)


def _records(resolved: dict | None) -> list[str]:
    if not resolved:
        return []
    return [f"{r['name']} {r['version']} {r['build']}" for r in resolved.get("resolved", [])]


def _run_specs(finalized: dict, key: str = "depends") -> list[str]:
    """The output's run requirements (`depends`) or constraints (`constraints`), run_exports applied."""
    run = finalized.get("run") or {}
    return [d.get("spec") or d.get("source") for d in run.get(key, [])]


def _test_requirements(test: dict) -> list[str]:
    requirements = test.get("requirements") or {}
    return [*requirements.get("run", []), *requirements.get("build", [])]


def solve_test(channel: Path, specs: list[str], constraints: list[str] = ()) -> list[str]:
    import rattler
    from rattler import VirtualPackage, VirtualPackageOverrides
    from rattler.virtual_package import Override

    virtual = VirtualPackage.detect(VirtualPackageOverrides(cuda=Override.string(VIRTUAL["CONDA_OVERRIDE_CUDA"]),
                                                            libc=Override.string(VIRTUAL["CONDA_OVERRIDE_GLIBC"])))
    records = asyncio.run(rattler.solve(sources=[channel.as_uri()], specs=specs, platforms=["linux-64", "noarch"],
                                        virtual_packages=virtual, constraints=list(constraints)))
    return sorted(f"{r.name.normalized} {r.version} {r.build}" for r in records)


def _why(recipe: Path, variants: Path, channel: Path) -> str:
    """What rattler-build's bare "Failed to resolve dependencies" was about: each output's build and host
    lists (as rattler-build evaluates them, run_exports aside) given to rattler's solver, whose message
    names what it cannot find."""
    from rattler_render import render

    reasons = []
    lists = load_yaml(variants, str(variants))
    for output in render(recipe, lists, "linux-64", "linux-64"):
        for section in ("build", "host"):
            specs = [str(s) for s in output.recipe.get("requirements", {}).get(section, [])]
            try:
                solve_test(channel, specs)
            except Exception as error:  # noqa: BLE001 - rattler's errors share no base; each list is tried
                # rattler's SolverError: it names the missing package
                reasons.append(f"{output.name} {section}: {' '.join(str(error).split())}")
    return "; ".join(dict.fromkeys(reasons)) or "rattler's solver finds every build and host list solvable on its own"


def resolve_job(recipe: Path, job_file: Path, channel: Path) -> list[Output]:
    """Every output the job builds, with its build, host and test environments resolved or failed."""
    with tempfile.TemporaryDirectory() as scratch:
        variants = variant_file(job_file, Path(scratch))
        try:
            rendered = render_with_solve(recipe, variants, channel)
        except StandinError as error:
            raise StandinError(f"{error}: {_why(recipe, variants, channel)}") from None
    outputs = []
    for entry in rendered:
        stage1 = entry["recipe"]
        finalized = entry.get("finalized_dependencies") or {}
        variant = {k: str(v) for k, v in (entry.get("build_configuration", {}).get("variant") or {}).items()}
        output = Output(stage1["package"]["name"], variant)
        for section in ("build", "host"):
            if finalized.get(section):
                specs = [str(s) for s in stage1.get("requirements", {}).get(section, [])]
                output.environments.append(Environment(section, specs, _records(finalized[section])))
        run, constraints = _run_specs(finalized), _run_specs(finalized, "constraints")
        for number, test in enumerate(stage1.get("tests", [])):
            wanted = _test_requirements(test)
            if not wanted and "python" not in test:
                continue
            if "python" in test:
                wanted = ["python", *(["pip"] if test["python"].get("pip_check", True) else [])]
            environment = Environment(f"test {number}", [*run, *wanted])
            try:
                environment.resolved = solve_test(channel, environment.specs, constraints)
            except Exception as error:  # noqa: BLE001 - rattler's errors share no base; each test is solved
                # rattler's SolverError and its kin: the message says what is missing
                environment.error = " ".join(str(error).split())
            output.environments.append(environment)
        outputs.append(output)
    return outputs


def describe(job_file: Path, outputs: list[Output], stream: io.TextIOBase = sys.stdout) -> bool:
    """Print each output's environments; True when every one resolved."""
    ok = True
    for output in outputs:
        python = output.variant.get("python", "")
        print(f"{job_file.name}: {output.name}{' python ' + python if python else ''}", file=stream)
        for environment in output.environments:
            if environment.error:
                ok = False
                print(f"  {environment.section}: FAILED: {environment.error}", file=stream)
            else:
                print(f"  {environment.section}: {len(environment.resolved)} packages", file=stream)
    return ok
