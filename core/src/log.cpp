// See log.hpp: structured log lines, batched per turn of the event loop.
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

// Writes a field of a line, given as json or as a Field, in the line's format.
struct FieldWriter {
  std::string& line;
  Format format;

  void name(std::string_view name) {
    if (format == Format::text) {
      line += ' ';
      line += name;
      line += '=';
      return;
    }
    line += line.empty() ? '{' : ',';
    append_json_string(line, name);
    line += ':';
  }
  void value(const nlohmann::json& value) {
    if (format == Format::text)
      line += value.is_string() ? value.get_ref<const std::string&>() : value.dump();
    else
      append_json_value(value);
  }
  void value(const Field& field) {
    char digits[24];
    if (const auto* number = std::get_if<std::uint64_t>(&field.value))
      line.append(digits, std::to_chars(digits, std::end(digits), *number).ptr);
    else if (format == Format::text)
      line += std::get<std::string_view>(field.value);
    else
      append_json_string(line, std::get<std::string_view>(field.value));
  }

  // A field's value as nlohmann dumps it; strings and integers, nearly all of them, are written
  // without a dump's temporary string.
  void append_json_value(const nlohmann::json& value) {
    char digits[24];
    switch (value.type()) {
      case nlohmann::json::value_t::string:
        return append_json_string(line, value.get_ref<const std::string&>());
      case nlohmann::json::value_t::number_unsigned:
        line.append(digits,
                    std::to_chars(digits, std::end(digits), value.get<std::uint64_t>()).ptr);
        return;
      case nlohmann::json::value_t::number_integer:
        line.append(digits, std::to_chars(digits, std::end(digits), value.get<std::int64_t>()).ptr);
        return;
      default:
        line += value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
  }
};

bool is_head(std::string_view name) {
  return name == "time" || name == "level" || name == "msg";
}

// text: `time level message key=value…`; json: {"time":…,"level":…,"msg":…, then the fields in
// their order}, where a field named time, level or msg replaces that value in place. Written
// piece by piece: copying the fields into an ordered json first cost more than the dump.
// each_field(f) calls f(name, value) for each field, in order.
template <class Each>
std::string format_line(Level level, std::string_view message, Each each_field) {
  std::string line;
  line.reserve(256);
  FieldWriter writer{line, g_format};
  const auto now = iso8601_utc(SystemClock::now());
  if (g_format == Format::text) {
    line.append(now).append(" ").append(level_name(level)).append(" ").append(message);
    each_field([&](std::string_view name, const auto& value) {
      writer.name(name);
      writer.value(value);
    });
    line += '\n';
    return line;
  }
  const auto head = [&](std::string_view name, std::string_view value) {
    writer.name(name);
    bool replaced = false;
    each_field([&](std::string_view field, const auto& given) {
      if (field == name && !replaced) {
        writer.value(given);
        replaced = true;
      }
    });
    if (!replaced) append_json_string(line, value);
  };
  head("time", now);
  head("level", level_name(level));
  head("msg", message);
  each_field([&](std::string_view name, const auto& value) {
    if (is_head(name)) return;
    writer.name(name);
    writer.value(value);
  });
  line += "}\n";
  return line;
}

// Adds a finished line to the batch, or writes it.
void emit(Level level, const std::string& line) {
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

}  // namespace

void set_format(Format format) {
  g_format = format;
}

Format default_format() {
  return ::isatty(STDERR_FILENO) ? Format::text : Format::json;
}

void write(Level level, std::string_view message, const nlohmann::json& fields) {
  emit(level, format_line(level, message, [&](const auto& each) {
         if (fields.is_object())
           for (const auto& [name, value] : fields.items()) each(name, value);
       }));
}

void write_fields(Level level, std::string_view message, std::initializer_list<Field> fields) {
  emit(level, format_line(level, message, [&](const auto& each) {
         for (const auto& field : fields) each(field.name, field);
       }));
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
