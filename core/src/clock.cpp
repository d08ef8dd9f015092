// Wall-clock times as run-params.json and logs write them.
#include "inflight/core/clock.hpp"

#include <array>
#include <ctime>
#include <optional>

namespace inflight {

std::string iso8601_utc(SystemClock::time_point t) {
  // Each model call writes three times (its two log lines, its journal
  // record), 8,000 calls a second: a second's text is formatted once.
  thread_local std::optional<std::time_t> formatted_secs;
  thread_local std::array<char, 32> formatted{};
  const std::time_t secs = SystemClock::to_time_t(t);
  if (secs != formatted_secs) {
    std::tm tm{};
    gmtime_r(&secs, &tm);
    std::strftime(formatted.data(), formatted.size(), "%Y-%m-%dT%H:%M:%SZ", &tm);
    formatted_secs = secs;
  }
  return formatted.data();
}

std::optional<SystemClock::time_point> parse_iso8601_utc(std::string_view text) {
  std::tm tm{};
  const std::string copy(text);
  const char* end = strptime(copy.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  if (end == nullptr || *end != '\0' || copy.size() != 20) return std::nullopt;
  return SystemClock::from_time_t(timegm(&tm));
}

}  // namespace inflight
