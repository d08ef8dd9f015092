// The Asio types of the models code, all bound to serve's one io_context.
// Asio's defaults name any_io_executor, a type-erased executor: each
// operation of a call copied one, which counted outstanding work atomically
// and went through an indirect call, about 3 % of serve's CPU per call with
// 200 streams (docs/benchmarks.md). The concrete executor does neither.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <chrono>

namespace inflight::models {

using Executor = boost::asio::io_context::executor_type;
template <class T>
using Awaitable = boost::asio::awaitable<T, Executor>;
using Socket = boost::asio::basic_stream_socket<boost::asio::ip::tcp, Executor>;
using Acceptor = boost::asio::basic_socket_acceptor<boost::asio::ip::tcp, Executor>;
using Resolver = boost::asio::ip::basic_resolver<boost::asio::ip::tcp, Executor>;
using Timer = boost::asio::basic_waitable_timer<
    std::chrono::steady_clock, boost::asio::wait_traits<std::chrono::steady_clock>, Executor>;
using Stream =
    boost::beast::basic_stream<boost::asio::ip::tcp, Executor, boost::beast::unlimited_rate_policy>;

// The bare token, for an operation of our own (async_initiate) whose result is a value.
inline constexpr boost::asio::use_awaitable_t<Executor> kUseAwaitable;
// Every wait of a call's coroutines: its error as a value, never thrown.
inline constexpr auto kAwait = boost::asio::as_tuple(kUseAwaitable);

}  // namespace inflight::models
