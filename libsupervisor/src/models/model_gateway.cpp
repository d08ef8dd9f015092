// See model_gateway.hpp; the calls themselves are in model_listener.cpp and
// model_call.cpp.
#include "inflight/supervisor/models/model_gateway.hpp"

#include <openssl/rand.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>

#include "hub.hpp"
#include "inflight/core/bounded_json.hpp"
#include "inflight/core/log.hpp"

namespace inflight {

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace models {

namespace {

// 256 bits from OpenSSL's generator, in hex: never guessed, never reused.
std::string new_token() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof bytes) != 1) throw std::runtime_error("no random bytes for a token");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token = "inflight-";
  for (const auto byte : bytes) {
    token += kHex[byte >> 4];
    token += kHex[byte & 15];
  }
  return token;
}

}  // namespace

void CallHandle::end() {
  cut = true;
  boost::beast::error_code ignored;
  if (child) child->socket().close(ignored);
  if (upstream) upstream->close();
}

Awaitable<void> Attempt::journal_ready() {
  while (!loaded) {
    journal_read.expires_at(SteadyClock::time_point::max());
    co_await journal_read.async_wait(kAwait);
  }
}

void Attempt::journal_loaded(JournalScan scan, std::optional<JournalWriter> journal_writer) {
  journal = std::move(scan);
  writer = std::move(journal_writer);
  loaded = true;
  journal_read.cancel();
}

Hub::Hub(net::io_context& io_context, ModelSettings model_settings)
    : io(io_context), settings(std::move(model_settings)), acceptor(io_context) {
  for (const auto& [name, route] : settings.models) {
    pools.emplace(name,
                  std::make_unique<UpstreamPool>(io, route.spec, settings.max_calls_per_model));
    // Every series from the start, at 0: increase() sees a model's first
    // error, which a series born at 1 would hide.
    for (const auto* source : {"upstream", "journal"}) {
      for (const auto* outcome : {"ok", "error", "cut"}) metrics.calls[{name, source, outcome}] = 0;
      for (const auto* kind : {"input", "output"}) metrics.tokens[{name, kind, source}] = 0;
    }
  }
}

void Hub::start_listening() {
  const tcp::endpoint endpoint(net::ip::make_address(settings.listen_host), settings.listen_port);
  acceptor.open(endpoint.protocol());
  acceptor.set_option(net::socket_base::reuse_address(true));
  acceptor.bind(endpoint);
  acceptor.listen();
  net::co_spawn(io, accept_loop(), net::detached);
}

void Hub::stop() {
  boost::system::error_code ignored;
  acceptor.close(ignored);
  for (auto* call : calls) call->end();
  workers.join();
}

Awaitable<void> Hub::accept_loop() {
  auto self = shared_from_this();
  Timer backoff(io);
  while (acceptor.is_open()) {
    auto [ec, socket] = co_await acceptor.async_accept(kAwait);
    if (ec == net::error::operation_aborted) co_return;
    if (ec) {
      // Out of descriptors: accepting again at once would spin.
      log::warn("model listener cannot accept connections; retrying", {{"error", ec.message()}});
      backoff.expires_after(std::chrono::milliseconds(250));
      co_await backoff.async_wait(kAwait);
      continue;
    }
    // An answer goes out in several writes (its head, its chunks): without
    // this, each waits for the child's delayed acknowledgement, ~40 ms.
    boost::system::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    net::co_spawn(io, serve_connection(self, std::move(socket)), net::detached);
  }
}

std::shared_ptr<Attempt> Hub::attempt_of_token(std::string_view token) const {
  const auto it = tokens.find(token);
  if (it == tokens.end()) return nullptr;
  const auto attempt = attempts.find(it->second);
  if (attempt == attempts.end() || !attempt->second->open) return nullptr;
  return attempt->second;
}

void Hub::end_calls(const std::string& run_id, std::optional<int> attempt) {
  for (auto* call : calls)
    if (call->run_id == run_id && (!attempt || call->attempt == *attempt)) call->end();
}

void Hub::call_started(Attempt& attempt, const std::string& model) {
  ++in_flight[attempt.run_id];
  ++in_flight_by_model[model];
  ++in_flight_total;
}

void Hub::call_ended(Attempt& attempt, const std::string& model) {
  --in_flight_by_model[model];
  if (--in_flight[attempt.run_id] == 0) {
    in_flight.erase(attempt.run_id);
    auto waiters = std::move(idle_waiters[attempt.run_id]);
    idle_waiters.erase(attempt.run_id);
    for (auto& then : waiters) net::post(io, std::move(then));
  }
  if (--in_flight_total > 0) return;
  for (auto& then : std::exchange(all_idle_waiters, {})) net::post(io, std::move(then));
}

