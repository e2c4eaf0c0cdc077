"""A CUDA migration, and dropping a CUDA version or a platform, as conda-forge's bot and a maintainer do them.

Each test works on a clean copy of the feedstock with the real conda-smithy (tests/support/smithy.py):
the bot adds a migration and rerenders; a maintainer edits the config and runs the README's sequence
(render, rerender, render). The migration's newer CUDA is then rehearsed with PyPI's newest nvcc.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CONFIG, SHARED
from feedstock.ci_support import migrated_cuda_versions
from feedstock.cuda_targets import number, nvcc_targets
from feedstock.inputs import build_platforms
from feedstock.reader import version_tuple
from rattler_render import render as rattler_render
from support.smithy import Smithy
from support.yaml_files import read_yaml
from support.clean_clone import clean_copy, git
from support.config_edits import drop_cuda_version, drop_win_64

# The newest nvcc on PyPI: a CUDA version the config does not list, which the rule derives a list for.
MIGRATED = "13.5"
# The newest version the config lists, whose list a migration's version derives from.
LISTED = max(CONFIG.cuda.versions, key=version_tuple)
CUDA_PLATFORMS = CONFIG.cuda_platforms


def render(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(root / "scripts" / "render.py"), *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120)


def cuda_jobs(root: Path) -> dict[str, tuple[str, str]]:
    """Each CUDA job's file name -> (platform, CUDA version)."""
    jobs = {p.name: read_yaml(p) for p in sorted((root / ".ci_support").glob("*.yaml"))}
    return {name: (job["target_platform"][0], str(job["cuda_compiler_version"][0]))
            for name, job in jobs.items() if str(job["cuda_compiler_version"][0]) != "None"}


def add_migration(root: Path, smithy: Smithy, tmp_path: Path, version: str) -> Path:
    """conda-forge's CUDA migration for `version`, modelled on the feedstock's migration of the newest CUDA,
    in the feedstock and in a copy of the pinning with its other migrations; returns that pinning. Where a
    migration already brings `version`, the feedstock keeps it."""
    migrations = root / ".ci_support" / "migrations"
    migrated = migrated_cuda_versions(root)
    newest = max((v for versions in migrated.values() for v in versions), key=version_tuple)
    if version not in {v for versions in migrated.values() for v in versions}:
        (model_file,) = [name for name, versions in migrated.items() if newest in versions]
        text = (root / model_file).read_text()
        text = text.replace(f"  - {newest}   ", f"  - {version}   ")
        text = text.replace(f"Upgrade to CUDA {newest}", f"Upgrade to CUDA {version}")
        # conda-smithy orders the versions by the migration's list, which holds every earlier one too
        text = text.replace(f"      - {newest}\n", f"      - {newest}\n      - {version}\n", 1)
        # a later migration than its model: conda-smithy applies them in that order
        text = re.sub(r"(?m)^migrator_ts: (\d+)$", lambda ts: f"migrator_ts: {int(ts.group(1)) + 1}", text)
        text = re.sub(r"(?m)^  use_local: true\n", "", text)
        # once in the ordering and once as the migrated value: each replacement above took
        assert text.count(f"- {version}") == 2, text
        (migrations / f"cuda{version.replace('.', '')}.yaml").write_text(text)
    return smithy.pinning_with(sorted(migrations.glob("*.yaml")), tmp_path / "pinning")


def rerender(smithy: Smithy, root: Path, pinning: Path | None = None) -> None:
    result = smithy.rerender(root, pinning)
    assert result.returncode == 0, result.stderr[-4000:]


def plugin_architectures(root: Path, job: str) -> str:
    """CUDA_ARCHITECTURES as rattler-build evaluates the recipe for one .ci_support job."""
    variants = read_yaml(root / ".ci_support" / job)
    platform = variants["target_platform"][0]
    build = build_platforms(root).get(platform, platform)
    (architectures,) = {r.recipe["build"]["script"]["env"]["CUDA_ARCHITECTURES"]
                        for r in rattler_render(root / "recipe" / "recipe.yaml", variants, platform, build)
                        if r.name == "onnxruntime-ep-cuda"}
    return architectures


