// See model_call.hpp.
#include "model_call.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/chunk_encode.hpp>

#include "call.hpp"
#include "inflight/core/clock.hpp"
#include "inflight/core/log.hpp"
#include "inflight/supervisor/models/model_request.hpp"

namespace inflight::models {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

// A body larger than this has its identity computed off the event loop, so
// that one run's 32 MiB request never stalls another run's stream.
constexpr std::size_t kLargeBody = 256 * 1024;

// What goes upstream from the child's headers: what shapes the answer,
// never a credential (the model's key is added).
constexpr std::string_view kForwardedHeaders[] = {
    "content-type", "accept", "anthropic-version", "anthropic-beta", "openai-beta", "user-agent"};
// Headers that change an answer: part of a request's identity.
constexpr std::string_view kIdentityHeaders[] = {"anthropic-version", "anthropic-beta",
                                                 "openai-beta"};
// What comes back to the child beside the body's type.
constexpr std::string_view kAnswerHeaders[] = {"retry-after", "x-request-id", "request-id"};

// work() on the gateway's worker thread, its result back on the awaiting
// coroutine's executor. `work` is moved into the operation. Not a coroutine
// itself, and given a named object: GCC 12 destroyed a closure passed by
// value to a coroutine twice (a double free of a 32 MiB body's copy).
template <class F>
auto off_loop(Hub& hub, F& work) {
  using R = std::invoke_result_t<F>;
  auto initiation = [&hub](auto handler, F job) {
    net::post(hub.workers, [job = std::move(job), handler = std::move(handler)]() mutable {
      auto result = job();
      const auto executor = net::get_associated_executor(handler);
      net::post(executor, [handler = std::move(handler), result = std::move(result)]() mutable {
        std::move(handler)(std::move(result));
      });
    });
  };
  return net::async_initiate<decltype(kUseAwaitable), void(R)>(initiation, kUseAwaitable,
                                                               std::move(work));
}

RequestParts parts_of(const ChildRequest& request, const CallTarget& target) {
  RequestParts parts{.model = target.model,
                     .method = std::string(request.method_string()),
                     .path = target.path,
                     .query = target.query,
                     .identity_headers = {},
                     .body = request.body()};
  for (const auto name : kIdentityHeaders)
    if (auto it = request.find(name); it != request.end())
      parts.identity_headers.emplace_back(std::string(name), std::string(it->value()));
  return parts;
}

// The request as it goes upstream. It takes the child's body, which is not
// needed after: a 32 MiB body is not copied on the event loop.
http::request<http::string_body> upstream_request(const ModelRoute& route, ChildRequest& request,
                                                  const CallTarget& target) {
  const auto& url = route.spec.upstream;
  auto path = url.base_path + target.path;
  if (!target.query.empty()) path += "?" + target.query;
  http::request<http::string_body> up(request.method(), path, 11);
  const bool default_port = url.port == (url.tls ? "443" : "80");
  const bool ipv6 = url.host.find(':') != std::string::npos;
  const auto host = ipv6 ? "[" + url.host + "]" : url.host;
  up.set(http::field::host, default_port ? host : host + ":" + url.port);
  for (const auto name : kForwardedHeaders)
    if (auto it = request.find(name); it != request.end()) up.set(name, it->value());
  if (route.spec.auth == ModelAuth::bearer)
    up.set(http::field::authorization, "Bearer " + route.key);
  else
    up.set("x-api-key", route.key);
  // The journal holds decoded bodies: the provider is asked for none other.
  up.set(http::field::accept_encoding, "identity");
  up.keep_alive(true);
  up.body() = std::move(request.body());
  up.prepare_payload();
  return up;
}

void record(Call& call, const CallTarget& target, const ChildRequest& request,
            const std::string& digest, unsigned status, std::string_view content_type, bool stream,
            std::string body, const Usage& usage, const std::string& started_at) {
  auto& attempt = call.attempt();
  if (!attempt.writer) return;
  const JournalRecord entry{.digest = digest,
                            .model = target.model,
                            .method = std::string(request.method_string()),
                            .path = target.path,
                            .attempt = attempt.number,
                            .status = static_cast<int>(status),
                            .content_type = std::string(content_type),
                            .stream = stream,
                            .body = std::move(body),
                            .started_at = started_at,
                            .ms = call.elapsed_ms(),
                            .usage = usage};
  const auto appended = attempt.writer->append(entry);
  if (!appended && !attempt.journal_error_logged) {
    attempt.journal_error_logged = true;
    log::error("model-call journal not written; calls go on unrecorded",
               {{"run_id", attempt.run_id}, {"error", appended.error().message}});
  } else if (appended && *appended == JournalWriter::Appended::over_limit &&
             !attempt.journal_full_logged) {
    attempt.journal_full_logged = true;
    log::warn("model-call journal full (--model-max-journal-bytes): calls go on unrecorded",
              {{"run_id", attempt.run_id}});
  }
}

struct Sent {
  Connection connection;
  std::optional<Error> error;
};

// Writes the request on a kept-alive connection, or a new one; a reused
// connection that failed before a byte of the request left is replaced
// once, since the provider cannot have seen that request.
Awaitable<Sent> send(Call& call, UpstreamPool& pool, http::request<http::string_body>& up,
                     SteadyClock::time_point deadline) {
  for (int round = 0; round < 2; ++round) {
    // Two statements: GCC 12 miscompiles a co_await in each arm of `?:`.
    Result<Connection> acquired = Error{Failure::other, "no connection", {}};
    if (round == 0)
      acquired = co_await pool.acquire(deadline);
    else
      acquired = co_await pool.connect(deadline);
    if (!acquired) co_return Sent{nullptr, acquired.error()};
    Connection connection = std::move(*acquired);
    call.handle().upstream = connection.get();
    if (call.handle().cut) co_return Sent{std::move(connection), Error{Failure::other, "cut", {}}};
    connection->tcp().expires_at(deadline);
    auto [ec, written] = co_await connection->with_stream(
        [&](auto& stream) { return http::async_write(stream, up, kAwait); });
    if (!ec) co_return Sent{std::move(connection), std::nullopt};
    call.handle().upstream = nullptr;
    if (!(connection->reused && written == 0) || call.handle().cut)
      co_return Sent{nullptr, Error{Failure::unreachable, "send: " + ec.message(), {}}};
  }
  co_return Sent{nullptr, Error{Failure::unreachable, "send: no connection", {}}};
}

// 429 when the run, or the model across runs, has its limit of calls in
// flight: a child's burst holds only its own calls.
std::optional<http::response<http::string_body>> over_limit(const Hub& hub, const Attempt& attempt,
                                                            const CallTarget& target,
                                                            unsigned version) {
  const auto count = [](const std::map<std::string, std::size_t>& counts, const std::string& key) {
    const auto it = counts.find(key);
    return it == counts.end() ? std::size_t{0} : it->second;
  };
  if (count(hub.in_flight, attempt.run_id) >= hub.settings.max_calls_per_run)
    return error_answer(429, "too_many_calls",
                        "the run has --model-max-calls-per-run calls in flight", version);
  if (count(hub.in_flight_by_model, target.model) >= hub.settings.max_calls_per_model)
    return error_answer(429, "too_many_calls",
                        "the model has --model-max-calls-per-model calls in flight", version);
  return std::nullopt;
}

// A call that got no answer from upstream: the child gets an error of
// ours, unless the call was cut.
Awaitable<bool> failed(Call& call, Stream& child, const ChildRequest& request, unsigned status,
                       std::string_view code, std::string message) {
  const bool cut = call.handle().cut;
  call.ended(status, "upstream", cut ? "cut" : "error", {});
  if (cut) co_return false;
  auto answer = error_answer(status, code, message, request.version());
  child.expires_after(kChildWriteDeadline);
  auto [ec, written] = co_await http::async_write(child, answer, kAwait);
  co_return !ec && request.keep_alive();
}

std::vector<std::pair<std::string, std::string>> answer_headers(
    const http::response_parser<http::buffer_body>& parser) {
  std::vector<std::pair<std::string, std::string>> headers;
  for (const auto name : kAnswerHeaders)
    if (auto it = parser.get().find(name); it != parser.get().end())
      headers.emplace_back(std::string(name), std::string(it->value()));
  return headers;
}

// Parses into the body's room left what the connection has already read:
// events that came together reach the child in one write, as they reach a
// client of the provider itself in one read. A read parses one chunk only.
beast::error_code parse_buffered(http::response_parser<http::buffer_body>& parser,
                                 beast::flat_buffer& buffer) {
  beast::error_code ec;
  while (!parser.is_done() && buffer.size() > 0 && parser.get().body().size > 0) {
    const auto used = parser.put(buffer.data(), ec);
    buffer.consume(used);
    if (ec == http::error::need_more) return {};
    if (ec || used == 0) return ec;
  }
  return ec;
}

// Upstream with the model's key; the answer streams back to the child while
// it is recorded. In a shutdown, a child that went away does not end it.
Awaitable<bool> forward(Hub& hub, Call& call, Stream& child, ChildRequest& request,
                        const CallTarget& target, const std::string& digest) {
  const auto& route = hub.settings.models.at(target.model);
  const auto started_at = iso8601_utc(SystemClock::now());
  const auto deadline = SteadyClock::now() + route.spec.timeout;
  auto up = upstream_request(route, request, target);
  auto sent = co_await send(call, *hub.pools.at(target.model), up, deadline);
  if (sent.error)
    co_return co_await failed(call, child, request, 502, "upstream_unreachable",
                              sent.error->message);
  auto& connection = *sent.connection;
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(boost::none);
  auto [head_ec, head_read] = co_await connection.with_stream([&](auto& stream) {
    return http::async_read_header(stream, connection.buffer(), parser, kAwait);
  });
  if (head_ec)
    co_return co_await failed(call, child, request, 502, "upstream_failed",
                              "answer: " + head_ec.message());
  const auto status = parser.get().result_int();
  const std::string content_type(parser.get()[http::field::content_type]);
  const bool stream = content_type.starts_with("text/event-stream");
  AnswerWatcher watcher(stream);
  AnswerSink sink(child, request.version(), hub.settings.max_answer_bytes);
  sink.head(status, content_type, answer_headers(parser));
  // What came with the head goes with it; else the child has the head now.
  if (connection.buffer().size() == 0 && !parser.is_done()) co_await sink.flush();
  auto& piece = connection.body_room();
  bool short_read = false;
  while (!parser.is_done()) {
    if (!sink.child_ok() && !hub.shutting_down) break;
    parser.get().body().data = piece.data();
    parser.get().body().size = piece.size();
    auto [ec, n] = co_await connection.with_stream(
        [&](auto& s) { return http::async_read_some(s, connection.buffer(), parser, kAwait); });
    if (!ec) ec = parse_buffered(parser, connection.buffer());
    if (ec && ec != http::error::need_buffer) {
      short_read = true;
      break;
    }
    const std::string_view got(piece.data(), piece.size() - parser.get().body().size);
    watcher.feed(got);
    co_await sink.piece(got, parser.is_done());
  }
  const bool whole = parser.is_done() && !short_read;
  const bool complete = whole && watcher.finish() == AnswerEnd::complete && status < 300;
  const bool child_ok = whole && (co_await sink.last());
  const bool cut = call.handle().cut || (!whole && !sink.child_ok());
  call.handle().upstream = nullptr;
  if (whole && parser.keep_alive())
    hub.pools.at(target.model)->release(std::move(sent.connection));
  else
    connection.close();
  const auto outcome = cut ? "cut" : complete ? "ok" : "error";
  if (complete && !cut && sink.recording())
    record(call, target, request, digest, status, content_type, stream, std::move(sink.recorded()),
           watcher.usage(), started_at);
  call.ended(status, "upstream", outcome, watcher.usage());
  co_return child_ok && !cut && request.keep_alive();
}

}  // namespace

