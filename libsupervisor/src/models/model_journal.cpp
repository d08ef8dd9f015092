// See model_journal.hpp: the journal's record format, written and parsed. Its
// scan is journal_scan.cpp, its writer journal_writer.cpp.
#include "inflight/supervisor/models/model_journal.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>

#include "inflight/core/bounded_json.hpp"
#include "journal_files.hpp"

namespace inflight::models {

namespace {

using JournalJson = nlohmann::ordered_json;

// A line is one object holding one object ("usage"): deeper is not ours.
constexpr int kJournalLineDepth = 4;

// A body's length in a header is at most this (1 TiB), far beyond any journal's limit, so that
// adding it to an offset cannot overflow.
constexpr std::uint64_t kMaxBodyBytes = 1ull << 40;

constexpr std::string_view kBase64Alphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// The bytes of padded base64 text (a v1 line's "body_base64"), or nullopt for anything else.
std::optional<std::string> journal_unbase64(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    const std::size_t padding = !last ? 0 : text[i + 3] != '=' ? 0 : text[i + 2] != '=' ? 1 : 2;
    std::uint32_t group = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      const auto value = k < 4 - padding ? kBase64Alphabet.find(text[i + k]) : 0;
      if (value == std::string_view::npos) return std::nullopt;
      group = group << 6 | static_cast<std::uint32_t>(value);
    }
    for (std::size_t k = 0; k < 3 - padding; ++k)
      out += static_cast<char>((group >> (16 - 8 * k)) & 0xff);
  }
  return out;
}

bool is_request_digest(std::string_view text) {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// The reader's view of a line's object: each field checked, the first problem kept with its
// name, so that a bad line is refused whole.
class JournalFields {
 public:
  explicit JournalFields(const JournalJson& json) : json_(json) {}

  std::string text(const char* key) {
    const auto it = json_.find(key);
    if (it == json_.end() || !it->is_string()) {
      fail(key, "is not a string");
      return {};
    }
    return it->get<std::string>();
  }
  std::uint64_t count(const char* key) { return optional_count(json_, key, true).value_or(0); }
  int number(const char* key, int low, int high) {
    const auto value = count(key);
    if (value < static_cast<std::uint64_t>(low) || value > static_cast<std::uint64_t>(high)) {
      fail(key, "is not between " + std::to_string(low) + " and " + std::to_string(high));
      return 0;
    }
    return static_cast<int>(value);
  }
  bool flag(const char* key) {
    const auto it = json_.find(key);
    if (it == json_.end() || !it->is_boolean()) {
      fail(key, "is not true or false");
      return false;
    }
    return it->get<bool>();
  }
  Usage usage() {
    const auto it = json_.find("usage");
    if (it == json_.end() || !it->is_object()) {
      fail("usage", "is not an object");
      return {};
    }
    return {.input = optional_count(*it, "input", false),
            .output = optional_count(*it, "output", false)};
  }
  std::string body();
  void fail(const std::string& key, const std::string& why) {
    if (!problem_) problem_ = key + " " + why;
  }
  const std::optional<std::string>& problem() const { return problem_; }

 private:
  // A whole number at `key` of `json`; null is nullopt unless `required`.
  std::optional<std::uint64_t> optional_count(const JournalJson& json, const char* key,
                                              bool required) {
    const auto it = json.find(key);
    if (!required && it != json.end() && it->is_null()) return std::nullopt;
    if (it == json.end() || !it->is_number_unsigned()) {
      fail(key, required ? "is not a whole number" : "is not a whole number or null");
      return std::nullopt;
    }
    return it->get<std::uint64_t>();
  }

  const JournalJson& json_;
  std::optional<std::string> problem_;
};

// Exactly one of "body" (UTF-8 text) and "body_base64".
std::string JournalFields::body() {
  const bool text_form = json_.contains("body");
  if (text_form == json_.contains("body_base64")) {
    fail("body", "needs exactly one of body and body_base64");
    return {};
  }
  if (text_form) return text("body");
  auto bytes = journal_unbase64(text("body_base64"));
  if (!bytes) fail("body_base64", "is not base64");
  return bytes.value_or("");
}

}  // namespace

