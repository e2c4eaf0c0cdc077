# Included after ONNX Runtime's project() (CMAKE_PROJECT_onnxruntime_INCLUDE) by build_ep_cuda.py.
# The plugin's SM90 TMA units (ORT's onnxruntime_providers_cuda_plugin_sm90_tma target: the SM90
# fpA_intB GEMM launchers and MoE GEMMs) take the most memory of any unit in one cicc process
# (docs/build-cost/2026-12-02.md has the measurements). A ninja pool lets at most
# CONDA_FORGE_SM90_TMA_JOBS of them compile at once, while the build's other jobs go on with the rest.
function(conda_forge_sm90_tma_job_pool)
  if(TARGET onnxruntime_providers_cuda_plugin_sm90_tma)
    set_property(GLOBAL APPEND PROPERTY JOB_POOLS "conda_forge_sm90_tma=${CONDA_FORGE_SM90_TMA_JOBS}")
    set_property(TARGET onnxruntime_providers_cuda_plugin_sm90_tma PROPERTY JOB_POOL_COMPILE conda_forge_sm90_tma)
  endif()
endfunction()
# deferred to the end of the top-level directory: ORT defines the target after project()
cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL conda_forge_sm90_tma_job_pool)
