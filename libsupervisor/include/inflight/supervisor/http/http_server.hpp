// A small HTTP/1.1 server on the supervisor's io_context (Boost.Beast):
// keep-alive, a body limit, and a deadline on every read and write so that a
// silent client cannot hold a connection forever.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>

namespace inflight {

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;
using HttpResponse = boost::beast::http::response<boost::beast::http::string_body>;

// Refusals the server answers itself, before a handler sees the request.
struct HttpRefusals {
  std::function<HttpResponse(unsigned version)> too_large;
  std::function<HttpResponse(unsigned version)> malformed;
  std::function<HttpResponse(unsigned version)> busy;  // a probe slot asked for another route
};

// What one client, and all of them, may hold (docs/serve.md "The HTTP API").
struct HttpLimits {
  std::size_t max_connections = 256;
  std::size_t max_per_client = 32;  // open connections from one peer address
};

// Open connections: all of them, those on probe slots, and by peer address.
struct ConnectionCounts {
  std::size_t live = 0;
  std::size_t probes = 0;
  std::map<boost::asio::ip::address, std::size_t> by_peer;
};

class HttpServer {
 public:
  // A handler answers through `respond`, at once or later (a submit that asks the store first),
  // exactly once; the connection reads its next request only after that.
  using Respond = std::function<void(HttpResponse)>;
  using Handler = std::function<void(const HttpRequest&, Respond respond)>;

  static constexpr std::size_t kBodyLimit = 1 << 20;

  // A request (headers and body, or a keep-alive wait for the next one) is
  // read within this, however slowly its client sends it.
  static constexpr auto kRequestDeadline = std::chrono::seconds(10);
  // Connections kept beyond max_connections for /healthz and /readyz only,
  // so that a flood never fails the kubelet's probes.
  static constexpr std::size_t kProbeSlots = 8;
  static constexpr auto kProbeDeadline = std::chrono::seconds(2);

  // Throws boost::system::system_error when the address cannot be bound.
  // A client over max_per_client, or any beyond max_connections and the
  // probe slots, gets a 503 without being read.
  HttpServer(boost::asio::io_context& io, const boost::asio::ip::tcp::endpoint& endpoint,
             Handler handler, HttpRefusals refusals, HttpLimits limits);

  boost::asio::ip::tcp::endpoint local_endpoint() const { return acceptor_.local_endpoint(); }

 private:
  void accept();
  void admit(boost::asio::ip::tcp::socket socket);
  void back_off(const boost::system::error_code& ec);

  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer retry_timer_;
  Handler handler_;
  HttpRefusals refusals_;
  HttpLimits limits_;
  // Shared with the sessions, which may outlive the server at teardown.
  std::shared_ptr<ConnectionCounts> counts_ = std::make_shared<ConnectionCounts>();
  // When "cannot accept" was last logged; unset before the first time.
  std::optional<std::chrono::steady_clock::time_point> accept_error_logged_;
};

}  // namespace inflight
