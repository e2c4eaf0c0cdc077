@rem Loads a plugin EP library into the onnxruntime core of this test environment:
@rem     call run_plugin_load_test.bat LIBRARY EP_NAME
@rem Windows has no stub of the driver, so without nvcuda.dll the test cannot load the library and is
@rem skipped with the reason; with the driver it runs, requiring a device when nvidia-smi lists a GPU.
@echo on

python -c "import ctypes; ctypes.WinDLL('nvcuda.dll')"
if errorlevel 1 (
    echo SKIPPED: nvcuda.dll, which comes only with the NVIDIA driver, cannot be loaded on this machine and Windows has no stub of it, so %~1 cannot be loaded here
    exit /b 0
)

set "REQUIRE_DEVICE="
nvidia-smi -L 2>nul | findstr /b /c:"GPU " >nul
if not errorlevel 1 set "REQUIRE_DEVICE=--require-device"

python test_plugin_load.py --library "%~1" --ep-name "%~2" %REQUIRE_DEVICE%
if errorlevel 1 exit /b 1
