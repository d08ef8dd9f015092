#include "inflight/supervisor/http_server.hpp"

#include <array>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <chrono>
#include <memory>
#include <optional>

namespace inflight {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;

namespace {

constexpr auto kIoDeadline = std::chrono::seconds(30);

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(tcp::socket socket, const HttpServer::Handler& handler, const HttpRefusals& refusals)
      : stream_(std::move(socket)), handler_(handler), refusals_(refusals) {}

  void read() {
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
    stream_.async_read_some(boost::asio::buffer(discard_),
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
  std::array<char, 65536> discard_{};
  const HttpServer::Handler& handler_;
  const HttpRefusals& refusals_;
};

}  // namespace

HttpServer::HttpServer(boost::asio::io_context& io, const tcp::endpoint& endpoint, Handler handler,
                       HttpRefusals refusals)
    : acceptor_(io), handler_(std::move(handler)), refusals_(std::move(refusals)) {
  acceptor_.open(endpoint.protocol());
  acceptor_.set_option(boost::asio::socket_base::reuse_address(true));
  acceptor_.bind(endpoint);
  acceptor_.listen();
  accept();
}

void HttpServer::accept() {
  acceptor_.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (ec == boost::asio::error::operation_aborted) return;
    if (!ec) std::make_shared<HttpSession>(std::move(socket), handler_, refusals_)->read();
    accept();
  });
}

}  // namespace inflight
