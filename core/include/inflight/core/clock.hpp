// The two clocks: the wall clock for what people read (run-params.json, logs),
// the steady clock for every deadline and period.
#pragma once

#include <chrono>
#include <cstdint>
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

// Whole seconds since the epoch: how the agent's messages carry a lease's end.
inline std::int64_t epoch_seconds(SystemClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}
inline std::optional<std::int64_t> epoch_seconds(std::optional<SystemClock::time_point> t) {
  return t ? std::optional(epoch_seconds(*t)) : std::nullopt;
}

}  // namespace inflight
