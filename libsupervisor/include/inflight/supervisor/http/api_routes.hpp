// The HTTP API of serve (docs/serve.md "The HTTP API"): routes requests to the run supervisor.
#pragma once

#include <optional>
#include <sstream>
#include <string>

#include "inflight/supervisor/http/http_server.hpp"
#include "inflight/supervisor/lifecycle/pod_lease.hpp"
#include "inflight/supervisor/models/model_gateway.hpp"
#include "inflight/supervisor/process/child_reaper.hpp"
#include "inflight/supervisor/runs/run_supervisor.hpp"

namespace inflight {

struct ApiSettings {
  std::string api_token;                        // empty: no token required
  std::optional<double> last_shutdown_seconds;  // of the previous instance
  Duration checkpoint_interval{};               // 0: no periodic checkpoints
  const PodLease* lease = nullptr;
  const ModelGateway* models = nullptr;  // its calls in /metrics
};

class ApiRoutes {
 public:
  ApiRoutes(RunSupervisor& supervisor, const ChildReaper& reaper, ApiSettings settings);

  void handle(const HttpRequest& request, HttpServer::Respond respond);
  HttpRefusals refusals() const;

  static OrderedJson status_json(Run& run);

 private:
  HttpResponse answer(const HttpRequest& request);
  HttpResponse route(const HttpRequest& request);
  void submit(const HttpRequest& request, HttpServer::Respond respond);
  HttpResponse submitted(const SubmitResult& result, unsigned version);
  // GET /api/eval/run/{id}/log[?tail=N]: the last N lines of its console.log.
  HttpResponse run_log(const std::string& id, std::string_view target, unsigned version);
  HttpResponse metrics(unsigned version);
  void progress(std::ostringstream& out);
  void checkpoint_health(std::ostringstream& out);
  void run_events(std::ostringstream& out);
  void model_calls(std::ostringstream& out);
  bool authorized(const HttpRequest& request) const;

  RunSupervisor& supervisor_;
  const ChildReaper& reaper_;
  ApiSettings settings_;
};

}  // namespace inflight
