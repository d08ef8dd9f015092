#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace inflight {

using SystemClock = std::chrono::system_clock;
using SteadyClock = std::chrono::steady_clock;

// `2026-11-21T10:15:00Z`
std::string iso8601_utc(SystemClock::time_point t);
std::optional<SystemClock::time_point> parse_iso8601_utc(const std::string& text);

}  // namespace inflight