@pytest.fixture(scope="module")
def migrated(conda_smithy: Smithy, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The feedstock after the bot's CUDA 13.5 migration PR: the migration added, rerendered, nothing else."""
    tmp_path = tmp_path_factory.mktemp("migration")
    root = clean_copy(tmp_path)
    pinning = add_migration(root, conda_smithy, tmp_path, MIGRATED)
    rerender(conda_smithy, root, pinning)
    return root


def test_a_cuda_migration_gets_one_job_per_cuda_platform(migrated: Path) -> None:
    assert sorted(p for p, v in cuda_jobs(migrated).values() if v == MIGRATED) == sorted(CUDA_PLATFORMS)


@pytest.mark.parametrize("platform", CUDA_PLATFORMS)
def test_a_cuda_migration_builds_the_newest_listed_lists_when_its_nvcc_takes_every_entry(
        migrated: Path, platform: str) -> None:
    (job,) = [name for name, (p, v) in cuda_jobs(migrated).items() if (p, v) == (platform, MIGRATED)]
    (listed_job,) = [name for name, (p, v) in cuda_jobs(migrated).items() if (p, v) == (platform, LISTED)]
    # CUDA 13.5's nvcc accepts every architecture the newest listed CUDA 13 list has, so the lists are the same
    assert plugin_architectures(migrated, job) == plugin_architectures(migrated, listed_job) != ""


def test_render_after_a_cuda_migration_shows_its_jobs_and_is_current_after(migrated: Path) -> None:
    result = render(migrated)
    assert result.returncode == 0, result.stderr
    readme = (migrated / "README.md").read_text()
    assert len(re.findall(rf"\| {re.escape(MIGRATED)} \| [0-9 ]+ \(from {re.escape(LISTED)}'s\) \|", readme)) == len(
        CUDA_PLATFORMS)
    assert render(migrated, "--check").returncode == 0


def test_a_migration_to_a_cuda_the_rule_cannot_derive_is_named_by_render(conda_smithy: Smithy, tmp_path: Path) -> None:
    root = clean_copy(tmp_path)
    pinning = add_migration(root, conda_smithy, tmp_path, "13.6")
    rerender(conda_smithy, root, pinning)
    # the recipe skips a CUDA version without a list, so the rerender writes no job for it ...
    assert "13.6" not in {v for _, v in cuda_jobs(root).values()}
    # ... and render says which version and what to add
    for args in ((), ("--check",)):
        result = render(root, *args)
        assert (result.returncode, result.stderr) == (2, (
            ".ci_support/migrations/cuda136.yaml: cuda_compiler_version: CUDA 13.6 has no GPU architecture list: add "
            "what its nvcc compiles for (`nvcc --list-gpu-code`) to NVCC_ARCHITECTURES in "
            f"scripts/feedstock/architectures.py, and its list follows CUDA {LISTED}'s\n"))


def _sequence(smithy: Smithy, root: Path) -> list[tuple[str, int, str]]:
    """The README's sequence after a change that moves the matrix: render, rerender, render."""
    steps = []
    first = render(root)
    steps.append(("render", first.returncode, first.stderr))
    result = smithy.rerender(root)
    steps.append(("rerender", result.returncode, result.stderr[-2000:] if result.returncode else ""))
    second = render(root)
    steps.append(("render", second.returncode, second.stderr))
    return steps


def test_dropping_a_cuda_version_takes_its_jobs_away_with_no_hand_deletion(conda_smithy: Smithy,
                                                                             tmp_path: Path) -> None:
    listed = sorted(CONFIG.cuda.versions, key=version_tuple)
    if len(listed) < 2:
        pytest.skip(f"cuda.versions lists one CUDA version ({listed[0]}): dropping it would leave no plugin")
    dropped = listed[0]
    root = clean_copy(tmp_path)
    before = {v for _, v in cuda_jobs(root).values()}
    drop_cuda_version(root, dropped)
    assert [code for _, code, _ in _sequence(conda_smithy, root)] == [0, 0, 0]
    assert {v for _, v in cuda_jobs(root).values()} == before - {dropped}
    assert f"| {dropped} |" not in (root / "README.md").read_text().split("<!-- build matrix")[1]
    assert render(root, "--check").returncode == 0
    git(root, "add", "--all")
    git(root, "commit", "--quiet", "-m", f"drop CUDA {dropped}")
    rerender(conda_smithy, root)
    assert git(root, "status", "--porcelain", "--untracked-files=all") == ""


@pytest.mark.parametrize("rerender_first", [False, True], ids=["render first", "rerender first"])
def test_dropping_a_platform_takes_its_jobs_away_with_no_hand_deletion(conda_smithy: Smithy, tmp_path: Path,
                                                                       rerender_first: bool) -> None:
    root = clean_copy(tmp_path)
    drop_win_64(root)
    if rerender_first:
        # the recipe still builds win-64, so its jobs stay; the render then says they will go
        rerender(conda_smithy, root)
        result = render(root)
        assert result.returncode == 0, result.stderr
        skipped = [p.stem for p in (root / ".ci_support").glob("win_64_*.yaml")]
        readme = (root / "README.md").read_text()
        assert skipped and all(f"| `{job}` | nothing: the recipe skips it" in readme for job in skipped), skipped
    steps = _sequence(conda_smithy, root)
    assert [code for _, code, _ in steps] == [0, 0, 0], steps
    assert not list((root / ".ci_support").glob("win_64_*.yaml"))
    assert "win_64" not in (root / "README.md").read_text()
    assert render(root, "--check").returncode == 0


@pytest.mark.skipif(not (SHARED / "upstream" / "mirror").is_dir(),
                    reason=f"{SHARED / 'upstream'} (ORT's source and dependency mirror) is not beside the checkout")
def test_a_cuda_migration_configures_and_compiles_with_that_cudas_nvcc(migrated: Path) -> None:
    from test_rehearsal import PLUGIN, rehearse

    assert render(migrated).returncode == 0
    # the last --cuda given is the one rehearse.py takes
    report, workdir = rehearse(PLUGIN, migrated, "--cuda", MIGRATED)
    assert report["variant"]["cuda_compiler_version"] == MIGRATED
    assert report["configure_ok"], report["configure_error"]
    # CMake's own identification of the compiler it configured with
    assert re.search(rf"The CUDA compiler identification is NVIDIA {re.escape(MIGRATED)}\.\d+",
                     (workdir / "configure.log").read_text())
    failed = [(s["object"], s["error"]) for s in report["sample"] if not s["ok"]]
    assert report["sample"] and not failed, failed
    (job,) = [name for name, (p, v) in cuda_jobs(migrated).items() if (p, v) == ("linux-64", MIGRATED)]
    listed = plugin_architectures(migrated, job).split(";")
    targets = nvcc_targets(listed)
    assert report["nvcc_sass"] == sorted(t for t in targets if t.startswith("sm_"))
    assert report["nvcc_ptx"] == [f"compute_{max(map(number, listed))}"]
