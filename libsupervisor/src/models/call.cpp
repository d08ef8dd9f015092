// See call.hpp.
#include "call.hpp"

#include <array>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <charconv>

#include "inflight/core/log.hpp"

namespace inflight::models {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

log::Field tokens_field(std::string_view name, const std::optional<std::uint64_t>& tokens) {
  if (tokens) return {name, *tokens};
  return {name, std::string_view("unknown")};
}

}  // namespace

Call::Call(Hub& hub, std::shared_ptr<Attempt> attempt, Stream& child, const CallTarget& target,
           std::size_t request_bytes)
    : hub_(hub), attempt_(std::move(attempt)), target_(target), started_(SteadyClock::now()) {
  handle_.run_id = attempt_->run_id;
  handle_.attempt = attempt_->number;
  handle_.child = &child;
  position_ = hub_.calls.insert(hub_.calls.end(), &handle_);
  hub_.call_started(*attempt_, target_.model);
  // Fields, named in order as a json object orders them: the lines stay as they were.
  log::write_fields(log::Level::info, "model call started",
                    {{"attempt", static_cast<std::uint64_t>(attempt_->number)},
                     {"model", target.model},
                     {"request_bytes", request_bytes},
                     {"run_id", attempt_->run_id}});
}

Call::~Call() {
  hub_.calls.erase(position_);
  hub_.call_ended(*attempt_, target_.model);
}

void Call::ended(unsigned status, std::string_view source, std::string_view outcome,
                 const Usage& usage) {
  log::write_fields(log::Level::info, "model call ended",
                    {{"attempt", static_cast<std::uint64_t>(attempt_->number)},
                     tokens_field("input_tokens", usage.input),
                     {"model", target_.model},
                     {"ms", elapsed_ms()},
                     {"outcome", outcome},
                     tokens_field("output_tokens", usage.output),
                     {"run_id", attempt_->run_id},
                     {"source", source},
                     {"status", std::uint64_t{status}}});
  hub_.count(target_.model, source, outcome, usage);
  if (outcome != "ok") return;
  auto& counts = *attempt_->counts;
  ++counts.calls;
  if (source == "journal") {
    ++counts.replayed;
    counts.saved_input_tokens += usage.input.value_or(0);
    counts.saved_output_tokens += usage.output.value_or(0);
  } else {
    counts.input_tokens += usage.input.value_or(0);
    counts.output_tokens += usage.output.value_or(0);
  }
}

std::uint64_t Call::elapsed_ms() const {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - started_).count());
}

void AnswerSink::head(unsigned status, std::string_view content_type,
                      const std::vector<std::pair<std::string, std::string>>& headers) {
  http::response<http::empty_body> response(static_cast<http::status>(status), version_);
  if (!content_type.empty()) response.set(http::field::content_type, content_type);
  for (const auto& [name, value] : headers) response.set(name, value);
  response.chunked(true);
  response.keep_alive(true);
  http::fields::writer serialized(response.base(), response.version(), response.result_int());
  held_head_ = beast::buffers_to_string(serialized.get());
}

Awaitable<bool> AnswerSink::piece(std::string_view bytes, bool last) {
  if (recording_) {
    if (recorded_.size() + bytes.size() > max_recorded_) {
      recording_ = false;
      std::string().swap(recorded_);
    } else {
      recorded_.append(bytes);
    }
  }
  return write(bytes, last);
}

Awaitable<bool> AnswerSink::last() {
  return write({}, !ended_);
}

// The held head, `bytes` as a chunk and the answer's end, as far as each is
// there, in one write.
Awaitable<bool> AnswerSink::write(std::string_view bytes, bool last) {
  if (!child_ok_ || (held_head_.empty() && bytes.empty() && !last)) co_return child_ok_;
  std::array<char, 20> size_line{};  // the chunk's size in hex, and CRLF
  std::size_t size_length = 0;
  if (!bytes.empty()) {
    size_length = static_cast<std::size_t>(
        std::to_chars(size_line.data(), size_line.data() + 16, bytes.size(), 16).ptr -
        size_line.data());
    size_line[size_length++] = '\r';
    size_line[size_length++] = '\n';
  }
  std::string_view end = bytes.empty() ? "" : "\r\n";
  if (last) end = bytes.empty() ? "0\r\n\r\n" : "\r\n0\r\n\r\n";
  const std::array<net::const_buffer, 4> parts{
      net::buffer(held_head_), net::buffer(size_line.data(), size_length),
      net::buffer(bytes.data(), bytes.size()), net::buffer(end.data(), end.size())};
  child_.expires_after(kChildWriteDeadline);
  auto [ec, n] = co_await net::async_write(child_, parts, kAwait);
  held_head_.clear();
  ended_ = last;
  child_ok_ = !ec;
  co_return child_ok_;
}

}  // namespace inflight::models
