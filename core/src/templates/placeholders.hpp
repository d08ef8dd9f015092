// `{name}` placeholders inside argv strings.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace inflight {

// The names of the placeholders in `text`, in order.
std::vector<std::string> placeholder_names(const std::string& text);

// `text` with every placeholder replaced by lookup(name).
std::string substitute(const std::string& text,
                       const std::function<std::string(const std::string&)>& lookup);

inline const std::vector<std::string> kBuiltinPlaceholders{"run_id", "output_dir", "attempt"};

// `{model_url:NAME}`: the base URL through which an attempt reaches model
// NAME (SPEC §13); `{model_key}`: its attempt's token, in `env` only.
inline constexpr std::string_view kModelUrlPrefix = "model_url:";
inline constexpr std::string_view kModelKey = "model_key";

// NAME when `placeholder` is `model_url:NAME`.
inline std::optional<std::string> model_url_name(const std::string& placeholder) {
  if (!placeholder.starts_with(kModelUrlPrefix)) return std::nullopt;
  return placeholder.substr(kModelUrlPrefix.size());
}

}  // namespace inflight
