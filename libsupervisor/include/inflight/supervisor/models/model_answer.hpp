// What an answer's body says as it streams through the gateway (SPEC §13 "Replay" and
// "Accounting"): whether it ended as it should (only a complete answer is ever replayed) and the
// tokens its provider's usage reports. It watches bytes on their way to the child, so its memory
// is bounded whatever the upstream sends.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace inflight::models {

// Tokens as the provider's usage reports them; nullopt when it reports none (logged "unknown",
// never 0).
struct Usage {
  // Anthropic: input_tokens + cache_creation_input_tokens + cache_read_input_tokens
  std::optional<std::uint64_t> input;
  std::optional<std::uint64_t> output;

  bool operator==(const Usage&) const = default;
};

enum class AnswerEnd { complete, error };

struct AnswerFacts;  // what an event or a body says (model_answer.cpp)

// One SSE line longer than this is skipped, not buffered: no event we read is that long except
// a Responses API "response.completed" carrying a huge output, whose usage is then unknown.
inline constexpr std::size_t kMaxEventLineBytes = 1 << 20;
// A body that is not a stream is kept up to this for its usage; beyond it the usage is unknown.
inline constexpr std::size_t kMaxAnswerJsonBytes = 64ull << 20;

class AnswerWatcher {
 public:
  // `event_stream`: the answer's Content-Type is text/event-stream.
  explicit AnswerWatcher(bool event_stream);

  // The body, in the pieces it arrives in.
  void feed(std::string_view bytes);
  // At the end of the body. A stream is complete only once its terminal event came: data
  // "[DONE]", a "response.completed" or "response.incomplete" event, Anthropic's
  // "message_stop"; an "error" event (SSE `event: error`, or a data JSON whose "type" is "error"
  // or "response.failed") or no terminal event (a short read) is an error. An event is only
  // seen once its blank line came, as an SSE client sees it. A body that is not a stream is
  // complete (the caller judges the status code). Calling it again gives the same answer.
  AnswerEnd finish();
  const Usage& usage() const { return usage_; }

 private:
  void feed_stream(std::string_view bytes);
  void take_line(std::string_view line);
  void take_field(std::string_view name, std::string_view value);
  void dispatch_event();
  void read_usages(const AnswerFacts& facts);
  void finish_body();

  bool event_stream_;
  std::optional<AnswerEnd> end_;
  Usage usage_;
  // Anthropic reports the input in three parts, each updated by a later event.
  std::optional<std::uint64_t> input_tokens_;
  std::optional<std::uint64_t> cache_creation_tokens_;
  std::optional<std::uint64_t> cache_read_tokens_;

  // A body that is not a stream: kept until finish(), unless it grows past the limit.
  std::string body_;
  bool body_too_large_ = false;

  // A stream: the line being read, and the event its lines build.
  std::string line_;
  bool skipping_line_ = false;
  std::string event_name_;
  std::string event_data_;
  bool event_has_data_ = false;
  bool event_data_lost_ = false;
  bool terminal_seen_ = false;
  bool error_seen_ = false;
};

// A recorded stream body split into its events (each ends with its blank line, "\n\n" or
// "\r\n\r\n"; a rest without one is the last piece), so that a replay writes them one by one.
// The pieces, joined, are the body.
std::vector<std::string_view> stream_events(std::string_view body);

}  // namespace inflight::models
