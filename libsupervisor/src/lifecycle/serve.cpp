// `inflight serve`: restore, then the HTTP API and the supervised children
// until a signal starts the shutdown plan.
#include "inflight/supervisor/lifecycle/serve.hpp"

#include <unistd.h>

#include <fstream>

#include "inflight/core/exit_code.hpp"
#include "inflight/core/log.hpp"
#include "inflight/core/run_dir.hpp"
#include "inflight/supervisor/http/api_routes.hpp"
#include "inflight/supervisor/lifecycle/command_loop.hpp"
#include "inflight/supervisor/lifecycle/pod_lease.hpp"
#include "inflight/supervisor/lifecycle/restoration.hpp"
#include "inflight/supervisor/lifecycle/shutdown_plan.hpp"
#include "inflight/supervisor/store/checkpoint_agent.hpp"

namespace inflight {

namespace fs = std::filesystem;

namespace {

// The previous instance's shutdown duration, kept for /metrics: written and
// read here only.
const char* kLastShutdownFile = ".last-shutdown-seconds";

std::optional<double> read_last_shutdown(const fs::path& runs_dir) {
  std::ifstream in(runs_dir / kLastShutdownFile);
  double seconds = 0;
  if (in >> seconds) return seconds;
  return std::nullopt;
}

// Only for /metrics of the next start: a full disk must not hold the exit.
void write_last_shutdown(const fs::path& runs_dir, double seconds) {
  try {
    checkpoint::write_file_atomically(runs_dir / kLastShutdownFile, std::to_string(seconds) + "\n",
                                      checkpoint::Durability::atomic);
  } catch (const std::exception& e) {
    log::warn("shutdown duration not recorded", {{"error", e.what()}});
  }
}

SupervisorSettings supervisor_settings(const ServeSettings& s) {
  return {.runs_dir = fs::absolute(s.store.runs_dir).lexically_normal(),
          .pod_name = s.store.pod_name,
          .max_concurrent = s.max_concurrent,
          .max_attempts = s.store.max_attempts,
          .max_queued = s.max_queued,
          .stop_grace = s.flush_window,
          .network_timeout = s.store.git_timeout,
          .echo_output = false};
}

}  // namespace

int serve(const ServeSettings& settings) {
  settings.children.check_programs();
  fs::create_directories(settings.store.runs_dir);
  // Before "listening" is logged: a signal from then on is queued for the
  // shutdown plan, never left to the default action.
  CommandLoop loop;
  auto& io = loop.io();
  auto& reaper = loop.reaper();
  const auto supervised = supervisor_settings(settings);
  AgentCheckpoints checkpoints(io, reaper, settings.store, supervised.runs_dir, settings.children);
  RunSupervisor supervisor(io, reaper, checkpoints, supervised, settings.children);
  ApiRoutes api(supervisor, reaper,
                {settings.api_token, read_last_shutdown(settings.store.runs_dir)});
  const boost::asio::ip::tcp::endpoint endpoint(boost::asio::ip::make_address(settings.listen_host),
                                                settings.listen_port);
  HttpServer server(
      io, endpoint, [&api](const HttpRequest& r) { return api.handle(r); }, api.refusals(),
      static_cast<std::size_t>(settings.max_connections));
  const auto bound = server.local_endpoint();
  log::info("listening",
            {{"address", bound.address().to_string() + ":" + std::to_string(bound.port())},
             {"pod", settings.store.pod_name}});

  int exit_code = 0;
  SteadyClock::time_point shutdown_started;
  PodLease lease(io, checkpoints, lease_terms(settings.checkpoint_interval, settings.grace_period),
                 settings.store.git_timeout);
  auto exit = [&](int code) {
    exit_code = code;
    const std::chrono::duration<double> took = SteadyClock::now() - shutdown_started;
    loop.stop();
    log::info("shutdown complete", {{"exit_code", code}, {"seconds", took.count()}});
    write_last_shutdown(settings.store.runs_dir, took.count());
  };
  // A shutdown that left a run unpushed keeps the lease: only this disk
  // knows that run's last state, and a restart here finds it still its own.
  ShutdownPlan plan(io, supervisor, &lease, settings.grace_period, settings.flush_window,
                    [&](int code) {
                      if (code != 0 || plan.lease_released()) return exit(code);
                      lease.give_up(shutdown_started + settings.grace_period, [&exit] { exit(0); });
                    });
  loop.on_signal([&](int signal) {
    if (shutdown_started == SteadyClock::time_point{}) shutdown_started = SteadyClock::now();
    lease.stop();
    plan.on_signal(signal);
  });
  Restoration restoration(io, supervisor, checkpoints, plan, lease, settings,
                          [&](const std::string& error) {
                            log::error(
                                "the results repo refused our credentials; fix them and start "
                                "again",
                                {{"error", error}});
                            exit_code = kExitUnreachable;
                            loop.stop();
                          });
  boost::asio::post(io, [&] { restoration.start(); });
  loop.run();
  return exit_code;
}

}  // namespace inflight
