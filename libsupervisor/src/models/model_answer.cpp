// See model_answer.hpp: an answer's end and usage, read as its bytes pass.
#include "inflight/supervisor/models/model_answer.hpp"

#include <nlohmann/json.hpp>

#include "inflight/core/bounded_json.hpp"

namespace inflight::models {

namespace {

using AnswerJson = nlohmann::ordered_json;

constexpr int kAnswerJsonDepth = 64;

// The types of the events after which a provider sends nothing more: its answer is whole.
bool is_terminal_event(std::string_view type) {
  return type == "response.completed" || type == "response.incomplete" || type == "message_stop";
}

bool is_error_event(std::string_view type) {
  return type == "error" || type == "response.failed";
}

// Whether an event's data can say anything we read (its type, an error, its usage): content
// deltas, most of a stream, start no string with these words and are not parsed at all. Each
// word we read is a key or a whole value, so it follows a quote: one pass over the bytes, where
// a search for each word anywhere stopped at every 'e' and 'r' of a chunk, and a search for each
// quote cost a call every few bytes.
bool event_may_matter(std::string_view data) {
  for (std::size_t i = 0; i + 1 < data.size(); ++i) {
    if (data[i] != '"') continue;
    const auto rest = data.substr(i + 1);
    switch (rest.front()) {
      case 'u':
        if (rest.starts_with("usage")) return true;
        break;
      case 'e':
        if (rest.starts_with("error")) return true;
        break;
      case 'r':  // a Responses API delta is "response.output_text.delta": not these
        if (rest.starts_with("response.completed") || rest.starts_with("response.incomplete") ||
            rest.starts_with("response.failed"))
          return true;
        break;
      case 'm':
        if (rest.starts_with("message_")) return true;
        break;
    }
  }
  return false;
}

std::optional<std::uint64_t> token_count(const AnswerJson& usage, const char* key) {
  const auto it = usage.find(key);
  if (it == usage.end() || !it->is_number_unsigned()) return std::nullopt;
  return it->get<std::uint64_t>();
}

// The object at json[key], or nullptr when there is none.
const AnswerJson* answer_object_at(const AnswerJson& json, const char* key) {
  const auto it = json.find(key);
  return it != json.end() && it->is_object() ? &*it : nullptr;
}

// `value` with the one space SSE allows after the colon removed.
std::string_view sse_field_value(std::string_view line, std::size_t colon) {
  if (colon == std::string_view::npos) return {};
  auto value = line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  return value;
}

}  // namespace

AnswerWatcher::AnswerWatcher(bool event_stream) : event_stream_(event_stream) {}

void AnswerWatcher::feed(std::string_view bytes) {
  if (end_) return;
  if (event_stream_) return feed_stream(bytes);
  if (body_too_large_) return;
  if (body_.size() + bytes.size() > kMaxAnswerJsonBytes) {
    body_too_large_ = true;
    std::string().swap(body_);
    return;
  }
  body_.append(bytes);
}

// Cuts the bytes into lines; a line past the limit is dropped up to its newline, and the event
// it was part of loses its data.
void AnswerWatcher::feed_stream(std::string_view bytes) {
  while (!bytes.empty()) {
    const auto newline = bytes.find('\n');
    const auto piece = bytes.substr(0, newline);
    if (!skipping_line_ && line_.size() + piece.size() > kMaxEventLineBytes) {
      skipping_line_ = true;
      event_data_lost_ = true;
      std::string().swap(line_);
    }
    if (!skipping_line_) {
      if (newline != std::string_view::npos && line_.empty()) {
        take_line(piece);
      } else {
        line_.append(piece);
        if (newline != std::string_view::npos) take_line(line_);
      }
    }
    if (newline == std::string_view::npos) return;
    skipping_line_ = false;
    line_.clear();
    bytes.remove_prefix(newline + 1);
  }
}

void AnswerWatcher::take_line(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.empty()) return dispatch_event();
  if (line.front() == ':') return;  // a comment, such as a keep-alive
  const auto colon = line.find(':');
  take_field(line.substr(0, colon), sse_field_value(line, colon));
}

