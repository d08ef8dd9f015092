// See call.hpp.
#include "call.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/chunk_encode.hpp>

#include "inflight/core/log.hpp"

namespace inflight::models {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

OrderedJson tokens_json(const std::optional<std::uint64_t>& tokens) {
  return tokens ? OrderedJson(*tokens) : OrderedJson("unknown");
}

}  // namespace

Call::Call(Hub& hub, std::shared_ptr<Attempt> attempt, beast::tcp_stream& child,
           const CallTarget& target, std::size_t request_bytes)
    : hub_(hub), attempt_(std::move(attempt)), target_(target), started_(SteadyClock::now()) {
  handle_.run_id = attempt_->run_id;
  handle_.attempt = attempt_->number;
  handle_.child = &child;
  position_ = hub_.calls.insert(hub_.calls.end(), &handle_);
  hub_.call_started(*attempt_, target_.model);
  log::info("model call started", {{"run_id", attempt_->run_id},
                                   {"model", target.model},
                                   {"attempt", attempt_->number},
                                   {"request_bytes", request_bytes}});
}

Call::~Call() {
  hub_.calls.erase(position_);
  hub_.call_ended(*attempt_, target_.model);
}

void Call::ended(unsigned status, std::string_view source, std::string_view outcome,
                 const Usage& usage) {
  log::info("model call ended", {{"run_id", attempt_->run_id},
                                 {"model", target_.model},
                                 {"attempt", attempt_->number},
                                 {"status", status},
                                 {"ms", elapsed_ms()},
                                 {"input_tokens", tokens_json(usage.input)},
                                 {"output_tokens", tokens_json(usage.output)},
                                 {"source", source},
                                 {"outcome", outcome}});
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

net::awaitable<bool> AnswerSink::head(
    unsigned status, std::string_view content_type,
    const std::vector<std::pair<std::string, std::string>>& headers) {
  http::response<http::empty_body> response(static_cast<http::status>(status), version_);
  if (!content_type.empty()) response.set(http::field::content_type, content_type);
  for (const auto& [name, value] : headers) response.set(name, value);
  response.chunked(true);
  response.keep_alive(true);
  http::response_serializer<http::empty_body> serializer(response);
  child_.expires_after(kChildWriteDeadline);
  auto [ec, n] = co_await http::async_write_header(child_, serializer, kAwait);
  child_ok_ = !ec;
  co_return child_ok_;
}

net::awaitable<bool> AnswerSink::piece(std::string_view bytes) {
  if (recording_) {
    if (recorded_.size() + bytes.size() > max_recorded_) {
      recording_ = false;
      std::string().swap(recorded_);
    } else {
      recorded_.append(bytes);
    }
  }
  if (!child_ok_ || bytes.empty()) co_return child_ok_;
  child_.expires_after(kChildWriteDeadline);
  auto [ec, n] = co_await net::async_write(child_, http::make_chunk(net::buffer(bytes)), kAwait);
  child_ok_ = !ec;
  co_return child_ok_;
}

net::awaitable<bool> AnswerSink::last() {
  if (!child_ok_) co_return false;
  child_.expires_after(kChildWriteDeadline);
  auto [ec, n] = co_await net::async_write(child_, http::make_chunk_last(), kAwait);
  child_ok_ = !ec;
  co_return child_ok_;
}

}  // namespace inflight::models
