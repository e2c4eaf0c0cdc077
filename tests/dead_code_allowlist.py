"""Names vulture cannot see being used, each with where the use is.

vulture reads this file as code: every bare name below counts as used. tests/test_dead_code.py also reads the
feedstock's code without the tests, so a name only a test uses is listed here too, with what else reads it.
"""

# pytest reads a module's `pytestmark` to apply its marks to every test there.
pytestmark  # noqa: B018

# pytest passes fixtures to the tests that name them as parameters.
floor_core  # noqa: B018

# ONNX models built in the recipe's tests set the IR version their ONNX Runtime cores load.
ir_version  # noqa: B018

# Keys of the TypedDict that tests/support/ep_probe.py fills and the tests read by subscript.
reload_warnings  # noqa: B018
registration  # noqa: B018

# Config fields read only by scripts/feedstock/templates/recipe.yaml.j2 (`config.<section>.<name>`).
maintainers  # noqa: B018
about  # noqa: B018
homepage  # noqa: B018
repository  # noqa: B018
documentation  # noqa: B018
as_  # noqa: B018
nvcc_threads  # noqa: B018
nvcc_gb_per_thread  # noqa: B018
build_jobs  # noqa: B018
sm90_tma_jobs  # noqa: B018

# pydantic reads a model's `model_config` and calls the methods its decorators make validators
# (scripts/feedstock/inputs.py, ci_support.py).
model_config  # noqa: B018
_range  # noqa: B018
_distinct_names  # noqa: B018
_nvcc_compiles_every_architecture  # noqa: B018
_consistent  # noqa: B018

# requests' Response fields that tests/support/smithy_offline.py fills for conda-smithy to read.
status_code  # noqa: B018
_content  # noqa: B018

# tests/support/smithy_offline.py's `send` replaces HTTPAdapter.send, so it takes that method's parameters.
adapter  # noqa: B018
kwargs  # noqa: B018

# Fields of scripts/rehearsal.py's Report, written to report.json (dataclasses.asdict) and read
# back from that file by tests/test_rehearsal.py and by whoever reads the report.
link_line  # noqa: B018
standins  # noqa: B018
fetched_dependencies  # noqa: B018
patched_sources  # noqa: B018

# pytest calls the hook of tests/conftest.py that marks the tests needing conda-smithy slow.
pytest_collection_modifyitems  # noqa: B018

# pytest and pytest-timeout call the hooks of scripts/device/case_log.py, a plugin loaded with `-p case_log`.
pytest_runtest_logreport  # noqa: B018
pytest_timeout_set_timer  # noqa: B018
pytest_timeout_cancel_timer  # noqa: B018

# rattler-build calls the methods of a progress callback (scripts/standins/environment.py's Said).
on_log  # noqa: B018
on_build_step  # noqa: B018

# torch calls a module's `forward` when the module is called (scripts/device/speed.py's Encoder).
forward  # noqa: B018

# ONNX Runtime reads the profiler's settings from a SessionOptions (scripts/device/speed.py's `one`).
enable_profiling  # noqa: B018
profile_file_prefix  # noqa: B018

# onnxruntime's IOBinding hands its devices to the object in `_iobinding`, which recipe/test_python_cpu.py replaces
# with a recorder.
_iobinding  # noqa: B018

# Fields of scripts/buildcost.py's Piece, written to measurements.json (dataclasses.asdict) and read back from
# that file by key (buildcost.py's per-target costs, predict_build_cost.py).
cpu_s  # noqa: B018
wall_s  # noqa: B018
device_s  # noqa: B018
fatbin_bytes  # noqa: B018

# What scripts/rattler_render.py's Rendered says of a variant besides its recipe: the build string rattler-build
# gives it, by which tests/test_cuda_arch.py tells one job's variants apart.
build_string  # noqa: B018

# scripts/feedstock/ci_support.py's way to the newest CUDA job's file, beside job_file, for the tests that render
# or solve that job as the rehearsal and the GPU run build it (tests/test_device_run.py, tests/test_channel.py).
newest_cuda_job_file  # noqa: B018
