@rem Builds the consumer program in this directory against the onnxruntime-cpp package in %PREFIX% and runs it.
@rem A Release build also keeps MSVC from starting mspdbsrv.exe, whose lingering handles can fail
@rem rattler-build's clean-up of the test directory (prefix-dev/rattler-build#2657).
@echo on

cmake -S "%~dp0." -B build-test-cpp -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=%PREFIX%\Library"
if errorlevel 1 exit /b 1
cmake --build build-test-cpp
if errorlevel 1 exit /b 1
build-test-cpp\list_providers.exe
if errorlevel 1 exit /b 1
