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
#include <memory>
#include <optional>

namespace inflight {

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;
using HttpResponse = boost::beast::http::response<boost::beast::http::string_body>;

// Refusals the server answers itself, before a handler sees the request.
struct HttpRefusals {
  std::function<HttpResponse(unsigned version)> too_large;
  std::function<HttpResponse(unsigned version)> malformed;
};

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  static constexpr std::size_t kBodyLimit = 1 << 20;

  // Throws boost::system::system_error when the address cannot be bound.
  // Beyond `max_connections` open connections, new ones get a 503.
  HttpServer(boost::asio::io_context& io, const boost::asio::ip::tcp::endpoint& endpoint,
             Handler handler, HttpRefusals refusals, std::size_t max_connections);

  boost::asio::ip::tcp::endpoint local_endpoint() const { return acceptor_.local_endpoint(); }

 private:
  void accept();
  void back_off(const boost::system::error_code& ec);

  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer retry_timer_;
  Handler handler_;
  HttpRefusals refusals_;
  std::size_t max_connections_;
  // Shared with the sessions, which may outlive the server at teardown.
  std::shared_ptr<std::size_t> live_ = std::make_shared<std::size_t>(0);
  // When "cannot accept" was last logged; unset before the first time.
  std::optional<std::chrono::steady_clock::time_point> accept_error_logged_;
};

}  // namespace inflight
