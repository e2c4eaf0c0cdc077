// Reads a plugin's JSON manifest, as installed at <prefix>/share/onnxruntime/ep-plugins/<package>.json.
// Kept apart from run_plugin.cpp and free of ONNX Runtime's headers, so that it can be built and checked
// where no ONNX Runtime library is installed.
#pragma once

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>

struct PluginManifest {
  std::string registration_name;
  std::filesystem::path library;  // absolute
};

// The string value of a top-level key. A regex is enough for the flat objects the packages install;
// a value with escapes is refused rather than read wrongly.
inline std::string manifest_string(const std::string& text, const std::string& key,
                                   const std::filesystem::path& manifest) {
  const std::regex pattern("\"" + key + "\"\\s*:\\s*\"([^\"\\\\]*)\"");
  std::smatch match;
  if (!std::regex_search(text, match, pattern)) {
    throw std::runtime_error(manifest.string() + ": no \"" + key + "\" key with a plain string value");
  }
  if (match[1].length() == 0) {
    throw std::runtime_error(manifest.string() + ": \"" + key + "\" is empty");
  }
  return match[1].str();
}

// The unix layout: <prefix>/share/onnxruntime/ep-plugins/<name>.json, with `library` relative to <prefix>.
inline PluginManifest read_manifest(const std::filesystem::path& path) {
  const std::filesystem::path manifest = std::filesystem::absolute(path);
  std::ifstream stream(manifest);
  if (!stream) {
    throw std::runtime_error(manifest.string() + ": cannot be read");
  }
  std::ostringstream text;
  text << stream.rdbuf();

  PluginManifest plugin;
  plugin.registration_name = manifest_string(text.str(), "registration_name", manifest);
  const std::filesystem::path library = manifest_string(text.str(), "library", manifest);
  if (library.is_absolute()) {
    throw std::runtime_error(manifest.string() + ": \"library\" must be relative to the prefix, not " +
                             library.string());
  }
  const std::filesystem::path prefix = manifest.parent_path().parent_path().parent_path().parent_path();
  plugin.library = (prefix / library).lexically_normal();
  // the core's own message for a missing file does not say which manifest named it
  if (!std::filesystem::is_regular_file(plugin.library)) {
    throw std::runtime_error(manifest.string() + ": its library " + plugin.library.string() + " does not exist");
  }
  return plugin;
}
