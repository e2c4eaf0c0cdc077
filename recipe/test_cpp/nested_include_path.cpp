// Compiled into the same program as list_providers.cpp, but through the source tree's header path that
// conda-forge's earlier onnxruntime-cpp builds installed: code written for them has to keep compiling.
#include <onnxruntime/core/session/onnxruntime_cxx_api.h>

#include <string>

std::string version_through_nested_headers() { return Ort::GetVersionString(); }
