// Durations as every option and config key writes them (docs/serve.md "Options, variables and the
// config file"): one parser, so that a flag, a variable and a default read alike.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace inflight {

using Duration = std::chrono::milliseconds;

// Parses `250ms`, `30s`, `5m`, `2h`, `7d` or a bare `0`; nullopt when malformed.
std::optional<Duration> parse_duration(std::string_view text);

std::string format_duration(Duration d);

}  // namespace inflight
