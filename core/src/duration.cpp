#include "inflight/core/duration.hpp"

#include <charconv>
#include <cstdint>
#include <limits>

namespace inflight {

namespace {

std::optional<std::int64_t> unit_ms(std::string_view unit) {
  if (unit == "ms") return 1;
  if (unit == "s") return 1000;
  if (unit == "m") return 60'000;
  if (unit == "h") return 3'600'000;
  if (unit == "d") return 86'400'000;
  return std::nullopt;
}

}  // namespace

std::optional<Duration> parse_duration(std::string_view text) {
  if (text == "0") return Duration::zero();
  std::int64_t count = 0;
  const auto [rest, ec] = std::from_chars(text.data(), text.data() + text.size(), count);
  if (ec != std::errc{} || rest == text.data() || count < 0) return std::nullopt;
  const auto scale = unit_ms(std::string_view(rest, text.data() + text.size() - rest));
  if (!scale || count > std::numeric_limits<std::int64_t>::max() / *scale) return std::nullopt;
  return Duration(count * *scale);
}

std::string format_duration(Duration d) {
  const auto ms = d.count();
  if (ms % 1000 != 0) return std::to_string(ms) + "ms";
  return std::to_string(ms / 1000) + "s";
}

}  // namespace inflight
