"""The steps every GPU run's purpose is made of (package.py puts them together, one function per purpose):
the stand-in channel, the device's copy of the recipe, rattler-build's builds and tests, and a user's
environment solved and installed by rattler, with the runs made in it."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass
from collections.abc import Callable
from pathlib import Path

from feedstock.inputs import load_config
from feedstock.shipped_manifest import manifest_path
from plan import Job, Plan
from recipe_code import RECIPE
from standins.channel import build_channel, standins
from standins.environment import Said, machine_roots, recipe_copy
from standins.resolve import variant_file
from standins.sources import MIRROR_TREE_PATCHES, TREES, place_trees

REPO = Path(__file__).resolve().parents[2]
PLUGIN = load_config(REPO).outputs.plugin.name
HERE = Path(__file__).resolve().parent


class Step:
    """One step's outcome, kept in the report whatever happens: `save` keeps the results so far as the step starts
    and ends, so that a run stopped at its time limit keeps them."""

    def __init__(self, results: dict, name: str, save: Callable[[], None]) -> None:
        self.record = results.setdefault("steps", {}).setdefault(name, {})
        self.name, self.save = name, save

    def __enter__(self) -> dict:
        self.start = time.monotonic()
        print(f"== {self.name}", flush=True)
        self.save()
        return self.record

    def __exit__(self, kind, error, _trace) -> bool:
        self.record["seconds"] = round(time.monotonic() - self.start, 1)
        self.record.setdefault("ok", error is None)
        if error is not None:
            self.record["error"] = f"{kind.__name__}: {error}"
        print(f"== {self.name}: {'ok' if self.record['ok'] else 'FAILED'} in {self.record['seconds']} s", flush=True)
        self.save()
        return False


@dataclass
class Run:
    """One run on the GPU machine: its plan, the staged bundles, its work and results folders, the machine's
    CUDA (`cuda`, its toolkit's) and Python, and what the steps record (package.json)."""

    plan: Plan
    stage: Path
    work: Path
    results_dir: Path
    toolkit: Path
    cuda: str
    python: str
    results: dict = dataclasses.field(default_factory=dict)
    # where each stand-in's files are on this machine, once the channel is built
    roots: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def channel(self) -> Path:
        return self.work / "channel"

    @property
    def output(self) -> Path:
        return self.work / "output"

    def step(self, name: str) -> Step:
        """A step of this run, its results saved as it starts and ends."""
        return Step(self.results, name, self.save)

    def save(self) -> None:
        """The results so far, whole, in results/package.json."""
        journal = self.results_dir / "package.json"
        partial = journal.with_name(f"{journal.name}.partial")
        partial.write_text(json.dumps(self.results, indent=1) + "\n")
        partial.replace(journal)

    def earlier(self, key: str) -> Path:
        """The channel of the plan's package from an earlier run (`package` or `core`), made on first use."""
        channel = self.work / f"earlier-{key}"
        if not (channel / "linux-64" / "repodata.json").exists():
            local_channel([self.stage / getattr(self.plan, key)], channel)
        return channel

    def variant(self, job: Job) -> dict[str, str]:
        """What the job's variant takes from this machine: its Python and, for a CUDA job, its CUDA."""
        return {"python": f"{self.python}.* *_cpython"} | ({"cuda_compiler_version": self.cuda} if job.cuda else {})

    def ok(self) -> bool:
        return all(step.get("ok") for step in self.results["steps"].values())


def toolkit_version(toolkit: Path) -> str:
    """13.0 for a toolkit whose nvcc says `release 13.0` (not every toolkit has a version.json)."""
    said = subprocess.run([str(toolkit / "bin" / "nvcc"), "--version"], capture_output=True, text=True,
                          check=True).stdout
    match = re.search(r"release (\d+\.\d+)", said)
    if match is None:
        raise SystemExit(f"package: {toolkit}/bin/nvcc --version names no release: {said.strip()}")
    return match.group(1)


def machine_facts() -> dict[str, str]:
    """What the report says of the machine: its GPU, driver library, compiler and Python."""
    def said(command: str) -> str:
        done = subprocess.run(command, shell=True, capture_output=True, text=True)
        return " / ".join(line.strip() for line in (done.stdout + done.stderr).splitlines()[:3] if line.strip())

    return {"gpu": said("nvidia-smi -L"), "driver library": said("ldconfig -p | grep 'libcuda.so.1 '"),
            "gcc": said("gcc --version | head -1"), "python": sys.version.split()[0]}


def stand_in_channel(run: Run) -> None:
    """The stand-in channel of the plan's jobs, each job's variant with this machine's Python and CUDA (Run.variant),
    with the machine's files as the packages' contents; the plan's cores as `onnxruntime`."""
    with run.step("channel") as record:
        jobs = {REPO / job.file: run.variant(job) for job in run.plan.jobs}
        record["jobs"] = {path.name: overrides for path, overrides in jobs.items()}
        cores = run.plan.cores
        values = {"min_core_version": cores.floor, "newest_core_version": cores.newest} if cores else {}
        chosen = sorted({s for path, overrides in jobs.items() for s in standins([path], values, overrides=overrides)},
                        key=lambda s: (s.name, s.version, s.build))
        shutil.rmtree(run.channel, ignore_errors=True)
        import nvidia.cudnn

        run.roots = machine_roots(run.stage / "wheels", sorted(run.stage.glob("debs/*.deb")), run.work, run.toolkit,
                                  Path(list(nvidia.cudnn.__path__)[0]))
        built = build_channel(chosen, run.channel, run.roots)
        record["packages"] = {p.name: p.stat().st_size for p in built}


def device_recipe(plan: Plan, work: Path, src: Path, stage: Path, configure_only: bool,
                  trees: dict[str, str] | None = None, cuda: str | None = None) -> tuple[Path, str]:
    """The device's copy of the recipe (recipe_copy): the plan's outputs, the plugin for this machine's `cuda`
    (none in a plan that names none), with the plan's overrides put in, the mirror in the `stage`, what the
    mirror's tree lacks of the tag (MIRROR_TREE_PATCHES), then the plan's own patches; and its diff."""
    return recipe_copy(RECIPE, work, src, stage / "mirror", list(plan.outputs), configure_only, trees,
                       dataclasses.asdict(plan.overrides), cuda,
                       [*MIRROR_TREE_PATCHES, *(stage / patch for patch in plan.patches)])


def unpack(stage: Path, into: Path, folder: str | None = None) -> None:
    """ONNX Runtime's source tarball into `into`, without its top folder; only its `folder` where one is named."""
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    (tarball,) = stage.glob("sources/onnxruntime-*-src.tar.zst")
    members = f"--wildcards '*/{folder}/*'" if folder else ""
    # zstd reads a linked tarball from its standard input (named, it skips a symbolic link)
    subprocess.run(f'zstd -dc < "{tarball}" | tar -x -C "{into}" --strip-components=1 {members}', shell=True,
                   check=True)


def unpack_sources(stage: Path, work: Path, plan: Plan) -> tuple[Path, dict[str, str]]:
    """ORT's tree, with cutlass and cudnn_frontend where FetchContent would put them (place_trees: what it
    says of them; none for the CPU packages, which fetch neither)."""
    src = work / "src"
    unpack(stage, src)
    trees = stage / "sources" / TREES
    return src, place_trees(trees, src, plan.script_env["ORT_BUILD_DIR"]) if trees.exists() else {}


def conda_facts(package: Path) -> dict:
    from rattler_build import Package

    built = Package.from_file(package)
    return {"file": package.name, "bytes": package.stat().st_size, "depends": list(built.depends),
            "constrains": list(built.constrains), "files": sorted(str(f) for f in built.files)}


def linking_findings(said: list[str]) -> list[str]:
    """rattler-build's linking checks as it reported them, after the build script: each shared library's
    links, and what it warned of (overlinking, overdepending, a library it could not find)."""
    script_done = max((i for i, line in enumerate(said) if "Copying done" in line), default=0)
    keys = ("links against", "overlink", "overdepend", "could not find", "not found", "missing")
    return [line for line in said[script_done:] if (any(k in line.lower() for k in keys) and "repodata" not in line)
            or line.startswith(("warn", "error"))][:120]


def user_environment(channels: list[str], specs: list[str], prefix: Path) -> list[str]:
    """`specs` solved and installed by rattler, as a user's conda would, from the channels in their order
    (strict priority: a name the first channel has comes from it alone)."""
    import rattler
    from rattler import VirtualPackage, VirtualPackageOverrides

    virtual = VirtualPackage.detect(VirtualPackageOverrides.from_env())
    records = asyncio.run(rattler.solve(sources=channels, specs=specs, platforms=["linux-64", "noarch"],
                                        virtual_packages=virtual))
    shutil.rmtree(prefix, ignore_errors=True)
    asyncio.run(rattler.install(records, target_prefix=prefix, show_progress=False))
    return sorted(f"{r.name.normalized} {r.version} {r.build}" for r in records)


def run_in(prefix: Path, arguments: list[str], log: Path, extra_path: str = "", env: dict[str, str] | None = None,
           cwd: Path = RECIPE, limit: int = 600) -> int:
    """A command in the environment with a bare environment: no LD_LIBRARY_PATH, and only the recipe's folder on
    PYTHONPATH (the load test that user_check.py and gpu_features.py run) unless `env` says otherwise;
    `extra_path` puts the machine's build tools (cmake, ninja) after the environment's programs."""
    bare = {"PATH": f"{prefix}/bin:{extra_path + ':' if extra_path else ''}/usr/bin:/bin",
            "PYTHONPATH": str(RECIPE),
            "HOME": os.environ.get("HOME", "/root"),
            # the driver's kernel cache, which run.sh shares between the tests and these runs
            **{k: os.environ[k] for k in ("CUDA_CACHE_PATH", "CUDA_CACHE_MAXSIZE") if k in os.environ},
            **(env or {})}
    with log.open("w") as out:
        # a session of its own: at the limit its whole group goes, pytest-xdist's workers with the suite
        child = subprocess.Popen(arguments, env=bare, stdout=out, stderr=subprocess.STDOUT, cwd=cwd,
                                 start_new_session=True)
        try:
            return child.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            out.write(f"\n(stopped after {limit} s)\n")
            return 124


def local_channel(packages: list[Path], channel: Path) -> None:
    """The packages in a channel of their own, indexed."""
    import rattler.index

    shutil.rmtree(channel, ignore_errors=True)
    (channel / "linux-64").mkdir(parents=True)
    for package in packages:
        shutil.copy(package, channel / "linux-64" / package.name)
    asyncio.run(rattler.index.index_fs(channel))


def build_outputs(run: Run, configure_only: bool = False) -> list[Path]:
    """Each output of the plan built by rattler-build from the device's copy of the recipe, for the plan's first
    job; with `configure_only`, each build script stops at its build step (REHEARSAL_TARGETS_FILE)."""
    from rattler_build import Stage0Recipe, ToolConfiguration, VariantConfig

    plan, output = run.plan, run.output
    # a package an earlier pipeline built in this work folder is kept only for the same settings and patches
    settings = output / "overrides.json"
    overrides = json.dumps({**dataclasses.asdict(plan.overrides), "patches": plan.patches}, sort_keys=True)
    if settings.exists() and settings.read_text() != overrides:
        shutil.rmtree(output)
    output.mkdir(parents=True, exist_ok=True)
    settings.write_text(overrides)
    with run.step("recipe") as record:
        src, trees = unpack_sources(run.stage, run.work, plan)
        recipe_dir, record["diff"] = device_recipe(plan, run.work, src, run.stage, configure_only, trees, run.cuda)
        print(record["diff"])
        job = plan.jobs[0]
        variants = variant_file(REPO / job.file, run.work, run.variant(job))
    rendered = Stage0Recipe.from_file(recipe_dir / "recipe.yaml").render(VariantConfig.from_file(variants))
    built = []
    for name in plan.outputs:
        made = f"linux-64/{name}-{plan.version}-*.conda"
        kept = sorted(output.glob(made))
        if kept:
            # built by an earlier pipeline in this work folder, one whose later output failed: not built again
            print(f"== build {name}: kept {kept[-1]}", flush=True)
            run.results.setdefault("packages", []).append(conda_facts(kept[-1]) | {"kept from an earlier run": True})
            built.append(kept[-1])
            continue
        with run.step(f"build {name}") as record:
            (variant,) = [v for v in rendered if v.recipe.to_dict()["package"]["name"] == name]
            record["variant"] = {k: str(v) for k, v in variant.variant.items()}
            said = Said(echo=True)
            try:
                # keep_build: the work folder, with the build script's log and ninja's, outlives the build, in
                # bld/rattler-build_<name> (no_build_id: no time stamp in the name)
                tool = ToolConfiguration(test_strategy="skip", compression_threads=os.cpu_count(), keep_build=True)
                variant.run_build(tool_config=tool, output_dir=output, channels=[run.channel.as_uri()],
                                  no_build_id=True, progress_callback=said)
            finally:
                (run.results_dir / f"rattler-build-{name}.log").write_text("\n".join(said.lines) + "\n")
                for script_log in output.glob(f"bld/rattler-build_{name}/work/conda_build.log"):
                    shutil.copy(script_log, run.results_dir / f"conda_build-{name}.log")
                # each ninja step's start and end, to tell where the build spent its time
                for ninja_log in output.glob(f"bld/rattler-build_{name}/work/*/.ninja_log"):
                    shutil.copy(ninja_log, run.results_dir / f"ninja_log-{name}.txt")
                record["linking"] = linking_findings(said.lines)
            (package,) = output.glob(made)
            run.results.setdefault("packages", []).append(conda_facts(package))
            built.append(package)
    import rattler.index

    # the kept packages with the new ones, for the tests' and the user's solver
    asyncio.run(rattler.index.index_fs(output))
    return built


def plugin_package(run: Run) -> tuple[Path, Path]:
    """The plugin package the run tests and installs, and its channel: built by this run, or the plan's
    `package` from an earlier run."""
    if run.plan.outputs:
        (package,) = build_outputs(run)
        return package, run.output
    package = run.stage / run.plan.package
    run.results["packages"] = [conda_facts(package)]
    return package, run.earlier("package")


def run_tests(run: Run, package: Path, channels: list[str]) -> None:
    """The package's own tests, run by rattler-build one by one."""
    from rattler_build import Package

    built_package = Package.from_file(package)
    name = built_package.name
    with run.step(f"tests {name}") as record:
        record["results"] = []
        for index in range(built_package.test_count):
            started, said = time.monotonic(), Said(echo=True)
            try:
                outcome = built_package.run_test(index, channel=channels, progress_callback=said)
                success, lines = outcome.success, outcome.output
            # rattler-build raises for a test that fails: record it, run the next
            except Exception as error:  # noqa: BLE001
                success, lines = False, [*said.lines, f"{type(error).__name__}: {error}"]
            said = "\n".join(lines) if isinstance(lines, list) else str(lines)
            record["results"].append({"index": index, "success": success, "output": said[-6000:],
                                      "seconds": round(time.monotonic() - started, 1)})
            print(f"{name} test {index}: {'passed' if success else 'FAILED'}", flush=True)
        record["ok"] = all(r["success"] for r in record["results"])


def log_tail(log: Path) -> str:
    """The end of a command's log, as much of it as package.json keeps."""
    return log.read_text(errors="replace")[-3000:]


def installed(run: Run, channels: list[Path], specs: list[str], uses) -> Path:
    """The `install` step: `specs` (the onnxruntime packages: the stand-ins' or an earlier run's core, or the CPU
    packages just built), the plugin and `onnx`, in a user's environment from `channels` and the stand-ins;
    `uses(prefix, manifest)` is what the user does there (each run's exit status by its name, its log
    results/<name>.log), then gpu_features.py. Returns the environment."""
    with run.step("install") as record:
        prefix = run.work / "user-env"
        record["packages"] = user_environment([*(c.as_uri() for c in channels), run.channel.as_uri()],
                                              [*specs, PLUGIN, "onnx"], prefix)
        record["manifest"] = plugin_manifest(prefix)
        record["runs"] = uses(prefix, record["manifest"])
        record["ok"] = not any(record["runs"].values())
        # what a user moving from a CUDA build of onnxruntime keeps: in the report, not a condition of the install
        record["runs"]["user-gpu-features"] = gpu_features(prefix, record["manifest"],
                                                           run.results_dir / "user-gpu-features.log")
        record["logs"] = {name: log_tail(run.results_dir / f"{name}.log") for name in record["runs"]}
    return prefix


def plugin_manifest(prefix: Path) -> dict:
    """The manifest the plugin package installs (share/onnxruntime/ep-plugins/), which names its library."""
    return json.loads((prefix / manifest_path(PLUGIN, "unix")).read_text())


def user_check(prefix: Path, results_dir: Path) -> int:
    """user_check.py in the environment: `import onnxruntime` registers the plugin and a session with
    providers=["CUDAExecutionProvider"] runs a model on the GPU, saved as results/model.onnx."""
    return run_in(prefix, [str(prefix / "bin" / "python"), str(HERE / "user_check.py"),
                           str(results_dir / "model.onnx")], results_dir / "user-python.log")


# gpu_features.py's checks take seconds; a hung one costs the run no more than this
GPU_FEATURES_LIMIT = 180


def gpu_features(prefix: Path, manifest: dict, log: Path) -> int:
    """IOBinding with device memory and CUDA graphs through the plugin the manifest names (gpu_features.py),
    torch's tensors from the machine's torch; its exit status, its output in `log`."""
    return run_in(prefix, [str(prefix / "bin" / "python"), str(HERE / "gpu_features.py"),
                           "--library", str(prefix / manifest["library"]), "--ep", manifest["registration_name"],
                           "--torch-path", sysconfig.get_paths()["purelib"]], log, limit=GPU_FEATURES_LIMIT)
