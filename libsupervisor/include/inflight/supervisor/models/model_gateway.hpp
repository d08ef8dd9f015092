// The model-call journal on serve's event loop (SPEC §13, docs/models.md): a
// loopback listener through which each attempt reaches the models its
// template names, with a token made for that attempt. A call goes to the
// model's upstream with the real key, and its answer streams back while it
// is recorded in the run dir's journal; a later attempt of the same run that
// asks the same question gets the recorded answer instead of paying again.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>

#include "inflight/core/run_params.hpp"
#include "inflight/supervisor/models/model_settings.hpp"

namespace inflight {

namespace models {
class Hub;
}  // namespace models

// What one attempt's template is filled with: RenderContext's model fields.
struct AttemptModels {
  std::map<std::string, std::string> urls;  // model name → base URL
  std::string token;
};

// /metrics' model series.
struct ModelMetrics {
  // (model, source, outcome) → calls; (model, kind, source) → tokens.
  std::map<std::tuple<std::string, std::string, std::string>, std::uint64_t> calls;
  std::map<std::tuple<std::string, std::string, std::string>, std::uint64_t> tokens;
};

class ModelGateway {
 public:
  // Binds the listener when `settings` has models. Throws
  // boost::system::system_error when the address cannot be bound.
  ModelGateway(boost::asio::io_context& io, ModelSettings settings);
  ~ModelGateway();
  ModelGateway(const ModelGateway&) = delete;
  ModelGateway& operator=(const ModelGateway&) = delete;

  bool enabled() const;
  boost::asio::ip::tcp::endpoint local_endpoint() const;

  // Opens the journal of `run_dir` for attempt `attempt`, which may reach
  // `models` with the token returned; the journal is read on a worker
  // thread, and calls wait for it. `counts` is the attempt's record, which
  // the calls keep up to date.
  AttemptModels open(const std::string& run_id, const std::filesystem::path& run_dir, int attempt,
                     const std::set<std::string>& models,
                     std::shared_ptr<checkpoint::ModelCounts> counts);
  // The attempt's child ended: its token stops working. Its calls still in
  // flight are cut, unless a shutdown began (they are then read to their
  // end, for the next attempt).
  void close(const std::string& run_id);
  // From now on a child that disconnects does not end its call.
  void begin_shutdown();
  // Calls of `run_id` (of any attempt) not yet ended, and of every run.
  std::size_t in_flight(const std::string& run_id) const;
  std::size_t in_flight() const;
  // `then` once `run_id` has no call in flight (at once when it has none).
  void when_idle(const std::string& run_id, std::function<void()> then);
  // `then` once no call at all is in flight.
  void when_all_idle(std::function<void()> then);
  // Ends `run_id`'s calls now, unrecorded (a stop through the API).
  void cut(const std::string& run_id);
  // Ends every call now, unrecorded (the flush window is over).
  void cut_all();

  const ModelMetrics& metrics() const;

 private:
  // Shared with every session and call, which may outlive the gateway
  // until the event loop is destroyed.
  std::shared_ptr<models::Hub> hub_;
};

}  // namespace inflight
