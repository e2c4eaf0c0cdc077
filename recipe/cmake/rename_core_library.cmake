# Included after ONNX Runtime's project() (CMAKE_PROJECT_onnxruntime_INCLUDE) by the Windows builds.
# Windows ships a System32\onnxruntime.dll of its own, which the loader finds before the one in the
# environment, so conda-forge's core library is onnxruntime_conda.dll (with onnxruntime_conda.lib);
# the exported CMake target onnxruntime::onnxruntime follows the new name.
function(conda_forge_rename_core_library)
  if(TARGET onnxruntime)
    set_target_properties(onnxruntime PROPERTIES OUTPUT_NAME onnxruntime_conda)
  endif()
  # This test loads the core by its upstream name, LoadLibrary("onnxruntime.dll")
  # (onnxruntime/test/shared_lib/dlopen_main.cc): after the rename it finds System32's copy or
  # nothing, so it would test that DLL instead of ours. ctest reports it as disabled, not run.
  if(TEST onnxruntime_shared_lib_dlopen_test)
    set_tests_properties(onnxruntime_shared_lib_dlopen_test PROPERTIES DISABLED TRUE)
  endif()
endfunction()
# deferred to the end of the top-level directory: the target and the test are defined after project()
cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL conda_forge_rename_core_library)
