// The listener's side of a child's connection: reads each request within
// its limits, and admits it only with a live attempt's token for a model
// its template names (docs/models.md "Keys and tokens"). Nothing a child
// sends reaches an upstream before that.
#include <boost/beast/http.hpp>

#include "child_request.hpp"
#include "hub.hpp"
#include "inflight/core/log.hpp"
#include "model_call.hpp"

namespace inflight::models {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

// A request (or the wait for the next on a kept-alive connection) is read
// within this, however slowly the child sends it.
constexpr auto kRequestDeadline = std::chrono::seconds(120);
// What a refused child still sends is read and dropped for at most this.
constexpr auto kLingerDeadline = std::chrono::seconds(10);

// Counts a connection against its run's limit once a request named the run.
class ConnectionSlot {
 public:
  ~ConnectionSlot() {
    if (attempt_) --attempt_->connections;
  }
  // False when the run holds its limit of connections already.
  bool bind(const std::shared_ptr<Attempt>& attempt, std::size_t limit) {
    if (attempt_ == attempt) return true;
    if (attempt->connections >= limit) return false;
    if (attempt_) --attempt_->connections;
    attempt_ = attempt;
    ++attempt_->connections;
    return true;
  }

 private:
  std::shared_ptr<Attempt> attempt_;
};

using Refusal = http::response<http::string_body>;

// Why `request` is refused before any upstream sees it, or the attempt it
// belongs to.
std::variant<Refusal, std::shared_ptr<Attempt>> admit(const Hub& hub, const ChildRequest& request,
                                                      const std::optional<CallTarget>& target) {
  const auto version = request.version();
  if (request.find(http::field::upgrade) != request.end())
    return error_answer(400, "upgrade_refused",
                        "WebSocket upgrades (realtime APIs) cannot go through inflight's "
                        "model-call journal",
                        version);
  if (!target) return error_answer(404, "not_found", "the path is not /models/NAME/...", version);
  auto attempt = hub.attempt_of_token(token_of(request));
  if (!attempt)
    return error_answer(401, "invalid_token",
                        "the token is not that of a running attempt of this instance", version);
  if (!attempt->models.count(target->model))
    return error_answer(404, "model_not_named",
                        "the run's template names no model '" + target->model + "'", version);
  return attempt;
}

// Answers `refusal` and ends the connection. What the child still sends
// (the body of a refused request) is read and dropped, within
// kLingerDeadline, before the close: a client that reads the answer only
// once its body is sent gets the refusal, not a reset.
Awaitable<void> refuse_and_close(Stream& child, Refusal& refusal) {
  refusal.keep_alive(false);
  child.expires_after(kLingerDeadline);
  auto [ec, written] = co_await http::async_write(child, refusal, kAwait);
  if (ec) co_return;
  beast::error_code ignored;
  child.socket().shutdown(net::socket_base::shutdown_send, ignored);
  std::array<char, 16 * 1024> dropped;
  for (;;) {
    auto [read_ec, n] = co_await child.async_read_some(net::buffer(dropped), kAwait);
    if (read_ec) co_return;
  }
}

Refusal too_large(unsigned version) {
  return error_answer(413, "request_too_large", "the request is over --model-max-request-bytes",
                      version);
}

// An admitted request is still refused before its body is read when its
// run holds its limit of connections.
std::optional<Refusal> before_body(const Hub& hub,
                                   const http::request_parser<http::string_body>& parser,
                                   const std::shared_ptr<Attempt>& attempt, ConnectionSlot& slot) {
  if (slot.bind(attempt, hub.settings.max_connections_per_run)) return std::nullopt;
  return error_answer(429, "too_many_connections",
                      "the run holds --model-max-connections-per-run connections",
                      parser.get().version());
}

}  // namespace

Awaitable<void> serve_connection(std::shared_ptr<Hub> hub, Socket socket) {
  Stream child(std::move(socket));
  beast::flat_buffer buffer;
  ConnectionSlot slot;
  for (;;) {
    // The head first: a request is admitted before its body is read.
    http::request_parser<http::string_body> parser;
    parser.body_limit(hub->settings.max_request_bytes);
    parser.header_limit(kMaxChildHeaderBytes);
    child.expires_after(kRequestDeadline);
    auto [ec, read] = co_await http::async_read_header(child, buffer, parser, kAwait);
    // The parser refuses a declared length over the body limit with the head.
    if (ec && ec != http::error::header_limit && ec != http::error::body_limit) co_return;
    std::optional<Refusal> refusal;
    std::shared_ptr<Attempt> attempt;
    std::optional<CallTarget> target;
    if (!ec) target = parse_call_target(parser.get().target());
    if (ec) {
      refusal = too_large(11);
    } else if (auto admitted = admit(*hub, parser.get(), target);
               auto* refused = std::get_if<Refusal>(&admitted)) {
      hub->refused(refused->result_int(), refused->body());
      refusal = std::move(*refused);
    } else {
      attempt = std::get<std::shared_ptr<Attempt>>(std::move(admitted));
      refusal = before_body(*hub, parser, attempt, slot);
    }
    if (!refusal) {
      auto [body_ec, body_read] = co_await http::async_read(child, buffer, parser, kAwait);
      if (body_ec == http::error::body_limit)
        refusal = too_large(parser.get().version());
      else if (body_ec)
        co_return;
    }
    if (refusal) {
      co_await refuse_and_close(child, *refusal);
      co_return;
    }
    auto request = parser.release();
    const bool keep_alive = co_await answer_call(hub, std::move(attempt), child, std::move(request),
                                                 std::move(*target));
    if (!keep_alive) co_return;
  }
}

}  // namespace inflight::models
