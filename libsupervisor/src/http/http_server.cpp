#include "inflight/supervisor/http/http_server.hpp"

#include <array>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <chrono>
#include <memory>
#include <optional>

#include "inflight/core/log.hpp"

namespace inflight {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;

namespace {

constexpr auto kIoDeadline = std::chrono::seconds(30);
// Accepting again at once after EMFILE would spin: the pending connection
// stays in the backlog until a descriptor is free.
constexpr auto kAcceptBackoff = std::chrono::milliseconds(250);
constexpr auto kAcceptErrorLogInterval = std::chrono::minutes(1);

// Where refused bodies are drained to: read and dropped, so one buffer for
// every session (one thread) instead of 64 KiB each.
std::array<char, 16384> discard_buffer;

// Counts a live session for the connection cap for as long as it exists.
class SessionSlot {
 public:
  explicit SessionSlot(std::shared_ptr<std::size_t> live) : live_(std::move(live)) { ++*live_; }
  ~SessionSlot() { --*live_; }
  SessionSlot(const SessionSlot&) = delete;
  SessionSlot& operator=(const SessionSlot&) = delete;

 private:
  std::shared_ptr<std::size_t> live_;
};

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(tcp::socket socket, const HttpServer::Handler& handler, const HttpRefusals& refusals,
              std::shared_ptr<std::size_t> live)
      : stream_(std::move(socket)),
        handler_(handler),
        refusals_(refusals),
        slot_(std::move(live)) {}

  void read() {
    // An idle keep-alive connection holds no buffer: what the last request
    // needed is given back.
    buffer_.shrink_to_fit();
    parser_.emplace();
    parser_->body_limit(HttpServer::kBodyLimit);
    stream_.expires_after(kIoDeadline);
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
  }

 private:
  void on_read(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == boost::asio::error::connection_reset || ec == boost::asio::error::eof)
      return close();
    if (ec == http::error::body_limit) {
      draining_ = true;
      return write(refusals_.too_large(11), false);
    }
    if (ec) return write(refusals_.malformed(11), false);
    auto request = parser_->release();
    const bool keep_alive = request.keep_alive();
    write(handler_(request), keep_alive);
  }

  void write(HttpResponse response, bool keep_alive) {
    response.keep_alive(keep_alive);
    response.prepare_payload();
    response_ = std::move(response);
    stream_.expires_after(kIoDeadline);
    http::async_write(stream_, response_,
                      [self = shared_from_this(), keep_alive](beast::error_code ec, std::size_t) {
                        if (!ec && self->draining_) return self->drain();
                        if (ec || !keep_alive) return self->close();
                        self->read();
                      });
  }

  // After refusing an oversized body, reads and drops the rest of it, so the
  // client can finish sending and then read the refusal instead of a reset.
  void drain() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(std::chrono::seconds(5));
    stream_.async_read_some(boost::asio::buffer(discard_buffer),
                            [self = shared_from_this()](beast::error_code ec, std::size_t) {
                              if (ec) return self->close();
                              self->drain();
                            });
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  HttpResponse response_;
  bool draining_ = false;
  const HttpServer::Handler& handler_;
  const HttpRefusals& refusals_;
  SessionSlot slot_;
};

// Over --max-connections: a fixed 503 and the connection is closed, without
// reading the request.
void refuse_connection(tcp::socket socket) {
  static const std::string kResponse =
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
      "Retry-After: 1\r\nConnection: close\r\nContent-Length: 89\r\n\r\n"
      "{\"error\": \"too_many_connections\", \"message\": \"too many open connections; retry "
      "shortly\"}\n";
  auto owned = std::make_shared<tcp::socket>(std::move(socket));
  boost::asio::async_write(*owned, boost::asio::buffer(kResponse),
                           [owned](beast::error_code, std::size_t) {
                             beast::error_code ignored;
                             owned->shutdown(tcp::socket::shutdown_both, ignored);
                           });
}

}  // namespace

HttpServer::HttpServer(boost::asio::io_context& io, const tcp::endpoint& endpoint, Handler handler,
                       HttpRefusals refusals, std::size_t max_connections)
    : acceptor_(io),
      retry_timer_(io),
      handler_(std::move(handler)),
      refusals_(std::move(refusals)),
      max_connections_(max_connections) {
  acceptor_.open(endpoint.protocol());
  acceptor_.set_option(boost::asio::socket_base::reuse_address(true));
  acceptor_.bind(endpoint);
  acceptor_.listen();
  accept();
}

void HttpServer::accept() {
  acceptor_.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (ec == boost::asio::error::operation_aborted) return;
    if (ec) return back_off(ec);
    if (*live_ >= max_connections_)
      refuse_connection(std::move(socket));
    else
      std::make_shared<HttpSession>(std::move(socket), handler_, refusals_, live_)->read();
    accept();
  });
}

// Out of descriptors (or memory): retried on a timer, and logged at most once
// a minute. While descriptors are scarce, accepts fail and succeed in turn as
// connections close; that is one episode to an operator, not many.
void HttpServer::back_off(const boost::system::error_code& ec) {
  const auto now = std::chrono::steady_clock::now();
  if (!accept_error_logged_ || now - *accept_error_logged_ >= kAcceptErrorLogInterval) {
    log::error("cannot accept connections; retrying", {{"error", ec.message()}});
    accept_error_logged_ = now;
  }
  retry_timer_.expires_after(kAcceptBackoff);
  retry_timer_.async_wait([this](const boost::system::error_code& timer) {
    if (!timer) accept();
  });
}

}  // namespace inflight
