# Included after ONNX Runtime's project() (CMAKE_PROJECT_onnxruntime_INCLUDE) by the Windows builds.
# Windows ships a System32\onnxruntime.dll of its own, which the loader finds before the one in the
# environment, so conda-forge's core library is onnxruntime_conda.dll (with onnxruntime_conda.lib);
# the exported CMake target onnxruntime::onnxruntime follows the new name.
function(conda_forge_rename_core_library)
  if(TARGET onnxruntime)
    set_target_properties(onnxruntime PROPERTIES OUTPUT_NAME onnxruntime_conda)
  endif()
endfunction()
# deferred to the end of the top-level directory: the target is defined after project()
cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL conda_forge_rename_core_library)
