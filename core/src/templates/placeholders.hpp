// `{name}` placeholders inside argv strings.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace inflight {

// The names of the placeholders in `text`, in order.
std::vector<std::string> placeholder_names(const std::string& text);

// `text` with every placeholder replaced by lookup(name).
std::string substitute(const std::string& text,
                       const std::function<std::string(const std::string&)>& lookup);

inline const std::vector<std::string> kBuiltinPlaceholders{"run_id", "output_dir", "attempt"};

}  // namespace inflight
