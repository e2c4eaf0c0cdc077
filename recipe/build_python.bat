@rem onnxruntime (Python), CPU execution provider only: builds the bindings module with ORT linked in
@rem statically, packs it with upstream's setup.py, installs the wheel, then adds conda-forge's EP plugin
@rem auto-registration.
@echo on

@rem --- environment
@rem cd, copy and mkdir keep a stale ERRORLEVEL when they succeed, so their own failure is tested instead
cd /d "%SRC_DIR%" || exit 1
call "%RECIPE_DIR%\cmake_common.bat"

@rem --- configure
@rem in the recipe's build folder, ORT_BUILD_DIR: the recipe lists the licence files of what ORT fetches there
cmake -S cmake -B "%ORT_BUILD_DIR%" -G Ninja %CMAKE_ARGS% %ORT_COMMON_CMAKE_ARGS% ^
    -Donnxruntime_ENABLE_PYTHON=ON ^
    -Donnxruntime_BUILD_SHARED_LIB=OFF ^
    -Donnxruntime_BUILD_UNIT_TESTS=OFF ^
    "-DPython_EXECUTABLE=%PYTHON%"
if errorlevel 1 exit 1

@rem --- build
@rem onnxruntime_pybind11_state's POST_BUILD step copies this library into the package tree
@rem (cmake/onnxruntime_python.cmake), so it must exist first
cmake --build "%ORT_BUILD_DIR%" --target onnxruntime_providers_shared
if errorlevel 1 exit 1
@rem its POST_BUILD steps lay out the Python package in the build folder's onnxruntime\
cmake --build "%ORT_BUILD_DIR%" --target onnxruntime_pybind11_state
if errorlevel 1 exit 1

@rem --- install
@rem setup.py reads VERSION_NUMBER and the package tree from the build directory, where it runs
cd "%ORT_BUILD_DIR%" || exit 1
"%PYTHON%" "%SRC_DIR%\setup.py" bdist_wheel
if errorlevel 1 exit 1
if not exist dist\*.whl (
    echo ERROR: setup.py bdist_wheel left no wheel in %ORT_BUILD_DIR%\dist 1>&2
    exit 1
)
for %%w in (dist\*.whl) do "%PYTHON%" -m pip install --no-deps --no-build-isolation "%%w"
if errorlevel 1 exit 1

@rem conda-forge's auto-registration of the EP plugins installed in this environment: copies
@rem ep_autoregister.py to onnxruntime\_conda_ep_autoregister.py, appends init_hook.py to
@rem onnxruntime\__init__.py and adds the upstream-compatible onnxruntime_ep_cuda helper package
"%PYTHON%" "%RECIPE_DIR%\python\install_autoregistration.py" "%SP_DIR%"
if errorlevel 1 exit 1
