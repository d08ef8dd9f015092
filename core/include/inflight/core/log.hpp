// Structured log lines on stderr: one JSON object per line for machines, or
// `time level message key=value…` for people.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

namespace inflight::log {

enum class Format { text, json };
enum class Level { info, warn, error };

// Defaults to text on a TTY, json otherwise.
void set_format(Format format);
Format default_format();

void write(Level level, std::string_view message, const nlohmann::json& fields = {});

inline void info(std::string_view message, const nlohmann::json& fields = {}) {
  write(Level::info, message, fields);
}
inline void warn(std::string_view message, const nlohmann::json& fields = {}) {
  write(Level::warn, message, fields);
}
inline void error(std::string_view message, const nlohmann::json& fields = {}) {
  write(Level::error, message, fields);
}

}  // namespace inflight::log
