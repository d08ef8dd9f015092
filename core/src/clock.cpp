// Wall-clock times as run-params.json and logs write them.
#include "inflight/core/clock.hpp"

#include <ctime>

namespace inflight {

std::string iso8601_utc(SystemClock::time_point t) {
  const std::time_t secs = SystemClock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace inflight
