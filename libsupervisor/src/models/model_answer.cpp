// See model_answer.hpp: an answer's end and usage, read as its bytes pass.
#include "inflight/supervisor/models/model_answer.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace inflight::models {

namespace {

using AnswerJson = nlohmann::ordered_json;

constexpr int kAnswerJsonDepth = 64;

constexpr std::size_t kBlockBytes = 16;

// Bit i set: data[at + i] is a quote, for the block of up to kBlockBytes bytes at `at`.
std::uint32_t quote_mask(std::string_view data, std::size_t at) {
  const auto size = std::min(kBlockBytes, data.size() - at);
#if defined(__SSE2__)  // every x86-64: the whole block at once
  std::array<char, kBlockBytes> bytes{};
  const char* block = data.data() + at;
  if (size < kBlockBytes) {  // the last block: no load past the data's end
    std::memcpy(bytes.data(), block, size);
    block = bytes.data();
  }
  const __m128i chars = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block));
  const auto mask =
      static_cast<std::uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(chars, _mm_set1_epi8('"'))));
  return mask & ((std::uint32_t{1} << size) - 1);
#else
  std::uint32_t mask = 0;
  for (std::size_t i = 0; i < size; ++i)
    if (data[at + i] == '"') mask |= std::uint32_t{1} << i;
  return mask;
#endif
}

// The types of the events after which a provider sends nothing more: its answer is whole.
bool is_terminal_event(std::string_view type) {
  return type == "response.completed" || type == "response.incomplete" || type == "message_stop";
}

bool is_error_event(std::string_view type) {
  return type == "error" || type == "response.failed";
}

// Whether the string that starts at `text` (just past its opening quote) is a word we read.
bool is_word_we_read(std::string_view text) {
  if (text.empty()) return false;
  switch (text.front()) {
    case 'u':
      return text.starts_with("usage");
    case 'e':
      return text.starts_with("error");
    case 'r':  // a Responses API delta is "response.output_text.delta": not these
      return text.starts_with("response.completed") || text.starts_with("response.incomplete") ||
             text.starts_with("response.failed");
    case 'm':
      return text.starts_with("message_");
  }
  return false;
}

// Whether an event's data can say anything we read (its type, an error, its usage): content
// deltas, most of a stream, start no string with these words and are not parsed at all. Each
// word we read is a key or a whole value, so it follows a quote, and only the bytes after each
// quote are looked at. A chunk has a quote every 8 bytes or so: they are found 16 bytes at a
// time, which took a third of the time of a loop over every byte.
bool event_may_matter(std::string_view data) {
  for (std::size_t at = 0; at < data.size(); at += kBlockBytes) {
    for (auto quotes = quote_mask(data, at); quotes != 0; quotes &= quotes - 1) {
      const auto after = at + static_cast<std::size_t>(std::countr_zero(quotes)) + 1;
      if (is_word_we_read(std::string_view(data.data() + after, data.size() - after))) return true;
    }
  }
  return false;
}

}  // namespace

// The token counts of one usage object of any of the three APIs.
struct UsageCounts {
  std::optional<std::uint64_t> prompt, completion, output, input, cache_creation, cache_read;

  // The count a key names, or nullptr for a key we do not read.
  std::optional<std::uint64_t>* named(std::string_view key) {
    if (key == "prompt_tokens") return &prompt;
    if (key == "completion_tokens") return &completion;
    if (key == "output_tokens") return &output;
    if (key == "input_tokens") return &input;
    if (key == "cache_creation_input_tokens") return &cache_creation;
    if (key == "cache_read_input_tokens") return &cache_read;
    return nullptr;
  }
};

// What an event's data or a body says: the top's "type" when it is a string, and the usage
// objects where each API puts one: at the top (chat completions, Anthropic's message_delta and
// every non-stream body), in "message" (Anthropic's message_start), in "response" (the Responses
// API's last events). As in a parsed document, a key given twice keeps its last value.
struct AnswerFacts {
  static constexpr std::size_t kTop = 0, kMessage = 1, kResponse = 2;
  std::optional<std::string> type;
  std::array<std::optional<UsageCounts>, 3> usages;
};

