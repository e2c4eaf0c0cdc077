"""Names vulture cannot see being used, each with where the use is.

vulture reads this file as code: every bare name below counts as used. tests/test_dead_code.py also reads the
feedstock's code without the tests, so a name only a test uses is listed here too, with what else reads it.
"""

# pytest reads a module's `pytestmark` to apply its marks to every test there.
pytestmark

# pytest passes fixtures to the tests that name them as parameters.
floor_core

# ONNX models built in the recipe's tests set the IR version their ONNX Runtime cores load.
ir_version

# Keys of the TypedDict that tests/support/ep_probe.py fills and the tests read by subscript.
reload_warnings
registration

# Config fields read only by scripts/feedstock/templates/recipe.yaml.j2 (`config.<section>.<name>`).
maintainers
about
homepage
repository
documentation
as_

# pydantic reads a model's `model_config` and calls the methods its decorators make validators
# (scripts/feedstock/inputs.py, ci_support.py).
model_config
_range
_distinct_names
_nvcc_compiles_every_architecture
_consistent

# requests' Response fields that tests/support/smithy_offline.py fills for conda-smithy to read.
status_code
_content

# tests/support/smithy_offline.py's `send` replaces HTTPAdapter.send, so it takes that method's parameters.
adapter

# Fields of scripts/rehearsal.py's Report, written to report.json (dataclasses.asdict) and read
# back from that file by tests/test_rehearsal.py and by whoever reads the report.
link_line
fetched_dependencies
patched_sources

# pytest calls the hook of tests/conftest.py that marks the tests needing conda-smithy slow.
pytest_collection_modifyitems

# pytest and pytest-timeout call the hooks of scripts/device/case_log.py, a plugin loaded with `-p case_log`.
pytest_runtest_logreport
pytest_timeout_set_timer
pytest_timeout_cancel_timer

# rattler-build calls the methods of a progress callback (scripts/standins/environment.py's Said).
on_log
on_build_step

# torch calls a module's `forward` when the module is called (scripts/device/speed.py's Encoder).
forward

# ONNX Runtime reads the profiler's settings from a SessionOptions (scripts/device/speed.py's `one`).
enable_profiling
profile_file_prefix

# onnxruntime's IOBinding hands its devices to the object in `_iobinding`, which recipe/test_python_cpu.py replaces
# with a recorder.
_iobinding

# Fields of scripts/buildcost.py's Piece, written to measurements.json (dataclasses.asdict) and read back from
# that file by key (buildcost.py's per-target costs, predict_build_cost.py).
cpu_s
wall_s
device_s
fatbin_bytes

# What scripts/rattler_render.py's Rendered says of a variant besides its recipe: the build string rattler-build
# gives it, by which tests/test_cuda_arch.py tells one job's variants apart.
build_string

# tests/support/recipe_checks.py's checks, which its @check decorator registers and run_checks calls through CHECKS.
check_recipe_matches_schema
check_conda_forge_yml_has_the_settings_the_feedstock_relies_on
check_no_output_is_skipped_everywhere
check_every_config_builds_an_output
