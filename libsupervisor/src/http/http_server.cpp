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

// A response written to a client that reads it slowly.
constexpr auto kWriteDeadline = std::chrono::seconds(30);
// Accepting again at once after EMFILE would spin: the pending connection
// stays in the backlog until a descriptor is free.
constexpr auto kAcceptBackoff = std::chrono::milliseconds(250);
constexpr auto kAcceptErrorLogInterval = std::chrono::minutes(1);

// Where refused bodies are drained to: read and dropped, so one buffer for
// every session (one thread) instead of 64 KiB each.
std::array<char, 16384> discard_buffer;

// Counts a live session for the connection caps for as long as it exists.
class SessionSlot {
 public:
  SessionSlot(std::shared_ptr<ConnectionCounts> counts, boost::asio::ip::address peer, bool probe)
      : counts_(std::move(counts)), peer_(peer), probe_(probe) {
    ++counts_->live;
    counts_->probes += probe_;
    ++counts_->by_peer[peer_];
  }
  ~SessionSlot() {
    --counts_->live;
    counts_->probes -= probe_;
    if (--counts_->by_peer[peer_] == 0) counts_->by_peer.erase(peer_);
  }
  SessionSlot(const SessionSlot&) = delete;
  SessionSlot& operator=(const SessionSlot&) = delete;

  bool probe() const { return probe_; }

 private:
  std::shared_ptr<ConnectionCounts> counts_;
  boost::asio::ip::address peer_;
  bool probe_;
};

bool is_probe(std::string_view target) {
  const auto path = target.substr(0, target.find('?'));
  return path == "/healthz" || path == "/readyz";
}

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(tcp::socket socket, boost::asio::ip::address peer, bool probe,
              const HttpServer::Handler& handler, const HttpRefusals& refusals,
              std::shared_ptr<ConnectionCounts> counts)
      : stream_(std::move(socket)),
        handler_(handler),
        refusals_(refusals),
        slot_(std::move(counts), peer, probe) {}

  void read() {
    // An idle keep-alive connection holds no buffer: what the last request
    // needed is given back.
    buffer_.shrink_to_fit();
    parser_.emplace();
    parser_->body_limit(HttpServer::kBodyLimit);
    // The whole request, not each read: a client that sends a byte now and
    // then cannot hold the connection longer than this.
    stream_.expires_after(slot_.probe() ? HttpServer::kProbeDeadline
                                        : HttpServer::kRequestDeadline);
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
    const std::string_view target(request.target().data(), request.target().size());
    if (slot_.probe() && !is_probe(target)) return write(refusals_.busy(request.version()), false);
    const bool keep_alive = request.keep_alive() && !slot_.probe();
    handler_(request, [self = shared_from_this(), keep_alive](HttpResponse response) {
      self->write(std::move(response), keep_alive);
    });
  }

  void write(HttpResponse response, bool keep_alive) {
    response.keep_alive(keep_alive);
    response.prepare_payload();
    response_ = std::move(response);
    stream_.expires_after(kWriteDeadline);
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

// Over a cap: a fixed 503 and the connection is closed, without reading the
// request.
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
                       HttpRefusals refusals, HttpLimits limits)
    : acceptor_(io),
      retry_timer_(io),
      handler_(std::move(handler)),
      refusals_(std::move(refusals)),
      limits_(limits) {
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
    admit(std::move(socket));
    accept();
  });
}

// One peer address holds at most max_per_client connections; past
// max_connections, the probe slots take what comes, for the probes only.
void HttpServer::admit(tcp::socket socket) {
  beast::error_code ec;
  const auto peer = socket.remote_endpoint(ec).address();
  if (ec) return;  // gone already
  const auto it = counts_->by_peer.find(peer);
  const std::size_t from_peer = it == counts_->by_peer.end() ? 0 : it->second;
  const std::size_t normal = counts_->live - counts_->probes;
  const bool probe = normal >= limits_.max_connections;
  if (from_peer >= limits_.max_per_client || (probe && counts_->probes >= kProbeSlots))
    return refuse_connection(std::move(socket));
  std::make_shared<HttpSession>(std::move(socket), peer, probe, handler_, refusals_, counts_)
      ->read();
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
