@rem onnxruntime-ep-cuda: ONNX Runtime's CUDA execution provider as a standalone plugin library, which
@rem any core from ORT_MIN_CORE_VERSION up loads. The only nvcc work in this feedstock. Builds one target
@rem and copies it (a full `cmake --install` would need every target of the tree).
@echo on

@rem --- environment
@rem cd, copy and mkdir keep a stale ERRORLEVEL when they succeed, so their own failure is tested instead
cd /d "%SRC_DIR%" || exit 1
call "%RECIPE_DIR%\cmake_common.bat"

@rem --- guard: a GPU architecture list CMake can use. An empty one would silently build for CMake's default
@rem (recipe/recipe.yaml has none for a CUDA version the config neither lists nor derives one for)
powershell -NoProfile -Command "if ($env:CUDA_ARCHITECTURES -notmatch '^[0-9]+(-real|-virtual)?(;[0-9]+(-real|-virtual)?)*$') { exit 1 }"
if errorlevel 1 (
    echo ERROR: CUDA_ARCHITECTURES='%CUDA_ARCHITECTURES%' is not a list like 75-real;80-real;121, so the recipe has no GPU architecture list for CUDA %CUDA_COMPILER_VERSION%: add cuda.versions."%CUDA_COMPILER_VERSION%" to config/feedstock.yaml and re-render 1>&2
    exit 1
)

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

@rem how many compiles at once: the recipe's cap, the runner's cores, and what its memory holds at
@rem NVCC_GB_PER_THREAD for each of the NVCC_THREADS threads of a compile (config/feedstock.yaml says why)
set "BUILD_JOBS=%CUDA_BUILD_JOBS%"
set /a "GB_PER_JOB=NVCC_THREADS * NVCC_GB_PER_THREAD"
set "MEMORY_JOBS="
@rem FreePhysicalMemory is in KiB like unix's MemAvailable; Windows PowerShell is on every Windows runner
for /f %%j in ('powershell -NoProfile -Command "[math]::Floor((Get-CimInstance Win32_OperatingSystem).FreePhysicalMemory / 1MB / %GB_PER_JOB%)"') do set "MEMORY_JOBS=%%j"
if not defined MEMORY_JOBS (
    echo ERROR: PowerShell could not read FreePhysicalMemory from Win32_OperatingSystem, so the number of parallel nvcc compiles cannot be sized 1>&2
    exit 1
)
if defined CPU_COUNT if %CPU_COUNT% LSS %BUILD_JOBS% set "BUILD_JOBS=%CPU_COUNT%"
if %MEMORY_JOBS% LSS %BUILD_JOBS% set "BUILD_JOBS=%MEMORY_JOBS%"
if %BUILD_JOBS% LSS 1 set "BUILD_JOBS=1"

