// Reads the config's `models`: see model_specs.hpp.
#include "inflight/core/model_specs.hpp"

#include <algorithm>
#include <charconv>
#include <regex>
#include <set>

namespace inflight {

namespace {

std::string text_of(const OrderedJson& value, const std::string& where) {
  if (!value.is_string()) throw ConfigError(where, "must be a string");
  return value.get<std::string>();
}

bool is_host(const std::string& host) {
  static const std::regex kHost("^[A-Za-z0-9]([A-Za-z0-9.-]{0,252})?$|^[0-9A-Fa-f:.]{2,45}$");
  return std::regex_match(host, kHost);
}

bool is_path(const std::string& path) {
  static const std::regex kPath("^(/[A-Za-z0-9._~!$&'()*+,;=:@%-]*)*$");
  return path.size() <= 1024 && std::regex_match(path, kPath);
}

ModelAuth auth_named(const std::string& word, const std::string& where) {
  if (word == "bearer") return ModelAuth::bearer;
  if (word == "x-api-key") return ModelAuth::x_api_key;
  throw ConfigError(where, "'" + word + "' is not bearer or x-api-key");
}

void read_key(ModelSpec& spec, const OrderedJson& model, const std::string& where) {
  if (model.contains("api_key_env")) {
    spec.api_key_env = text_of(model["api_key_env"], where + ".api_key_env");
    static const std::regex kVariable("^[A-Za-z_][A-Za-z0-9_]*$");
    if (!std::regex_match(spec.api_key_env, kVariable))
      throw ConfigError(where + ".api_key_env", "is not an environment variable name");
    if (spec.api_key_env.starts_with("INFLIGHT_"))
      throw ConfigError(where + ".api_key_env",
                        "INFLIGHT_* variables hold inflight's own settings and secrets");
  }
  if (model.contains("api_key_file"))
    spec.api_key_file = text_of(model["api_key_file"], where + ".api_key_file");
  if (!spec.api_key_env.empty() && !spec.api_key_file.empty())
    throw ConfigError(where, "give api_key_env or api_key_file, not both");
}

void read_ignore_fields(ModelSpec& spec, const OrderedJson& model, const std::string& where) {
  if (!model.contains("ignore_fields")) return;
  const auto& fields = model["ignore_fields"];
  if (!fields.is_array() || fields.size() > 64)
    throw ConfigError(where + ".ignore_fields", "must be an array of at most 64 JSON pointers");
  for (const auto& field : fields) {
    const auto pointer = text_of(field, where + ".ignore_fields");
    try {
      (void)nlohmann::json::json_pointer(pointer);
    } catch (const nlohmann::json::exception&) {
      throw ConfigError(where + ".ignore_fields", "'" + pointer + "' is not a JSON pointer");
    }
    if (pointer.empty())
      throw ConfigError(where + ".ignore_fields", "the empty pointer would ignore the whole body");
    spec.ignore_fields.push_back(pointer);
  }
}

ModelSpec parse_model(const std::string& name, const OrderedJson& model, const std::string& where) {
  static const std::set<std::string> kKeys{"upstream", "api_key_env",   "api_key_file", "auth",
                                           "timeout",  "ignore_fields", "replay",       "ca_file"};
  if (!model.is_object()) throw ConfigError(where, "must be an object");
  for (const auto& [key, value] : model.items())
    if (!kKeys.count(key)) throw ConfigError(where + "." + key, "unknown key");
  ModelSpec spec;
  spec.name = name;
  if (!model.contains("upstream")) throw ConfigError(where + ".upstream", "is required");
  const auto upstream = text_of(model["upstream"], where + ".upstream");
  auto url = parse_upstream_url(upstream);
  if (!url)
    throw ConfigError(where + ".upstream", "'" + upstream +
                                               "' is not an http:// or https:// URL with a host "
                                               "(no user, query or fragment)");
  spec.upstream = *url;
  read_key(spec, model, where);
  if (model.contains("auth"))
    spec.auth = auth_named(text_of(model["auth"], where + ".auth"), where + ".auth");
  if (model.contains("timeout")) {
    const auto timeout = parse_duration(text_of(model["timeout"], where + ".timeout"));
    if (!timeout || *timeout <= Duration::zero())
      throw ConfigError(where + ".timeout", "must be a duration such as 90s or 10m");
    spec.timeout = *timeout;
  }
  if (model.contains("replay")) {
    if (!model["replay"].is_boolean()) throw ConfigError(where + ".replay", "must be a boolean");
    spec.replay = model["replay"].get<bool>();
  }
  read_ignore_fields(spec, model, where);
  if (model.contains("ca_file")) spec.ca_file = text_of(model["ca_file"], where + ".ca_file");
  return spec;
}

}  // namespace

std::string UpstreamUrl::origin() const {
  const bool ipv6 = host.find(':') != std::string::npos;
  return std::string(tls ? "https://" : "http://") + (ipv6 ? "[" + host + "]" : host) + ":" + port;
}

bool is_model_name(const std::string& name) {
  // [A-Za-z0-9_][A-Za-z0-9_.-]{0,63}, a byte at a time: each model call's path names its model,
  // and a regex match cost more than the rest of reading the path.
  const auto word = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  };
  return !name.empty() && name.size() <= 64 && word(name.front()) &&
         std::all_of(name.begin() + 1, name.end(),
                     [&](char c) { return word(c) || c == '.' || c == '-'; });
}

std::optional<UpstreamUrl> parse_upstream_url(const std::string& text) {
  UpstreamUrl url;
  std::string rest;
  if (text.starts_with("https://")) {
    url.tls = true;
    rest = text.substr(8);
  } else if (text.starts_with("http://")) {
    rest = text.substr(7);
  } else {
    return std::nullopt;
  }
  const auto slash = rest.find('/');
  auto authority = rest.substr(0, slash);
  url.base_path = slash == std::string::npos ? "" : rest.substr(slash);
  while (url.base_path.ends_with('/')) url.base_path.pop_back();
  if (authority.find('@') != std::string::npos || !is_path(url.base_path)) return std::nullopt;
  url.port = url.tls ? "443" : "80";
  std::string port;
  if (authority.starts_with('[')) {
    const auto close = authority.find(']');
    if (close == std::string::npos) return std::nullopt;
    url.host = authority.substr(1, close - 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return std::nullopt;
      port = authority.substr(close + 2);
    }
  } else {
    const auto colon = authority.find(':');
    url.host = authority.substr(0, colon);
    if (colon != std::string::npos) port = authority.substr(colon + 1);
  }
  if (url.host.empty() || !is_host(url.host)) return std::nullopt;
  if (!port.empty()) {
    int number = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), number);
    if (ec != std::errc{} || end != port.data() + port.size() || number < 1 || number > 65535)
      return std::nullopt;
    url.port = std::to_string(number);
  }
  return url;
}

ModelSpecs parse_model_specs(const OrderedJson& file) {
  ModelSpecs specs;
  if (!file.is_object() || !file.contains("models")) return specs;
  const auto& models = file["models"];
  if (!models.is_object()) throw ConfigError("models", "must be an object of named models");
  for (const auto& [name, model] : models.items()) {
    const auto where = "models." + name;
    if (!is_model_name(name))
      throw ConfigError(where, "a model's name must match [A-Za-z0-9_][A-Za-z0-9_.-]{0,63}");
    auto spec = parse_model(name, model, where);
    if (spec.api_key_env.empty() && spec.api_key_file.empty())
      throw ConfigError(where, "give api_key_env or api_key_file: the key children never hold");
    specs.emplace(name, std::move(spec));
  }
  return specs;
}

}  // namespace inflight
