// The two clocks: the wall clock for what people read (run-params.json, logs),
// the steady clock for every deadline and period.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace inflight {

using SystemClock = std::chrono::system_clock;
using SteadyClock = std::chrono::steady_clock;

// `2026-11-21T10:15:00Z`
std::string iso8601_utc(SystemClock::time_point t);
// The time iso8601_utc() wrote, or nullopt for any other text.
std::optional<SystemClock::time_point> parse_iso8601_utc(std::string_view text);

}  // namespace inflight