void AnswerWatcher::take_field(std::string_view name, std::string_view value) {
  if (name == "event") {
    event_name_.assign(value);
    return;
  }
  if (name != "data") return;
  const bool first = !event_has_data_;
  event_has_data_ = true;
  if (event_data_lost_) return;
  if (event_data_.size() + value.size() + 1 > kMaxEventLineBytes) {
    event_data_lost_ = true;
    std::string().swap(event_data_);
    return;
  }
  if (!first) event_data_ += '\n';
  event_data_.append(value);
}

void AnswerWatcher::dispatch_event() {
  if (is_error_event(event_name_)) error_seen_ = true;
  if (is_terminal_event(event_name_)) terminal_seen_ = true;
  if (event_has_data_ && !event_data_lost_) {
    if (event_data_ == "[DONE]") {
      terminal_seen_ = true;
    } else if (event_may_matter(event_data_)) {
      const auto json = parse_bounded_json(
          event_data_, {.max_bytes = event_data_.size(), .max_depth = kAnswerJsonDepth});
      if (json && json->is_object()) read_event_json(*json);
    }
  }
  event_name_.clear();
  event_data_.clear();
  event_has_data_ = false;
  event_data_lost_ = false;
}

void AnswerWatcher::read_event_json(const nlohmann::ordered_json& json) {
  const auto type = json.find("type");
  if (type != json.end() && type->is_string()) {
    const auto& word = type->get_ref<const std::string&>();
    if (is_error_event(word)) error_seen_ = true;
    if (is_terminal_event(word)) terminal_seen_ = true;
  }
  read_usages(json);
}

// Where each API puts its usage: at the top (chat completions, Anthropic's message_delta and
// every non-stream body), in "message" (Anthropic's message_start), in "response" (the
// Responses API's last events).
void AnswerWatcher::read_usages(const nlohmann::ordered_json& json) {
  if (const auto* usage = answer_object_at(json, "usage")) read_usage(*usage);
  for (const char* holder : {"message", "response"}) {
    const auto* inner = answer_object_at(json, holder);
    if (inner == nullptr) continue;
    if (const auto* usage = answer_object_at(*inner, "usage")) read_usage(*usage);
  }
}

// One usage object of any of the three APIs; a later report of a count replaces an earlier one.
void AnswerWatcher::read_usage(const nlohmann::ordered_json& usage) {
  if (const auto n = token_count(usage, "prompt_tokens")) usage_.input = n;
  if (const auto n = token_count(usage, "completion_tokens")) usage_.output = n;
  if (const auto n = token_count(usage, "output_tokens")) usage_.output = n;
  if (const auto n = token_count(usage, "input_tokens")) input_tokens_ = n;
  if (const auto n = token_count(usage, "cache_creation_input_tokens")) cache_creation_tokens_ = n;
  if (const auto n = token_count(usage, "cache_read_input_tokens")) cache_read_tokens_ = n;
  if (input_tokens_)
    usage_.input =
        *input_tokens_ + cache_creation_tokens_.value_or(0) + cache_read_tokens_.value_or(0);
}

AnswerEnd AnswerWatcher::finish() {
  if (end_) return *end_;
  if (event_stream_) {
    end_ = error_seen_ || !terminal_seen_ ? AnswerEnd::error : AnswerEnd::complete;
  } else {
    finish_body();
    end_ = AnswerEnd::complete;
  }
  std::string().swap(line_);
  std::string().swap(event_data_);
  return *end_;
}

void AnswerWatcher::finish_body() {
  if (body_too_large_ || body_.empty()) return;
  const auto json =
      parse_bounded_json(body_, {.max_bytes = body_.size(), .max_depth = kAnswerJsonDepth});
  if (json && json->is_object()) read_usages(*json);
  std::string().swap(body_);
}

std::vector<std::string_view> stream_events(std::string_view body) {
  std::vector<std::string_view> events;
  std::size_t start = 0;
  std::size_t at = 0;
  while (at < body.size()) {
    const auto newline = body.find('\n', at);
    if (newline == std::string_view::npos) break;
    const auto line = body.substr(at, newline - at);
    at = newline + 1;
    if (line.empty() || line == "\r") {
      events.push_back(body.substr(start, at - start));
      start = at;
    }
  }
  if (start < body.size()) events.push_back(body.substr(start));
  return events;
}

}  // namespace inflight::models
