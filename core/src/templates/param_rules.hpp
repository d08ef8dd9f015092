// The rules a request's param must meet (type, range, pattern, no leading
// dash): one check for a submit and for every attempt's revalidation.
#pragma once

#include <optional>
#include <string>

#include "inflight/core/child_template.hpp"

namespace inflight {

// Why `value` is not acceptable for `param`, or nullopt when it is.
std::optional<std::string> check_value(const ParamSpec& param, const OrderedJson& value);

}  // namespace inflight