std::string write_journal_record(const JournalRecord& record) {
  // Written field by field, in the order and the form that an ordered_json of these fields dumps
  // (a test holds the two equal): building that json copied every field, the answer most of all.
  // The body goes as it is, so that a long answer costs a copy rather than an escape.
  std::string bytes;
  bytes.reserve(256 + record.path.size() + record.content_type.size() + record.body.size());
  const auto key = [&](std::string_view name) {
    bytes += bytes.empty() ? "{\"" : ",\"";
    bytes += name;
    bytes += "\":";
  };
  const auto text = [&](std::string_view name, const std::string& value) {
    key(name);
    append_json_string(bytes, value);
  };
  const auto count = [](const std::optional<std::uint64_t>& n) {
    return n ? std::to_string(*n) : std::string("null");
  };
  key("v");
  bytes += '2';
  text("digest", record.digest);
  text("model", record.model);
  text("method", record.method);
  text("path", record.path);
  key("attempt");
  bytes += std::to_string(record.attempt);
  key("status");
  bytes += std::to_string(record.status);
  text("content_type", record.content_type);
  key("stream");
  bytes += record.stream ? "true" : "false";
  text("started_at", record.started_at);
  key("ms");
  bytes += std::to_string(record.ms);
  key("usage");
  bytes += R"({"input":)" + count(record.usage.input) + R"(,"output":)" +
           count(record.usage.output) + '}';
  key("body_bytes");
  bytes += std::to_string(record.body.size());
  bytes += "}\n";
  bytes += record.body;
  bytes += '\n';
  return bytes;
}

Result<JournalLine> parse_journal_line(std::string_view line) {
  if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
  const auto json =
      parse_bounded_json(line, {.max_bytes = line.size(), .max_depth = kJournalLineDepth});
  if (!json) return journal_error("a journal line is " + json.error().message);
  if (!json->is_object()) return journal_error("a journal line is not an object");
  JournalFields fields(*json);
  const auto version = fields.count("v");
  if (version != 1 && version != 2) fields.fail("v", "is not 1 or 2");
  JournalLine parsed{.record = {.digest = fields.text("digest"),
                                .model = fields.text("model"),
                                .method = fields.text("method"),
                                .path = fields.text("path"),
                                .attempt = fields.number("attempt", 0, INT_MAX),
                                .status = fields.number("status", 100, 999),
                                .content_type = fields.text("content_type"),
                                .stream = fields.flag("stream"),
                                .body = {},
                                .started_at = fields.text("started_at"),
                                .ms = fields.count("ms"),
                                .usage = fields.usage()}};
  if (version == 1) parsed.record.body = fields.body();
  if (version == 2) {
    const auto body_bytes = fields.count("body_bytes");
    if (body_bytes > kMaxBodyBytes)
      fields.fail("body_bytes", "is over 1 TiB");
    else
      parsed.bytes_after_line = body_bytes + 1;
  }
  if (!fields.problem() && !is_request_digest(parsed.record.digest))
    fields.fail("digest", "is not 64 lower-case hex digits");
  if (fields.problem()) return journal_error("a journal line's " + *fields.problem());
  return parsed;
}

Result<JournalRecord> parse_journal_record(std::string_view bytes) {
  const auto newline = bytes.find('\n');
  const auto first =
      bytes.substr(0, newline == std::string_view::npos ? bytes.size() : newline + 1);
  auto line = parse_journal_line(first);
  if (!line) return line.error();
  if (bytes.size() - first.size() != line->bytes_after_line)
    return journal_error(line->bytes_after_line == 0
                             ? "a v1 journal line is followed by more bytes"
                             : "a journal record's body is not the " +
                                   std::to_string(line->bytes_after_line - 1) +
                                   " bytes its header gives");
  if (line->bytes_after_line > 0) {
    if (bytes.back() != '\n')
      return journal_error("a journal record's body ends without a newline");
    line->record.body = bytes.substr(first.size(), line->bytes_after_line - 1);
  }
  return std::move(line->record);
}

}  // namespace inflight::models
