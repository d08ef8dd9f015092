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

std::optional<SystemClock::time_point> parse_iso8601_utc(std::string_view text) {
  std::tm tm{};
  const std::string copy(text);
  const char* end = strptime(copy.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  if (end == nullptr || *end != '\0' || copy.size() != 20) return std::nullopt;
  return SystemClock::from_time_t(timegm(&tm));
}

}  // namespace inflight
