// Prints the version of the ONNX Runtime library this program loaded and its execution providers;
// fails unless the version is the one the CMake package announced and the CPU provider is there.
#include <onnxruntime_cxx_api.h>

#include <algorithm>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

int main() {
  const std::string version = OrtGetApiBase()->GetVersionString();
  std::cout << "ONNX Runtime core version: " << version << "\n";
  if (version != EXPECTED_ORT_VERSION) {
    // e.g. Windows resolving onnxruntime.dll to C:\Windows\System32 before the environment's copy
    std::cerr << "FAIL: loaded ONNX Runtime " << version << " but the CMake package is " << EXPECTED_ORT_VERSION
              << ": the program picked up another onnxruntime library\n";
    return 1;
  }

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
