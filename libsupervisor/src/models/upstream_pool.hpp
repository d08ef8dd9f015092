// Connections to one model's upstream, plain or TLS, kept alive between
// calls (docs/models.md "Upstreams"): a call reuses an idle connection the
// provider has not closed, else opens one, every step within its deadline.
#pragma once

#include <array>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <deque>
#include <memory>
#include <variant>

#include "inflight/core/clock.hpp"
#include "inflight/core/failure.hpp"
#include "inflight/core/model_specs.hpp"
#include "loop.hpp"

namespace inflight::models {

class UpstreamConnection {
 public:
  using Plain = Stream;
  using Tls = boost::beast::ssl_stream<Stream>;

  explicit UpstreamConnection(std::unique_ptr<Plain> stream) : stream_(std::move(stream)) {
    reserve();
  }
  explicit UpstreamConnection(std::unique_ptr<Tls> stream) : stream_(std::move(stream)) {
    reserve();
  }

  Stream& tcp();
  // Calls f with the stream itself, plain or TLS: every read and write goes
  // through here.
  template <class F>
  decltype(auto) with_stream(F&& f) {
    return std::visit([&](auto& stream) -> decltype(auto) { return f(*stream); }, stream_);
  }
  // Bytes read past the last answer; a connection is reused only when empty.
  boost::beast::flat_buffer& buffer() { return buffer_; }
  // Where an answer's body is parsed to, a piece at a time: one per
  // connection, not 16 KiB more in each call's coroutine frame, which took
  // malloc's slow path at every call.
  std::array<char, 16384>& body_room() { return body_room_; }
  // Closes the socket: what waits on it ends with an error at once.
  void close();

  bool reused = false;
  SteadyClock::time_point idle_since{};

 private:
  // Reads are sized by the buffer's free room: an empty flat_buffer reads
  // 512 bytes at a time, 2,000 reads for a 1 MB answer.
  void reserve() { buffer_.reserve(16 * 1024); }

  std::variant<std::unique_ptr<Plain>, std::unique_ptr<Tls>> stream_;
  boost::beast::flat_buffer buffer_;
  std::array<char, 16384> body_room_;
};

using Connection = std::unique_ptr<UpstreamConnection>;

class UpstreamPool {
 public:
  // Keeps at most `max_idle` connections idle: as many as the model may have
  // calls at once, so that a steady load never closes one to open another.
  // Throws std::runtime_error when the model's ca_file cannot be read.
  UpstreamPool(boost::asio::io_context& io, const ModelSpec& spec, std::size_t max_idle);

  // An idle connection the provider has not closed, else a new one,
  // connected (and its TLS handshake done, the host name checked) by
  // `deadline`.
  Awaitable<Result<Connection>> acquire(SteadyClock::time_point deadline);
  // A new connection, never an idle one.
  Awaitable<Result<Connection>> connect(SteadyClock::time_point deadline);
  // Kept for the next call, after a whole answer on a keep-alive connection.
  void release(Connection connection);

 private:
  boost::asio::io_context& io_;
  const ModelSpec& spec_;
  std::size_t max_idle_;
  boost::asio::ssl::context tls_;
  std::deque<Connection> idle_;
};

}  // namespace inflight::models
