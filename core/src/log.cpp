#include "inflight/core/log.hpp"

#include <limits.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <mutex>
#include <string>

#include "inflight/core/bounded_json.hpp"
#include "inflight/core/clock.hpp"

namespace inflight::log {

namespace {

Format g_format = default_format();

// The batch's lines, guarded: serve logs from worker threads too.
struct Pending {
  std::mutex mutex;
  std::string lines;
  std::function<void()> schedule_flush;  // empty: no batch, every line written at once
  bool flush_scheduled = false;
};

Pending& pending() {
  static Pending p;
  return p;
}

// Called with the mutex held, so that lines of two threads keep their order.
void write_out(std::string_view lines) {
  while (!lines.empty()) {
    std::size_t piece = lines.size();
    if (piece > PIPE_BUF) {
      auto end = lines.rfind('\n', PIPE_BUF - 1);
      if (end == std::string_view::npos) end = lines.find('\n');  // a longer line goes alone
      piece = end == std::string_view::npos ? lines.size() : end + 1;
    }
    [[maybe_unused]] auto written = ::write(STDERR_FILENO, lines.data(), piece);
    lines.remove_prefix(piece);
  }
}

// What the batch may hold before it is written without waiting for its flush.
constexpr std::size_t kMaxPending = 64 * 1024;

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

// A field's value as nlohmann dumps it; strings and integers, nearly all of them, are written
// without a dump's temporary string.
void append_json_value(std::string& line, const nlohmann::json& value) {
  char digits[24];
  switch (value.type()) {
    case nlohmann::json::value_t::string:
      return append_json_string(line, value.get_ref<const std::string&>());
    case nlohmann::json::value_t::number_unsigned:
      line.append(digits, std::to_chars(digits, std::end(digits), value.get<std::uint64_t>()).ptr);
      return;
    case nlohmann::json::value_t::number_integer:
      line.append(digits, std::to_chars(digits, std::end(digits), value.get<std::int64_t>()).ptr);
      return;
    default:
      line += value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
}

// {"time":…,"level":…,"msg":…, then the fields in their order}; a field named time, level or
// msg replaces that value in place. Written piece by piece: serve logs two lines a model call,
// and copying the fields into an ordered json first cost more than the dump.
std::string json_line(Level level, std::string_view message, const nlohmann::json& fields) {
  std::string line;
  line.reserve(256);
  const auto key = [&](std::string_view name) {
    line += line.empty() ? '{' : ',';
    append_json_string(line, name);
    line += ':';
  };
  const auto head = [&](std::string_view name, std::string_view value) {
    key(name);
    const auto it = fields.is_object() ? fields.find(name) : fields.end();
    if (it != fields.end())
      append_json_value(line, *it);
    else
      append_json_string(line, value);
  };
  head("time", iso8601_utc(SystemClock::now()));
  head("level", level_name(level));
  head("msg", message);
  if (fields.is_object())
    for (const auto& [name, value] : fields.items())
      if (name != "time" && name != "level" && name != "msg") {
        key(name);
        append_json_value(line, value);
      }
  line += "}\n";
  return line;
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
  auto& p = pending();
  const std::lock_guard lock(p.mutex);
  if (!p.schedule_flush) return write_out(line);
  p.lines += line;
  if (level != Level::info || p.lines.size() >= kMaxPending) {
    write_out(p.lines);
    p.lines.clear();
  } else if (!p.flush_scheduled) {
    p.flush_scheduled = true;
    p.schedule_flush();
  }
}

void flush() {
  auto& p = pending();
  const std::lock_guard lock(p.mutex);
  write_out(p.lines);
  p.lines.clear();
  p.flush_scheduled = false;
}

Batch::Batch(std::function<void()> schedule_flush) {
  auto& p = pending();
  const std::lock_guard lock(p.mutex);
  p.schedule_flush = std::move(schedule_flush);
}

Batch::~Batch() {
  auto& p = pending();
  const std::lock_guard lock(p.mutex);
  write_out(p.lines);
  p.lines.clear();
  p.schedule_flush = nullptr;
  p.flush_scheduled = false;
}

}  // namespace inflight::log
