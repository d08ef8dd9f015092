// Builds the environments of children and helpers from serve's own: see
// child_environment.hpp for what each gets and why.
#include "inflight/core/child_environment.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>

namespace inflight {

namespace {

std::string_view name_of(std::string_view entry) {
  return entry.substr(0, entry.find('='));
}

std::optional<std::string> lookup(const char* const* env, std::string_view name) {
  for (auto entry = env; *entry != nullptr; ++entry) {
    const std::string_view text = *entry;
    if (name_of(text) == name && text.size() > name.size())
      return std::string(text.substr(name.size() + 1));
  }
  return std::nullopt;
}

void set(std::vector<std::string>& env, const std::string& name, const std::string& value) {
  const auto assignment = name + "=";
  std::erase_if(env, [&](const std::string& e) { return e.starts_with(assignment); });
  env.push_back(assignment + value);
}

// A reference is resolved here, late, so that secrets never reach
// run-params.json or a checkpoint; inflight's own settings never resolve.
std::string resolve(const char* const* serve_env, const std::string& value) {
  const auto name = env_reference(value);
  if (!name) return value;
  if (name->starts_with("INFLIGHT_")) return "";
  return lookup(serve_env, *name).value_or("");
}

}  // namespace

bool is_base_variable(std::string_view name) {
  static constexpr std::array<std::string_view, 6> kBase{"PATH", "HOME", "USER",
                                                         "LANG", "TZ",   "TMPDIR"};
  return std::find(kBase.begin(), kBase.end(), name) != kBase.end() || name.starts_with("LC_");
}

std::vector<std::string> child_environment(const char* const* serve_env, const ChildTemplate& child,
                                           const RenderContext& context) {
  std::vector<std::string> env;
  for (auto entry = serve_env; *entry != nullptr; ++entry) {
    const auto name = name_of(*entry);
    if (is_base_variable(name) && std::strchr(*entry, '=') != nullptr) env.emplace_back(*entry);
  }
  for (const auto& name : child.inherit_env())
    if (auto value = lookup(serve_env, name)) set(env, name, *value);
  for (const auto& [name, value] : child.render_env(context))
    set(env, name, resolve(serve_env, value));
  return env;
}

// What libgit2, OpenSSL and the sanitizers read, beside the base: proxies,
// CA locations, the loader's path and preloads, sanitizer options, and
// libfaketime's settings (the agent keeps serve's view of the clock).
bool is_agent_variable(std::string_view name) {
  static constexpr std::array<std::string_view, 17> kAgent{"http_proxy",
                                                           "HTTP_PROXY",
                                                           "https_proxy",
                                                           "HTTPS_PROXY",
                                                           "no_proxy",
                                                           "NO_PROXY",
                                                           "all_proxy",
                                                           "ALL_PROXY",
                                                           "SSL_CERT_FILE",
                                                           "SSL_CERT_DIR",
                                                           "LD_LIBRARY_PATH",
                                                           "LD_PRELOAD",
                                                           "ASAN_OPTIONS",
                                                           "LSAN_OPTIONS",
                                                           "UBSAN_OPTIONS",
                                                           "FAKETIME",
                                                           "FAKETIME_DONT_FAKE_MONOTONIC"};
  return is_base_variable(name) || std::find(kAgent.begin(), kAgent.end(), name) != kAgent.end();
}

std::vector<std::string> agent_environment(const char* const* serve_env) {
  std::vector<std::string> env;
  for (auto entry = serve_env; *entry != nullptr; ++entry)
    if (is_agent_variable(name_of(*entry)) && std::strchr(*entry, '=') != nullptr)
      env.emplace_back(*entry);
  return env;
}

}  // namespace inflight
