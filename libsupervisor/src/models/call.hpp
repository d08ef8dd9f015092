// A model call's own state, from the listener's admission to its end: its
// place among the calls in flight, its log lines and counts (Call), and
// where its answer's bytes go (AnswerSink). model_call.cpp forwards a call
// upstream with them, replay.cpp answers one from the journal.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hub.hpp"
#include "inflight/supervisor/models/model_answer.hpp"
#include "loop.hpp"
#include "model_call.hpp"

namespace inflight::models {

// One write to a child that does not read its answer ends the call after
// this (outside a shutdown): it holds only its own call.
inline constexpr auto kChildWriteDeadline = std::chrono::seconds(30);

// One call from its admission to its end: its place among the calls in
// flight, its log lines and its counts.
class Call {
 public:
  Call(Hub& hub, std::shared_ptr<Attempt> attempt, Stream& child, const CallTarget& target,
       std::size_t request_bytes);
  ~Call();
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  CallHandle& handle() { return handle_; }
  Attempt& attempt() { return *attempt_; }

  // Logs the end and counts it: `source` upstream or journal; `outcome` ok,
  // error or cut.
  void ended(unsigned status, std::string_view source, std::string_view outcome,
             const Usage& usage);
  std::uint64_t elapsed_ms() const;

 private:
  Hub& hub_;
  std::shared_ptr<Attempt> attempt_;
  const CallTarget& target_;  // the call's coroutine holds it
  SteadyClock::time_point started_;
  CallHandle handle_;
  std::list<CallHandle*>::iterator position_;
};

// Where the answer's bytes go: the child while it reads them, as a chunked
// answer, and a copy for the journal while it stays under `max_recorded`
// bytes (--model-max-answer-bytes; 0 for an answer replayed, which keeps
// none). What is ready at once goes in one write: the head with the first
// piece, the last piece with the chunked answer's end. A write per part
// took twice the system calls of serve and of the child.
class AnswerSink {
 public:
  AnswerSink(Stream& child, unsigned version, std::size_t max_recorded)
      : child_(child), version_(version), max_recorded_(max_recorded) {}

  // Held until the first piece, or until flush().
  void head(unsigned status, std::string_view content_type,
            const std::vector<std::pair<std::string, std::string>>& headers);
  // Each false once the child is gone (or stopped reading): the caller
  // decides whether the call goes on. `last` ends the answer with the piece.
  Awaitable<bool> flush() { return write({}, false); }
  Awaitable<bool> piece(std::string_view bytes, bool last = false);
  // Ends the answer, unless its last piece did.
  Awaitable<bool> last();

  bool child_ok() const { return child_ok_; }
  bool recording() const { return recording_; }
  std::string& recorded() { return recorded_; }

 private:
  Awaitable<bool> write(std::string_view bytes, bool last);

  Stream& child_;
  unsigned version_;
  std::size_t max_recorded_;
  std::string held_head_;
  bool ended_ = false;
  bool child_ok_ = true;
  bool recording_ = max_recorded_ > 0;
  std::string recorded_;
};

// The recorded answer for the attempt's next request of `digest` (the k-th
// for the k-th), if the journal holds one and the model replays.
std::optional<JournalRecord> recorded_answer(Attempt& attempt, const ModelRoute& route,
                                             const std::string& digest);
// Answers the call with `answer`, as the child first got it: a stream as a
// stream, event by event. Whether the child got it all.
Awaitable<bool> replay(Call& call, Stream& child, const JournalRecord& answer, unsigned version);

}  // namespace inflight::models
