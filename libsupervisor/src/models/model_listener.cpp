// The listener's side of a child's connection: reads each request within
// its limits, and admits it only with a live attempt's token for a model
// its template names (docs/models.md "Keys and tokens"). Nothing a child
// sends reaches an upstream before that.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http.hpp>

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
constexpr std::size_t kMaxHeaderBytes = 64 * 1024;

// The token a child's SDK sends: OpenAI's as a bearer, Anthropic's as x-api-key.
std::string token_of(const ChildRequest& request) {
  const auto bearer = request[http::field::authorization];
  if (bearer.starts_with("Bearer ")) return std::string(bearer.substr(7));
  return std::string(request["x-api-key"]);
}

std::optional<CallTarget> target_of(std::string_view target) {
  constexpr std::string_view kPrefix = "/models/";
  if (!target.starts_with(kPrefix)) return std::nullopt;
  target.remove_prefix(kPrefix.size());
  const auto query = target.find('?');
  CallTarget parsed;
  if (query != std::string_view::npos) {
    parsed.query = std::string(target.substr(query + 1));
    target = target.substr(0, query);
  }
  const auto slash = target.find('/');
  parsed.model = std::string(target.substr(0, slash));
  parsed.path = slash == std::string_view::npos ? "/" : std::string(target.substr(slash));
  if (!is_model_name(parsed.model)) return std::nullopt;
  return parsed;
}

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

}  // namespace

net::awaitable<void> serve_connection(std::shared_ptr<Hub> hub, net::ip::tcp::socket socket) {
  beast::tcp_stream child(std::move(socket));
  beast::flat_buffer buffer;
  ConnectionSlot slot;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(hub->settings.max_request_bytes);
    parser.header_limit(kMaxHeaderBytes);
    child.expires_after(kRequestDeadline);
    auto [ec, read] = co_await http::async_read(child, buffer, parser, kAwait);
    if (ec == http::error::body_limit || ec == http::error::header_limit) {
      auto refusal = error_answer(413, "request_too_large",
                                  "the request is over --model-max-request-bytes", 11);
      refusal.keep_alive(false);
      co_await http::async_write(child, refusal, kAwait);
      co_return;
    }
    if (ec) co_return;
    auto request = parser.release();
    const auto target = target_of(request.target());
    auto admitted = admit(*hub, request, target);
    if (auto* refusal = std::get_if<Refusal>(&admitted)) {
      hub->refused(refusal->result_int(), refusal->body());
      refusal->keep_alive(request.keep_alive());
      auto [write_ec, written] = co_await http::async_write(child, *refusal, kAwait);
      if (write_ec || !request.keep_alive()) co_return;
      continue;
    }
    auto attempt = std::get<std::shared_ptr<Attempt>>(std::move(admitted));
    if (!slot.bind(attempt, hub->settings.max_connections_per_run)) {
      auto refusal = error_answer(429, "too_many_connections",
                                  "the run holds --model-max-connections-per-run connections",
                                  request.version());
      refusal.keep_alive(false);
      co_await http::async_write(child, refusal, kAwait);
      co_return;
    }
    const bool keep_alive =
        co_await answer_call(hub, std::move(attempt), child, std::move(request), *target);
    if (!keep_alive) co_return;
  }
}

}  // namespace inflight::models