namespace {

// Reads AnswerFacts by SAX, building no document: the usage event of each streamed call was
// parsed whole, and that parse cost more than the rest of watching the stream. A count is one
// only as an unsigned integer; JSON that does not parse, is nested deeper than `max_depth` or is
// not an object says nothing.
class FactsReader : public nlohmann::json_sax<AnswerJson> {
 public:
  explicit FactsReader(std::size_t max_depth) : max_depth_(max_depth) {}
  const AnswerFacts& facts() const { return facts_; }

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t value) override {
    if (count_ != nullptr) *count_ = value;
    return true;
  }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t& value) override {
    if (frames_.size() == 1 && frames_.back().key == "type") facts_.type = value;
    return true;
  }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return enter(true); }
  bool end_object() override { return leave(); }
  bool start_array(std::size_t) override { return enter(false); }
  bool end_array() override { return leave(); }
  bool key(string_t& key) override;
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  // Where an object or an array is: which usage it is, or which usage its "usage" key holds.
  struct Frame {
    std::string key;                        // an object's key whose value comes next
    std::optional<std::size_t> usage;       // this object is facts_.usages[*usage]
    std::optional<std::size_t> usage_slot;  // this object's "usage" is facts_.usages[*slot]
  };

  bool enter(bool object);
  bool leave() {
    frames_.pop_back();
    count_ = nullptr;
    return true;
  }

  std::size_t max_depth_;
  AnswerFacts facts_;
  std::vector<Frame> frames_;
  std::optional<std::uint64_t>* count_ = nullptr;  // what the next value sets, when unsigned
};

bool FactsReader::enter(bool object) {
  if (frames_.size() >= max_depth_ || (frames_.empty() && !object)) return false;
  Frame frame;
  if (frames_.empty()) {
    frame.usage_slot = AnswerFacts::kTop;
  } else if (object && frames_.size() == 1) {
    const auto& key = frames_.back().key;
    if (key == "usage") frame.usage = AnswerFacts::kTop;
    if (key == "message") frame.usage_slot = AnswerFacts::kMessage;
    if (key == "response") frame.usage_slot = AnswerFacts::kResponse;
  } else if (object && frames_.back().usage_slot && frames_.back().key == "usage") {
    frame.usage = frames_.back().usage_slot;
  }
  if (frame.usage) facts_.usages[*frame.usage].emplace();
  frames_.push_back(std::move(frame));
  count_ = nullptr;
  return true;
}

// A key given again replaces what its earlier value said: what it holds is forgotten here, and
// its new value says it again if it does.
bool FactsReader::key(string_t& key) {
  auto& frame = frames_.back();
  frame.key = key;
  count_ = nullptr;
  if (frame.usage) {
    count_ = facts_.usages[*frame.usage]->named(key);
    if (count_ != nullptr) count_->reset();
    return true;
  }
  if (frame.usage_slot && key == "usage") facts_.usages[*frame.usage_slot].reset();
  if (frames_.size() == 1) {
    if (key == "type") facts_.type.reset();
    if (key == "message") facts_.usages[AnswerFacts::kMessage].reset();
    if (key == "response") facts_.usages[AnswerFacts::kResponse].reset();
  }
  return true;
}

std::optional<AnswerFacts> read_facts(std::string_view json) {
  FactsReader reader(kAnswerJsonDepth);
  if (!AnswerJson::sax_parse(json, &reader)) return std::nullopt;
  return reader.facts();
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
      if (const auto facts = read_facts(event_data_)) {
        if (facts->type && is_error_event(*facts->type)) error_seen_ = true;
        if (facts->type && is_terminal_event(*facts->type)) terminal_seen_ = true;
        read_usages(*facts);
      }
    }
  }
  event_name_.clear();
  event_data_.clear();
  event_has_data_ = false;
  event_data_lost_ = false;
}

// A later report of a count replaces an earlier one; the usages of one event or body are read
// in the order the APIs' places are listed in AnswerFacts.
void AnswerWatcher::read_usages(const AnswerFacts& facts) {
  for (const auto& usage : facts.usages) {
    if (!usage) continue;
    if (usage->prompt) usage_.input = usage->prompt;
    if (usage->completion) usage_.output = usage->completion;
    if (usage->output) usage_.output = usage->output;
    if (usage->input) input_tokens_ = usage->input;
    if (usage->cache_creation) cache_creation_tokens_ = usage->cache_creation;
    if (usage->cache_read) cache_read_tokens_ = usage->cache_read;
    if (input_tokens_)
      usage_.input =
          *input_tokens_ + cache_creation_tokens_.value_or(0) + cache_read_tokens_.value_or(0);
  }
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
  if (const auto facts = read_facts(body_)) read_usages(*facts);
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
