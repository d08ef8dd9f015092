// The config's `models` (docs/models.md "Wiring a model"): the model providers
// that children reach through inflight's journal, by name. Like the child
// templates, only the instance's config names an upstream or a key: a child
// names a model, never a host.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "inflight/core/child_template.hpp"
#include "inflight/core/duration.hpp"

namespace inflight {

// An upstream's base URL, split: `https://api.openai.com:443/base`.
struct UpstreamUrl {
  bool tls = false;
  std::string host;       // a name or an address, without brackets
  std::string port;       // given or the scheme's
  std::string base_path;  // "" or "/base", without a trailing '/'
  // `https://host:port`, without the base path: what a connection is to.
  std::string origin() const;
};

enum class ModelAuth { bearer, x_api_key };

inline constexpr Duration kDefaultModelTimeout{600'000};

struct ModelSpec {
  std::string name;
  UpstreamUrl upstream;
  std::string api_key_env;   // a variable of the instance's environment
  std::string api_key_file;  // or a file holding the key
  ModelAuth auth = ModelAuth::bearer;
  Duration timeout = kDefaultModelTimeout;  // one call's deadline
  bool replay = true;
  std::vector<std::string> ignore_fields;  // JSON pointers left out of a request's identity
  std::string ca_file;                     // else the system's CAs
};

using ModelSpecs = std::map<std::string, ModelSpec>;

// A model's name: what `{model_url:NAME}` and the listener's paths carry.
bool is_model_name(const std::string& name);

// The config file's `models`, empty when it has none. Throws ConfigError
// naming the key that is wrong.
ModelSpecs parse_model_specs(const OrderedJson& file);

// The URL `text` names, or nullopt when it is not `http://` or `https://`,
// a host, an optional port and an optional path (no user, query or fragment).
std::optional<UpstreamUrl> parse_upstream_url(const std::string& text);

}  // namespace inflight
