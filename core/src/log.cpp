#include "inflight/core/log.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "inflight/core/clock.hpp"

namespace inflight::log {

namespace {

Format g_format = default_format();

std::string_view level_name(Level level) {
  switch (level) {
    case Level::info:
      return "info";
    case Level::warn:
      return "warn";
    case Level::error:
      return "error";
  }
  return "info";
}

std::string text_line(Level level, std::string_view message, const nlohmann::json& fields) {
  std::string line = iso8601_utc(SystemClock::now()) + " " + std::string(level_name(level)) + " " +
                     std::string(message);
  if (fields.is_object()) {
    for (const auto& [key, value] : fields.items())
      line += " " + key + "=" + (value.is_string() ? value.get<std::string>() : value.dump());
  }
  return line + "\n";
}

std::string json_line(Level level, std::string_view message, const nlohmann::json& fields) {
  nlohmann::ordered_json line{
      {"time", iso8601_utc(SystemClock::now())}, {"level", level_name(level)}, {"msg", message}};
  if (fields.is_object())
    for (const auto& [key, value] : fields.items()) line[key] = value;
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace

void set_format(Format format) {
  g_format = format;
}

Format default_format() {
  return ::isatty(STDERR_FILENO) ? Format::text : Format::json;
}

void write(Level level, std::string_view message, const nlohmann::json& fields) {
  const auto line = g_format == Format::json ? json_line(level, message, fields)
                                             : text_line(level, message, fields);
  // One write per line keeps lines whole when several processes share stderr.
  [[maybe_unused]] auto written = ::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace inflight::log
