// See upstream_pool.hpp.
#include "upstream_pool.hpp"

#include <openssl/ssl.h>
#include <sys/socket.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <cerrno>

namespace inflight::models {

namespace net = boost::asio;
namespace beast = boost::beast;
using tcp = net::ip::tcp;

namespace {

// Providers close idle connections after a minute or so; one idle longer
// than this is not worth the stale-connection risk.
constexpr auto kMaxIdle = std::chrono::seconds(30);

Error unreachable(const std::string& what, const boost::system::error_code& ec) {
  return {Failure::unreachable, what + ": " + ec.message(), {}};
}

// An idle connection the provider closed (or wrote to, which it never
// should between answers) reads something now: it is not reused, since a
// request written to it could be lost after its first byte.
bool still_open(UpstreamConnection& connection) {
  char byte;
  const auto fd = connection.tcp().socket().native_handle();
  const auto n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

}  // namespace

Stream& UpstreamConnection::tcp() {
  return with_stream([](auto& stream) -> Stream& { return beast::get_lowest_layer(stream); });
}

void UpstreamConnection::close() {
  beast::error_code ignored;
  tcp().socket().shutdown(tcp::socket::shutdown_both, ignored);
  tcp().socket().close(ignored);
}

UpstreamPool::UpstreamPool(net::io_context& io, const ModelSpec& spec, std::size_t max_idle)
    : io_(io), spec_(spec), max_idle_(max_idle), tls_(net::ssl::context::tls_client) {
  tls_.set_verify_mode(net::ssl::verify_peer);
  if (spec.ca_file.empty())
    tls_.set_default_verify_paths();
  else
    tls_.load_verify_file(spec.ca_file);
}

Awaitable<Result<Connection>> UpstreamPool::acquire(SteadyClock::time_point deadline) {
  while (!idle_.empty()) {
    auto connection = std::move(idle_.back());
    idle_.pop_back();
    if (SteadyClock::now() - connection->idle_since < kMaxIdle && still_open(*connection)) {
      connection->reused = true;
      co_return connection;
    }
    connection->close();
  }
  co_return co_await connect(deadline);
}

Awaitable<Result<Connection>> UpstreamPool::connect(SteadyClock::time_point deadline) {
  const auto& url = spec_.upstream;
  // The resolver has no deadline of its own: a timer cancels it (and holds
  // it, since its handler may run after this returns).
  auto resolver = std::make_shared<Resolver>(io_);
  Timer timer(io_);
  timer.expires_at(deadline);
  timer.async_wait([resolver](const boost::system::error_code& ec) {
    if (!ec) resolver->cancel();
  });
  auto [resolve_ec, endpoints] = co_await resolver->async_resolve(url.host, url.port, kAwait);
  timer.cancel();
  if (resolve_ec) co_return unreachable("resolve " + url.host, resolve_ec);
  auto tcp_stream = std::make_unique<Stream>(io_);
  tcp_stream->expires_at(deadline);
  auto [connect_ec, endpoint] = co_await tcp_stream->async_connect(endpoints, kAwait);
  if (connect_ec) co_return unreachable("connect to " + url.origin(), connect_ec);
  tcp_stream->socket().set_option(tcp::no_delay(true));
  if (!url.tls) co_return std::make_unique<UpstreamConnection>(std::move(tcp_stream));
  auto tls = std::make_unique<UpstreamConnection::Tls>(std::move(*tcp_stream), tls_);
  // SNI carries a name, never an address (RFC 6066).
  boost::system::error_code not_address;
  net::ip::make_address(url.host, not_address);
  if (not_address && !SSL_set_tlsext_host_name(tls->native_handle(), url.host.c_str()))
    co_return Error{Failure::unreachable, "TLS: cannot set the server name " + url.host, {}};
  tls->set_verify_callback(net::ssl::host_name_verification(url.host));
  auto [handshake_ec] = co_await tls->async_handshake(net::ssl::stream_base::client, kAwait);
  if (handshake_ec) co_return unreachable("TLS handshake with " + url.origin(), handshake_ec);
  co_return std::make_unique<UpstreamConnection>(std::move(tls));
}

void UpstreamPool::release(Connection connection) {
  if (connection->buffer().size() > 0 || idle_.size() >= max_idle_) return connection->close();
  connection->idle_since = SteadyClock::now();
  idle_.push_back(std::move(connection));
}

}  // namespace inflight::models
