// See attempt_runner.hpp.
#include "inflight/supervisor/runs/attempt_runner.hpp"

#include <fcntl.h>

#include <cerrno>
#include <csignal>
#include <system_error>

#include "inflight/core/bounded_json.hpp"
#include "inflight/core/child_environment.hpp"
#include "inflight/core/fd.hpp"
#include "inflight/core/log.hpp"
#include "inflight/supervisor/process/child_process.hpp"
#include "process/output_tee.hpp"

extern char** environ;

namespace inflight {

namespace fs = std::filesystem;

namespace {

std::string join(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& arg : argv) out += (out.empty() ? "" : " ") + arg;
  return out;
}

// console.log collects every attempt's output, each behind a header line. A
// symlink planted under its name is not followed.
Fd open_console_log(const fs::path& dir, const std::string& header) {
  Fd fd = checkpoint::open_in_run_dir(dir, "console.log", O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (!fd)
    throw std::system_error(errno, std::generic_category(),
                            "open " + (dir / "console.log").string());
  write_all(fd.get(), header, (dir / "console.log").string());
  return fd;
}

}  // namespace

AttemptRunner::AttemptRunner(boost::asio::io_context& io, ChildReaper& reaper,
                             AttemptSettings settings, std::function<void(Run&, Outcome)> exited)
    : io_(io), reaper_(reaper), settings_(std::move(settings)), exited_(std::move(exited)) {}

// Each attempt under its own run shim, in a cgroup named after serve and the
// run: instances sharing a cgroup never pick the same name.
ContainedChild AttemptRunner::spawn(Run& run, const RenderContext& context, Fd console) {
  const auto cgroup = "inflight-" + std::to_string(::getpid()) + "-" + run.id;
  ChildSpec spec{.argv = run.params.argv,
                 .cwd = run.params.cwd,
                 .env = child_environment(environ, *run.child, context),
                 .stdin_fd = -1,
                 .stdout_fd = console.get(),
                 .stderr_fd = console.get()};
  if (!settings_.echo_output)
    return spawn_contained(io_, spec, settings_.containment, cgroup, settings_.hidden_files);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe");
  Fd read_end(fds[0]);
  const Fd write_end(fds[1]);
  spec.stdout_fd = spec.stderr_fd = write_end.get();
  auto child = spawn_contained(io_, spec, settings_.containment, cgroup, settings_.hidden_files);
  std::make_shared<OutputTee>(io_, std::move(read_end), std::move(console))->start();
  return child;
}

bool AttemptRunner::start(Run& run) {
  const int attempt = run.attempts() + 1;
  run.on(RunEvent::start);
  // An attempt after the first continues the run's checkpoint.
  const bool resume = attempt > 1;
  RenderContext context{run.id, fs::absolute(run.dir).string(), attempt, resume};
  grant_models(run, attempt, context);
  run.params.argv = run.child->render(run.params.request, context);
  run.params.cwd = fs::absolute(run.child->cwd()).lexically_normal().string();
  run.params.attempts.push_back({.attempt = attempt,
                                 .pod = settings_.pod_name,
                                 .started_at = iso8601_utc(SystemClock::now())});
  run.finished_at.reset();
  run.exit_code.reset();
  if (!run.checkpoint.unsaved_since) run.checkpoint.unsaved_since = SteadyClock::now();
  try {
    checkpoint::write_run_params(run.dir, run.params);
  } catch (...) {
    run.params.attempts.pop_back();  // never started
    throw;
  }

  const auto header = "=== inflight attempt " + std::to_string(attempt) + " on " +
                      settings_.pod_name + " at " + run.params.attempts.back().started_at + ": " +
                      join(run.params.argv) + "\n";
  Fd console = open_console_log(run.dir, header);
  try {
    run.process.emplace(spawn(run, context, std::move(console)));
    run.on(RunEvent::spawned);
    reaper_.watch(run.process->shim(),
                  [this, &run](int wait_status) { on_exit(run, wait_status); });
    log::info("attempt started",
              {{"run_id", run.id}, {"attempt", attempt}, {"pid", run.process->leader()}});
  } catch (const std::system_error& e) {
    reaper_.end_strays();  // a shim that missed its start deadline may have forked
    if (settings_.models) settings_.models->close(run.id);
    not_started(run, e.code());
    return false;
  }
  return true;
}

// The child could not be started (the program is gone since serve checked
// it, or cannot be executed): its attempt says why, in the run's status.
void AttemptRunner::not_started(Run& run, const std::error_code& error) {
  // The program's name comes from the config; bounded, so that the record
  // stays readable from a branch.
  const auto program = printable(run.params.argv.front().substr(0, 200));
  const auto message = "cannot start " + program + ": " + error.message();
  try {
    open_console_log(run.dir, "inflight: " + message + "\n");
  } catch (const std::exception& e) {
    log::error("console.log not written", {{"run_id", run.id}, {"error", e.what()}});
  }
  log::error("attempt could not start", {{"run_id", run.id}, {"error", message}});
  auto& record = run.params.attempts.back();
  record.ended_at = iso8601_utc(SystemClock::now());
  record.exit_code = 127;
  record.error = message;
  run.exit_code = 127;
}

// A token for this attempt, and the URLs of the models its template names.
void AttemptRunner::grant_models(Run& run, int attempt, RenderContext& context) {
  run.model_calls.reset();
  if (!settings_.models || run.child->models().empty()) return;
  run.model_calls = std::make_shared<checkpoint::ModelCounts>();
  auto granted = settings_.models->open(run.id, fs::absolute(run.dir), attempt, run.child->models(),
                                        run.model_calls);
  context.model_urls = std::move(granted.urls);
  context.model_key = std::move(granted.token);
}

void AttemptRunner::on_exit(Run& run, int wait_status) {
  const auto status = decode_wait_status(wait_status);
  const auto outcome = classify(status, run.lifecycle.stop_cause(), run.child->retry_exit_codes());
  run.stop_timer.cancel();
  // The shim exits as the leader did, once every process of the attempt
  // ended; had it been killed itself (by the OOM killer, or by its child),
  // what it left was reparented here, and ends now.
  run.process->clean_up();
  run.process.reset();
  reaper_.end_strays();
  if (settings_.models) settings_.models->close(run.id);
  auto& record = run.params.attempts.back();
  record.ended_at = iso8601_utc(SystemClock::now());
  record.exit_code = status.exit_code;
  record.signal = status.signal;
  run.exit_code = status.exit_code;
  log::info("attempt ended",
            {{"run_id", run.id},
             {"attempt", record.attempt},
             {"exit_code", status.exit_code ? OrderedJson(*status.exit_code) : nullptr},
             {"signal", status.signal ? OrderedJson(*status.signal) : nullptr},
             {"outcome", to_string(outcome)}});
  exited_(run, outcome);
}

void AttemptRunner::stop(Run& run, RunEvent stop) {
  run.on(stop);
  run.process->signal(run.child->stop_signal());
  run.stop_timer.expires_after(settings_.stop_grace);
  run.stop_timer.async_wait([&run](const boost::system::error_code& ec) {
    if (!ec && run.process) run.process->end();
  });
}

}  // namespace inflight
