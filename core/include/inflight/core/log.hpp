// Structured log lines on stderr: one JSON object per line for machines, or
// `time level message key=value…` for people.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string_view>
#include <variant>

namespace inflight::log {

enum class Format { text, json };
enum class Level { info, warn, error };

// Defaults to text on a TTY, json otherwise.
void set_format(Format format);
Format default_format();

void write(Level level, std::string_view message, const nlohmann::json& fields = {});

// A field of a line written from its values, with no json object built first: a model call
// logs two lines, and building their objects cost more than writing them. The line is the
// one write() gives for the same fields, which a json object orders by name. A name of its own:
// an overload of write() would take any braced list of fields that fit.
struct Field {
  std::string_view name;
  std::variant<std::string_view, std::uint64_t> value;
};
void write_fields(Level level, std::string_view message, std::initializer_list<Field> fields);

// While a Batch lives, info lines are gathered in memory and written by
// flush(), which `schedule_flush` arranges to run soon: an event loop posts
// it, so that the lines of one turn of the loop cost one write(2), not one
// each (a model call writes two). A warning or an error flushes at once, with
// what came before it, so that a line that may precede a crash is not held.
// Lines are written in pieces of at most PIPE_BUF bytes that end at a line's
// end: a pipe keeps each piece whole when other processes share stderr. The
// destructor flushes.
class Batch {
 public:
  explicit Batch(std::function<void()> schedule_flush);
  ~Batch();
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;
};

void flush();

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
