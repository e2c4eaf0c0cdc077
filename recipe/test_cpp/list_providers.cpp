// Prints the version of the ONNX Runtime library this program loaded and its execution providers;
// fails unless the version is the one the CMake package announced, the code compiled through the
// nested header path (nested_include_path.cpp) sees the same library, and the CPU provider is there.
#include <onnxruntime_cxx_api.h>

#include <algorithm>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

std::string version_through_nested_headers();

int main() {
  const std::string version = OrtGetApiBase()->GetVersionString();
  std::cout << "ONNX Runtime core version: " << version << "\n";
  if (version != EXPECTED_ORT_VERSION) {
    // e.g. Windows resolving onnxruntime.dll to C:\Windows\System32 before the environment's copy
    std::cerr << "FAIL: loaded ONNX Runtime " << version << " but the CMake package is " << EXPECTED_ORT_VERSION
              << ": the program picked up another onnxruntime library\n";
    return 1;
  }
  const std::string nested_version = version_through_nested_headers();
  if (nested_version != version) {
    std::cerr << "FAIL: code including <onnxruntime/core/session/onnxruntime_cxx_api.h> sees ONNX Runtime "
              << nested_version << ", the rest of the program " << version << "\n";
    return 1;
  }
  std::cout << "nested header path: <onnxruntime/core/session/onnxruntime_cxx_api.h> compiled and linked\n";

  std::vector<std::string> providers;
  try {
    providers = Ort::GetAvailableProviders();
  } catch (const std::exception& error) {
    std::cerr << "FAIL: GetAvailableProviders: " << error.what() << "\n";
    return 1;
  }
  std::cout << "available providers:";
  for (const auto& provider : providers) {
    std::cout << " " << provider;
  }
  std::cout << "\n";

  if (std::find(providers.begin(), providers.end(), "CPUExecutionProvider") == providers.end()) {
    std::cerr << "FAIL: CPUExecutionProvider is not among the available providers\n";
    return 1;
  }
  return 0;
}
