// `inflight serve`: restore, then the HTTP API and the supervised children
// until a signal starts the shutdown plan.
#include "inflight/supervisor/lifecycle/serve.hpp"

#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "inflight/checkpoint/remote_url.hpp"
#include "inflight/core/exit_code.hpp"
#include "inflight/core/log.hpp"
#include "inflight/core/run_dir.hpp"
#include "inflight/supervisor/agent_client/agent_checkpoints.hpp"
#include "inflight/supervisor/http/api_routes.hpp"
#include "inflight/supervisor/lifecycle/command_loop.hpp"
#include "inflight/supervisor/lifecycle/pod_lease.hpp"
#include "inflight/supervisor/lifecycle/restoration.hpp"
#include "inflight/supervisor/lifecycle/shutdown_plan.hpp"

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

SupervisorSettings supervisor_settings(const ServeSettings& s, ModelGateway& models) {
  return {.runs_dir = fs::absolute(s.store.runs_dir).lexically_normal(),
          .pod_name = s.store.pod_name,
          .max_concurrent = s.max_concurrent,
          .max_attempts = s.store.max_attempts,
          .max_interruptions = s.store.max_interruptions,
          .max_queued = s.max_queued,
          .stop_grace = s.flush_window,
          .network_timeout = s.store.git_timeout,
          .echo_output = false,
          .containment = choose_containment(s.containment),
          .hidden_files = s.hidden_files,
          .models = &models,
          .publish = s.store.publish,
          .keep_finished = s.keep_finished,
          .release_at_ticks = s.checkpoint_interval > Duration::zero()};
}

// One serving instance: its parts in the order each needs the last, and the
// handlers that tie the signal, the shutdown plan and the restore together.
class ServeCommand {
 public:
  explicit ServeCommand(const ServeSettings& settings);
  int run();

 private:
  void on_signal(int signal);
  void on_shutdown_done(int code);
  void exit(int code);
  void refuse_credentials(const std::string& error);

  const ServeSettings& settings_;
  // Before "listening" is logged: a signal from then on is queued for the
  // shutdown plan, never left to the default action.
  CommandLoop loop_;
  ModelGateway models_;
  const SupervisorSettings supervised_;
  AgentCheckpoints checkpoints_;
  RunSupervisor supervisor_;
  ApiRoutes api_;
  HttpServer server_;
  PodLease lease_;
  ShutdownPlan plan_;
  Restoration restoration_;
  int exit_code_ = 0;
  SteadyClock::time_point shutdown_started_;
};

boost::asio::ip::tcp::endpoint listen_endpoint(const ServeSettings& s) {
  return {boost::asio::ip::make_address(s.listen_host), s.listen_port};
}

ServeCommand::ServeCommand(const ServeSettings& settings)
    : settings_(settings),
      models_(loop_.io(), settings.models),
      supervised_(supervisor_settings(settings, models_)),
      checkpoints_(loop_.io(), loop_.reaper(), settings.store, supervised_.runs_dir,
                   settings.children),
      supervisor_(loop_.io(), loop_.reaper(), checkpoints_, supervised_, settings.children),
      api_(supervisor_, loop_.reaper(),
           {.api_token = settings.api_token,
            .last_shutdown_seconds = read_last_shutdown(settings.store.runs_dir),
            .checkpoint_interval = settings.checkpoint_interval,
            .lease = &lease_,
            .models = &models_}),
      server_(loop_.io(), listen_endpoint(settings),
              [this](const HttpRequest& r, HttpServer::Respond respond) {
                api_.handle(r, std::move(respond));
              },
              api_.refusals(),
              {.max_connections = static_cast<std::size_t>(settings.max_connections),
               .max_per_client = static_cast<std::size_t>(settings.max_connections_per_client)}),
      lease_(loop_.io(), checkpoints_,
             lease_terms(settings.checkpoint_interval, settings.grace_period),
             settings.store.git_timeout),
      plan_(loop_.io(), supervisor_, &lease_, settings.grace_period, settings.flush_window,
            [this](int code) { on_shutdown_done(code); }),
      restoration_(loop_.io(), supervisor_, checkpoints_, plan_, lease_, settings,
                   [this](const std::string& error) { refuse_credentials(error); }) {
  log_destination(settings.store);
  const auto bound = server_.local_endpoint();
  log::info("listening",
            {{"address", bound.address().to_string() + ":" + std::to_string(bound.port())},
             {"pod", settings.store.pod_name}});
  loop_.on_signal([this](int signal) { on_signal(signal); });
}

int ServeCommand::run() {
  boost::asio::post(loop_.io(), [this] { restoration_.start(); });
  loop_.run();
  return exit_code_;
}

void ServeCommand::on_signal(int signal) {
  if (shutdown_started_ == SteadyClock::time_point{}) shutdown_started_ = SteadyClock::now();
  lease_.stop();
  plan_.on_signal(signal);
}

// A shutdown that left a run unpushed keeps the lease: only this disk knows
// that run's last state, and a restart here finds it still its own.
// Otherwise the lease goes, even when a finished run's branch stayed: live
// pods leave such a branch to its pod while its lease lives.
void ServeCommand::on_shutdown_done(int code) {
  if (plan_.keeps_lease() || plan_.lease_released()) return exit(code);
  lease_.give_up(shutdown_started_ + settings_.grace_period, [this, code] { exit(code); });
}

void ServeCommand::exit(int code) {
  exit_code_ = code;
  const std::chrono::duration<double> took = SteadyClock::now() - shutdown_started_;
  loop_.stop();
  log::info("shutdown complete", {{"exit_code", code}, {"seconds", took.count()}});
  write_last_shutdown(settings_.store.runs_dir, took.count());
}

void ServeCommand::refuse_credentials(const std::string& error) {
  log::error("the results repo refused our credentials; fix them and start again",
             {{"error", error}});
  exit_code_ = kExitUnreachable;
  loop_.stop();
}

}  // namespace

int serve(const ServeSettings& settings) {
  settings.children.check_programs();
  fs::create_directories(settings.store.runs_dir);
  ServeCommand command(settings);
  return command.run();
}

}  // namespace inflight
