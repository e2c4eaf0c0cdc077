// run_plugin MANIFEST MODEL
//
// Registers the plugin EP library that MANIFEST names, runs MODEL on that EP alone and compares its
// output with the CPU EP's. MODEL is y = Relu(MatMul(a, b) + a) * b on two 4x4 float inputs, the model of
// recipe/test_plugin_load.py, and the inputs are that script's. Exit 0 when the results match, 1 with
// the reason otherwise, 2 for wrong arguments.
#include <onnxruntime_cxx_api.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "plugin_manifest.h"

namespace {

constexpr std::array<int64_t, 2> kShape{4, 4};
constexpr size_t kElements = 16;

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void step(const std::string& label, const std::string& message) {
  std::cout << label << std::string(label.size() < 10 ? 10 - label.size() : 0, ' ') << " " << message << std::endl;
}

// Small integers stay exact under reduced-precision math (TF32, fp16 accumulation), so any difference
// from the CPU result is a real error.
std::array<float, kElements> input_a() {
  std::array<float, kElements> a{};
  for (size_t i = 0; i < kElements; ++i) a[i] = static_cast<float>(i % 5) - 2;  // (arange(16) % 5) - 2
  return a;
}

std::array<float, kElements> input_b() {
  std::array<float, kElements> b{};
  for (size_t row = 0; row < 4; ++row)  // (arange(16).reshape(4, 4).T % 3) - 1
    for (size_t col = 0; col < 4; ++col) b[row * 4 + col] = static_cast<float>((col * 4 + row) % 3) - 1;
  return b;
}

std::vector<float> run_model(Ort::Session& session) {
  auto a = input_a();
  auto b = input_b();
  const auto memory = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
  std::vector<Ort::Value> inputs;
  inputs.push_back(Ort::Value::CreateTensor<float>(memory, a.data(), a.size(), kShape.data(), kShape.size()));
  inputs.push_back(Ort::Value::CreateTensor<float>(memory, b.data(), b.size(), kShape.data(), kShape.size()));
  const char* input_names[] = {"a", "b"};
  const char* output_names[] = {"y"};
  auto outputs = session.Run(Ort::RunOptions{nullptr}, input_names, inputs.data(), inputs.size(), output_names, 1);
  const size_t count = outputs.at(0).GetTensorTypeAndShapeInfo().GetElementCount();
  if (count != kElements) throw Failure("the model's output y has " + std::to_string(count) + " values, not 16");
  const float* y = outputs[0].GetTensorData<float>();
  return {y, y + count};
}

// Op types per EP, as the session assigned them; needs session.record_ep_graph_assignment_info.
std::map<std::string, std::vector<std::string>> op_types_per_ep(const Ort::Session& session) {
  std::map<std::string, std::vector<std::string>> op_types;
  for (const auto& subgraph : session.GetEpGraphAssignmentInfo())
    for (const auto& node : subgraph.GetNodes()) op_types[subgraph.GetEpName()].push_back(node.GetOperatorType());
  return op_types;
}

std::string describe(const std::map<std::string, std::vector<std::string>>& op_types) {
  std::string text;
  for (const auto& [ep, ops] : op_types) {
    text += (text.empty() ? "" : "; ") + ep + ":";
    for (const auto& op : ops) text += " " + op;
  }
  return text.empty() ? "no nodes" : text;
}

// Every node on `ep` and none elsewhere, or a Failure naming where they went.
std::string prove_nodes_on(const Ort::Session& session, const std::string& ep) {
  const auto op_types = op_types_per_ep(session);
  if (op_types.size() != 1 || op_types.begin()->first != ep)
    throw Failure("not every node was assigned to " + ep + ": " + describe(op_types));
  return "all " + std::to_string(op_types.begin()->second.size()) + " nodes on " + describe(op_types);
}

Ort::SessionOptions recording_options() {
  Ort::SessionOptions options;
  options.AddConfigEntry("session.record_ep_graph_assignment_info", "1");
  return options;
}

std::vector<float> run_on_cpu(Ort::Env& env, const std::filesystem::path& model) {
  // no EP appended: the CPU EP alone, whatever is registered with the environment
  Ort::Session session(env, model.c_str(), recording_options());
  step("cpu", prove_nodes_on(session, "CPUExecutionProvider"));
  return run_model(session);
}

std::vector<float> run_on_plugin(Ort::Env& env, const PluginManifest& plugin, const std::filesystem::path& model) {
  std::vector<Ort::ConstEpDevice> devices;
  for (const auto& device : env.GetEpDevices()) {
    if (plugin.registration_name == device.EpName()) devices.push_back(device);
  }
  if (devices.empty()) throw Failure("no device for " + plugin.registration_name + " (" + plugin.library.string() + ")");
  for (const auto& device : devices) {
    const bool gpu = device.Device().Type() == OrtHardwareDeviceType_GPU;
    step("device", std::string(device.EpName()) + " on " + (gpu ? "GPU" : "a device that is not a GPU") +
                       " (vendor " + device.EpVendor() + ")");
  }

  Ort::SessionOptions options = recording_options();
  // Without this the core quietly runs unsupported nodes, or the whole model, on the CPU EP: with it,
  // the session exists only if the plugin took every node.
  options.AddConfigEntry("session.disable_cpu_ep_fallback", "1");
  options.AppendExecutionProvider_V2(env, devices, std::unordered_map<std::string, std::string>{});
  Ort::Session session(env, model.c_str(), options);
  step("session", prove_nodes_on(session, plugin.registration_name));
  return run_model(session);
}

int check(const PluginManifest& plugin, const std::filesystem::path& model) {
  step("core", "ONNX Runtime " + Ort::GetVersionString());
  Ort::Env env;
  env.RegisterExecutionProviderLibrary(plugin.registration_name.c_str(), plugin.library.native());
  step("register", plugin.registration_name + " <- " + plugin.library.string());

  const std::vector<float> result = run_on_plugin(env, plugin, model);
  const std::vector<float> expected = run_on_cpu(env, model);
  float max_difference = 0;
  bool match = true;
  for (size_t i = 0; i < kElements; ++i) {
    const float difference = std::fabs(result[i] - expected[i]);
    max_difference = std::max(max_difference, difference);
    match = match && difference <= 1e-6f + 1e-5f * std::fabs(expected[i]);  // test_plugin_load.py's tolerances
  }
  if (!match) {
    std::string values;
    for (size_t i = 0; i < kElements; ++i)
      values += " " + std::to_string(result[i]) + "/" + std::to_string(expected[i]);
    throw Failure(plugin.registration_name + " and the CPU EP differ (max abs difference " +
                  std::to_string(max_difference) + "), plugin/CPU value by value:" + values);
  }
  step("compare", std::to_string(kElements) + " values match the CPU EP (max abs difference " +
                      std::to_string(max_difference) + ")");

  // the sessions are gone by now, so nothing uses the library any more
  env.UnregisterExecutionProviderLibrary(plugin.registration_name.c_str());
  step("unregister", plugin.registration_name);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: " << (argc > 0 ? argv[0] : "run_plugin") << " MANIFEST MODEL\n";
    return 2;
  }
  try {
    const PluginManifest plugin = read_manifest(argv[1]);
    return check(plugin, argv[2]);
  } catch (const Ort::Exception& error) {
    std::cerr << "FAILED: ONNX Runtime error " << error.GetOrtErrorCode() << ": " << error.what() << "\n";
  } catch (const std::exception& error) {
    std::cerr << "FAILED: " << error.what() << "\n";
  }
  return 1;
}
