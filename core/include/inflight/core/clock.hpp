// The two clocks: the wall clock for what people read (run-params.json, logs),
// the steady clock for every deadline and period.
#pragma once

#include <chrono>
#include <string>

namespace inflight {

using SystemClock = std::chrono::system_clock;
using SteadyClock = std::chrono::steady_clock;

// `2026-11-21T10:15:00Z`
std::string iso8601_utc(SystemClock::time_point t);

}  // namespace inflight