http::response<http::string_body> error_answer(unsigned status, std::string_view code,
                                               std::string_view message, unsigned version) {
  http::response<http::string_body> answer(static_cast<http::status>(status), version);
  answer.set(http::field::content_type, "application/json");
  answer.body() =
      nlohmann::json{
          {"error",
           {{"message", message}, {"type", "inflight_" + std::string(code)}, {"code", code}}}}
          .dump() +
      "\n";
  answer.prepare_payload();
  return answer;
}

Awaitable<bool> answer_call(std::shared_ptr<Hub> hub, std::shared_ptr<Attempt> attempt,
                            Stream& child, ChildRequest request, CallTarget target) {
  if (const auto refusal = over_limit(*hub, *attempt, target, request.version())) {
    auto answer = *refusal;
    auto [ec, written] = co_await http::async_write(child, answer, kAwait);
    co_return !ec && request.keep_alive();
  }
  Call call(*hub, attempt, child, target, request.body().size());
  const auto& route = hub->settings.models.at(target.model);
  auto parts = parts_of(request, target);
  const auto& ignore = route.spec.ignore_fields;
  std::string digest;
  if (parts.body.size() > kLargeBody) {
    auto identify = [parts = std::move(parts), ignore] { return request_digest(parts, ignore); };
    digest = co_await off_loop(*hub, identify);
  } else {
    digest = request_digest(parts, ignore);
  }
  co_await attempt->journal_ready();
  if (auto answer = recorded_answer(*attempt, route, digest))
    co_return co_await replay(call, child, *answer, request.version()) && request.keep_alive();
  co_return co_await forward(*hub, call, child, request, target, digest);
}

}  // namespace inflight::models
