@rem onnxruntime-cpp: ONNX Runtime's C/C++ shared library, headers and CMake package, with the CPU
@rem execution provider only (CUDA comes from the onnxruntime-ep-cuda plugin).
@echo on

@rem --- environment
@rem cd, copy and mkdir keep a stale ERRORLEVEL when they succeed, so their own failure is tested instead
cd /d "%SRC_DIR%" || exit 1
call "%RECIPE_DIR%\cmake_common.bat"
@rem the unit tests have to run on the build machine
set "UNIT_TESTS=ON"
if "%CONDA_BUILD_CROSS_COMPILATION%"=="1" set "UNIT_TESTS=OFF"

@rem --- configure
@rem Nothing here touches the version: ORT reads it from VERSION_NUMBER, and the CUDA plugin needs a
@rem core whose version string is plain X.Y.Z.
@rem gtest_force_shared_crt: googletest defaults to the static runtime, everything else here uses the DLL one.
@rem CMAKE_PROJECT_onnxruntime_INCLUDE: the core becomes onnxruntime_conda.dll, and the one unit test that
@rem loads it as onnxruntime.dll is disabled (the file says why).
@rem ORT_BUILD_DIR: the recipe's build folder, where the recipe lists the licence files of what ORT fetches
cmake -S cmake -B "%ORT_BUILD_DIR%" -G Ninja %CMAKE_ARGS% %ORT_COMMON_CMAKE_ARGS% ^
    -Donnxruntime_BUILD_SHARED_LIB=ON ^
    -Donnxruntime_ENABLE_PYTHON=OFF ^
    -Donnxruntime_BUILD_UNIT_TESTS=%UNIT_TESTS% ^
    -Dgtest_force_shared_crt=ON ^
    "-DCMAKE_PROJECT_onnxruntime_INCLUDE=%RECIPE_DIR:\=/%/cmake/rename_core_library.cmake"
if errorlevel 1 exit 1

@rem --- build
cmake --build "%ORT_BUILD_DIR%"
if errorlevel 1 exit 1

@rem --- test
@rem RegexFullMatch.NonUtf8Pattern writes invalid UTF-8 to stderr, which breaks rattler-build's log output
if "%UNIT_TESTS%"=="ON" (
    set "GTEST_FILTER=-RegexFullMatch.NonUtf8Pattern"
    ctest --test-dir "%ORT_BUILD_DIR%" --output-on-failure
    if errorlevel 1 exit 1
)

@rem --- install
cmake --install "%ORT_BUILD_DIR%" --prefix "%LIBRARY_PREFIX%"
if errorlevel 1 exit 1
@rem ORT installs its model-test runner whenever the unit tests are built: a test tool, not the library
if exist "%LIBRARY_BIN%\onnx_test_runner.exe" del /q "%LIBRARY_BIN%\onnx_test_runner.exe"
@rem the source tree's header layout as well, which conda-forge's earlier onnxruntime-cpp builds shipped:
@rem code written for them includes <onnxruntime/core/session/onnxruntime_cxx_api.h>
xcopy /E /I /Y /Q "include\onnxruntime" "%LIBRARY_INC%\onnxruntime\"
if errorlevel 1 exit 1