void Hub::refused(unsigned status, const std::string& why) {
  ++refused_unlogged;
  const auto now = SteadyClock::now();
  if (refusal_logged_at && now - *refusal_logged_at < std::chrono::seconds(10)) return;
  log::warn("model calls refused before any upstream",
            {{"status", status},
             {"error", printable(why.substr(0, 300))},
             {"refused_since_last_said", std::exchange(refused_unlogged, 0)}});
  refusal_logged_at = now;
}

void Hub::count(const std::string& model, std::string_view source, std::string_view outcome,
                const Usage& usage) {
  ++metrics.calls[{model, std::string(source), std::string(outcome)}];
  if (usage.input) metrics.tokens[{model, "input", std::string(source)}] += *usage.input;
  if (usage.output) metrics.tokens[{model, "output", std::string(source)}] += *usage.output;
}

}  // namespace models

ModelGateway::ModelGateway(net::io_context& io, ModelSettings settings)
    : hub_(std::make_shared<models::Hub>(io, std::move(settings))) {
  if (!enabled()) return;
  hub_->start_listening();
  const auto bound = hub_->acceptor.local_endpoint();
  log::info("model listener",
            {{"address", bound.address().to_string() + ":" + std::to_string(bound.port())},
             {"models", hub_->settings.models.size()}});
}

ModelGateway::~ModelGateway() {
  hub_->stop();
}

bool ModelGateway::enabled() const {
  return !hub_->settings.models.empty();
}

tcp::endpoint ModelGateway::local_endpoint() const {
  return hub_->acceptor.local_endpoint();
}

AttemptModels ModelGateway::open(const std::string& run_id, const std::filesystem::path& run_dir,
                                 int attempt, const std::set<std::string>& models,
                                 std::shared_ptr<checkpoint::ModelCounts> counts) {
  AttemptModels granted;
  if (!enabled()) return granted;
  const auto endpoint = local_endpoint();
  for (const auto& model : models)
    granted.urls[model] = "http://" + endpoint.address().to_string() + ":" +
                          std::to_string(endpoint.port()) + "/models/" + model;
  granted.token = models::new_token();
  close(run_id);
  auto opened = std::make_shared<models::Attempt>(hub_->io, run_id, run_dir, attempt, models,
                                                  granted.token, std::move(counts));
  hub_->attempts[run_id] = opened;
  hub_->tokens[granted.token] = run_id;
  const models::JournalLimits limits{.max_bytes = hub_->settings.max_journal_bytes};
  // Read before the first call is answered, and off the event loop: a
  // journal may hold hundreds of megabytes.
  // The worker keeps no reference once it posts back: the attempt's timer
  // is destroyed on the event loop's thread.
  net::post(hub_->workers, [&io = hub_->io, opened, limits]() mutable {
    auto scan = models::scan_journal(opened->run_dir, limits);
    std::optional<models::JournalWriter> writer;
    if (!scan.problem) {
      auto journal = models::JournalWriter::open(opened->run_dir, limits, scan);
      if (journal)
        writer.emplace(std::move(*journal));
      else
        scan.problem = journal.error().message;
    }
    net::post(io, [opened = std::move(opened), scan = std::move(scan),
                   writer = std::move(writer)]() mutable {
      if (scan.problem)
        log::warn("model-call journal unreadable: nothing is replayed for this run",
                  {{"run_id", opened->run_id}, {"error", *scan.problem}});
      opened->journal_loaded(std::move(scan), std::move(writer));
    });
  });
  return granted;
}

void ModelGateway::close(const std::string& run_id) {
  const auto it = hub_->attempts.find(run_id);
  if (it == hub_->attempts.end()) return;
  auto& attempt = *it->second;
  attempt.open = false;
  hub_->tokens.erase(attempt.token);
  if (!hub_->shutting_down) hub_->end_calls(run_id, attempt.number);
  hub_->attempts.erase(it);
}

void ModelGateway::begin_shutdown() {
  hub_->shutting_down = true;
}

std::size_t ModelGateway::in_flight(const std::string& run_id) const {
  const auto it = hub_->in_flight.find(run_id);
  return it == hub_->in_flight.end() ? 0 : it->second;
}

std::size_t ModelGateway::in_flight() const {
  return hub_->in_flight_total;
}

void ModelGateway::when_idle(const std::string& run_id, std::function<void()> then) {
  if (in_flight(run_id) == 0) return then();
  hub_->idle_waiters[run_id].push_back(std::move(then));
}

void ModelGateway::when_all_idle(std::function<void()> then) {
  if (in_flight() == 0) return then();
  hub_->all_idle_waiters.push_back(std::move(then));
}

void ModelGateway::cut(const std::string& run_id) {
  hub_->end_calls(run_id);
}

void ModelGateway::cut_all() {
  for (auto* call : hub_->calls) call->end();
}

const ModelMetrics& ModelGateway::metrics() const {
  return hub_->metrics;
}

}  // namespace inflight
