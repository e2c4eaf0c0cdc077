@rem onnxruntime-ep-cuda: ONNX Runtime's CUDA execution provider as a standalone plugin library, which
@rem any core from ORT_MIN_CORE_VERSION up loads. The only nvcc work in this feedstock. Builds one target
@rem and copies it (a full `cmake --install` would need every target of the tree).
@echo on

@rem --- environment
@rem cd, copy and mkdir keep a stale ERRORLEVEL when they succeed, so their own failure is tested instead
cd /d "%SRC_DIR%" || exit 1
call "%RECIPE_DIR%\cmake_common.bat"

@rem --- guard: the floor in the recipe must be upstream's
set "MIN_VERSION_FILE=plugin-ep-cuda\MIN_ONNXRUNTIME_VERSION"
if not exist "%MIN_VERSION_FILE%" (
    echo ERROR: %SRC_DIR%\%MIN_VERSION_FILE% is missing, so the recipe's min_core_version %ORT_MIN_CORE_VERSION% cannot be checked against upstream's floor 1>&2
    exit 1
)
set "SOURCE_MIN_VERSION="
for /f "usebackq tokens=1" %%v in ("%MIN_VERSION_FILE%") do if not defined SOURCE_MIN_VERSION set "SOURCE_MIN_VERSION=%%v"
if not "%SOURCE_MIN_VERSION%"=="%ORT_MIN_CORE_VERSION%" (
    echo ERROR: upstream's %MIN_VERSION_FILE% says '%SOURCE_MIN_VERSION%' but the recipe's min_core_version is '%ORT_MIN_CORE_VERSION%': set min_core_version in config/feedstock.yaml to upstream's value and re-render 1>&2
    exit 1
)

@rem how many compiles at once: the recipe's cap, or fewer on a runner with fewer cores
set "BUILD_JOBS=%CUDA_BUILD_JOBS%"
if defined CPU_COUNT if %CPU_COUNT% LSS %CUDA_BUILD_JOBS% set "BUILD_JOBS=%CPU_COUNT%"

@rem --- configure
set "PLUGIN_CMAKE_ARGS=-Donnxruntime_USE_CUDA=ON -Donnxruntime_BUILD_CUDA_EP_AS_PLUGIN=ON"
@rem the plugin alone: no Python bindings, no core library, no tests
set "PLUGIN_CMAKE_ARGS=%PLUGIN_CMAKE_ARGS% -Donnxruntime_ENABLE_PYTHON=OFF"
set "PLUGIN_CMAKE_ARGS=%PLUGIN_CMAKE_ARGS% -Donnxruntime_BUILD_SHARED_LIB=OFF"
set "PLUGIN_CMAKE_ARGS=%PLUGIN_CMAKE_ARGS% -Donnxruntime_BUILD_UNIT_TESTS=OFF"
@rem the version the plugin reports; upstream's default appends -dev to the ORT version
set "PLUGIN_CMAKE_ARGS=%PLUGIN_CMAKE_ARGS% -Donnxruntime_PLUGIN_EP_VERSION=%PKG_VERSION%"
@rem nvcc --threads per compile job: with CUDA_BUILD_JOBS jobs this bounds the runner's memory use
set "PLUGIN_CMAKE_ARGS=%PLUGIN_CMAKE_ARGS% -Donnxruntime_NVCC_THREADS=%NVCC_THREADS%"
@rem the recipe's list for this CUDA version, overriding the CUDAARCHS nvcc's activation sets; quoted for its semicolons
set "PLUGIN_CMAKE_ARGS=%PLUGIN_CMAKE_ARGS% "-DCMAKE_CUDA_ARCHITECTURES=%CUDA_ARCHITECTURES%""
@rem cuda-cudart-dev, libcublas-dev, libcufft-dev and cudnn all install into the host's Library
set "PLUGIN_CMAKE_ARGS=%PLUGIN_CMAKE_ARGS% "-Donnxruntime_CUDA_HOME=%LIBRARY_PREFIX%""
set "PLUGIN_CMAKE_ARGS=%PLUGIN_CMAKE_ARGS% "-Donnxruntime_CUDNN_HOME=%LIBRARY_PREFIX%""

cmake -S cmake -B build-ep-cuda -G Ninja %CMAKE_ARGS% %ORT_COMMON_CMAKE_ARGS% %PLUGIN_CMAKE_ARGS%
if errorlevel 1 exit 1

@rem --- build
cmake --build build-ep-cuda --target onnxruntime_providers_cuda_plugin --parallel %BUILD_JOBS%
if errorlevel 1 exit 1

@rem --- install
set "PLUGIN_LIBRARY=build-ep-cuda\onnxruntime_providers_cuda.dll"
if not exist "%PLUGIN_LIBRARY%" (
    echo ERROR: the build left no %PLUGIN_LIBRARY%; did upstream change the plugin's OUTPUT_NAME in cmake/onnxruntime_providers_cuda_plugin.cmake? 1>&2
    exit 1
)
if not exist "%LIBRARY_BIN%" mkdir "%LIBRARY_BIN%" || exit 1
copy /Y "%PLUGIN_LIBRARY%" "%LIBRARY_BIN%\" || exit 1
@rem the manifest through which `import onnxruntime` registers the plugin (rendered by scripts/render.py)
if not exist "%LIBRARY_PREFIX%\share\onnxruntime\ep-plugins" mkdir "%LIBRARY_PREFIX%\share\onnxruntime\ep-plugins" || exit 1
copy /Y "%RECIPE_DIR%\ep-plugins\win\%PLUGIN_MANIFEST%" "%LIBRARY_PREFIX%\share\onnxruntime\ep-plugins\" || exit 1
