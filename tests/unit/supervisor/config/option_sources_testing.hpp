// What the settings tests share: options from fixed flags, variables and a
// config file, with a fixed pod name so that the real $HOSTNAME plays no
// part, and the message of a refused combination.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "inflight/supervisor/config/settings.hpp"

namespace inflight::settings_testing {

using Flags = std::map<std::string, std::string>;
using Env = std::map<std::string, std::string>;

inline OptionSources::EnvLookup fake_env(Env env) {
  return [env = std::move(env)](const std::string& name) -> std::optional<std::string> {
    if (auto it = env.find(name); it != env.end()) return it->second;
    return std::nullopt;
  };
}

inline OptionSources sources(Flags flags, Env env = {}, OrderedJson file = OrderedJson::object()) {
  flags.emplace("pod-name", "pod-a");
  return OptionSources(std::move(flags), std::move(file), fake_env(std::move(env)));
}

// The message of the UsageError that reading serve settings throws.
inline std::string usage_error(const OptionSources& s) {
  try {
    read_serve_settings(s);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "<accepted>";
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace inflight::settings_testing