@rem --- configure
set "PLUGIN_CMAKE_ARGS=-Donnxruntime_USE_CUDA=ON -Donnxruntime_BUILD_CUDA_EP_AS_PLUGIN=ON"
@rem the plugin alone: no Python bindings, no core library, no tests
set "PLUGIN_CMAKE_ARGS=%PLUGIN_CMAKE_ARGS% -Donnxruntime_ENABLE_PYTHON=OFF"
set "PLUGIN_CMAKE_ARGS=%PLUGIN_CMAKE_ARGS% -Donnxruntime_BUILD_SHARED_LIB=OFF"
set "PLUGIN_CMAKE_ARGS=%PLUGIN_CMAKE_ARGS% -Donnxruntime_BUILD_UNIT_TESTS=OFF"
@rem the plugin's own version, as upstream's release builds of it report it (README says why)
for /f "usebackq tokens=1" %%v in ("plugin-ep-cuda\VERSION_NUMBER") do set "PLUGIN_CMAKE_ARGS=%PLUGIN_CMAKE_ARGS% -Donnxruntime_PLUGIN_EP_VERSION=%%v"
@rem nvcc --threads per compile job: with BUILD_JOBS jobs this bounds the runner's memory use
set "PLUGIN_CMAKE_ARGS=%PLUGIN_CMAKE_ARGS% -Donnxruntime_NVCC_THREADS=%NVCC_THREADS%"
@rem no FP4 QMoE kernels, as on linux (build_ep_cuda.sh says why). With them off and MSVC as the host
@rem compiler, ORT compiles the SM90 TMA units without their kernels (COMPILE_HOPPER_TMA_GEMMS undefined,
@rem cmake/onnxruntime_providers_cuda_plugin.cmake), so they need none of the linux script's ninja pool
set "PLUGIN_CMAKE_ARGS=%PLUGIN_CMAKE_ARGS% -Donnxruntime_USE_FP4_QMOE=OFF"
@rem the recipe's list for this CUDA version, overriding the CUDAARCHS nvcc's activation sets; quoted for its semicolons
set "PLUGIN_CMAKE_ARGS=%PLUGIN_CMAKE_ARGS% "-DCMAKE_CUDA_ARCHITECTURES=%CUDA_ARCHITECTURES%""
@rem the build environment's nvcc, named the way upstream's tools/ci_build/build.py names it. Its folder
@rem already leads PATH: rattler-build activates the host and then the build environment, whose
@rem Library\bin is where cmake and ninja are found too, so conda-forge/onnxruntime-feedstock's PATH
@rem prepend (build-ep-cuda.nu @ f928e5bc) is not repeated
set "PLUGIN_CMAKE_ARGS=%PLUGIN_CMAKE_ARGS% "-DCMAKE_CUDA_COMPILER=%BUILD_PREFIX:\=/%/Library/bin/nvcc.exe""
@rem cuda-cudart-dev, libcublas-dev, libcufft-dev and cudnn all install into the host's Library
set "PLUGIN_CMAKE_ARGS=%PLUGIN_CMAKE_ARGS% "-Donnxruntime_CUDA_HOME=%LIBRARY_PREFIX%""
set "PLUGIN_CMAKE_ARGS=%PLUGIN_CMAKE_ARGS% "-Donnxruntime_CUDNN_HOME=%LIBRARY_PREFIX%""

@rem in the recipe's build folder, ORT_BUILD_DIR: the recipe lists the licence files of what ORT fetches there
cmake -S cmake -B "%ORT_BUILD_DIR%" -G Ninja %CMAKE_ARGS% %ORT_COMMON_CMAKE_ARGS% %PLUGIN_CMAKE_ARGS%
if errorlevel 1 exit 1

@rem --- build
cmake --build "%ORT_BUILD_DIR%" --target onnxruntime_providers_cuda_plugin --parallel %BUILD_JOBS%
if errorlevel 1 exit 1

@rem --- install
set "PLUGIN_LIBRARY=%ORT_BUILD_DIR%\onnxruntime_providers_cuda.dll"
if not exist "%PLUGIN_LIBRARY%" (
    echo ERROR: the build left no %PLUGIN_LIBRARY%; did upstream change the plugin's OUTPUT_NAME in cmake/onnxruntime_providers_cuda_plugin.cmake? 1>&2
    exit 1
)
@rem the recipe gives the path relative to the prefix with forward slashes
set "INSTALLED_LIBRARY=%PREFIX%\%PLUGIN_INSTALL_PATH:/=\%"
for %%f in ("%INSTALLED_LIBRARY%") do if not exist "%%~dpf" mkdir "%%~dpf" || exit 1
copy /Y "%PLUGIN_LIBRARY%" "%INSTALLED_LIBRARY%" || exit 1
@rem the manifest through which `import onnxruntime` registers the plugin (rendered by scripts/render.py)
if not exist "%LIBRARY_PREFIX%\share\onnxruntime\ep-plugins" mkdir "%LIBRARY_PREFIX%\share\onnxruntime\ep-plugins" || exit 1
copy /Y "%RECIPE_DIR%\ep-plugins\win\%PLUGIN_MANIFEST%" "%LIBRARY_PREFIX%\share\onnxruntime\ep-plugins\" || exit 1
@rem No pause for lingering file handles before packaging: rattler-build retries removing a locked work
@rem directory (os error 5 and 32) since 0.41.0 (prefix-dev/rattler-build#1589, which closed #1431, the
@rem reason for conda-forge/onnxruntime-feedstock's 30 s sleep), and conda-forge's CI installs the
@rem current rattler-build (conda-smithy pins none)
