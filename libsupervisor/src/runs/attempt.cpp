// One attempt of a run: render its argv, record it, start the child, and
// settle the run when the child's exit is reaped.
#include <fcntl.h>

#include <cerrno>
#include <csignal>
#include <system_error>

#include "inflight/core/bounded_json.hpp"
#include "inflight/core/child_environment.hpp"
#include "inflight/core/fd.hpp"
#include "inflight/core/log.hpp"
#include "inflight/supervisor/process/child_process.hpp"
#include "inflight/supervisor/runs/run_supervisor.hpp"
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

std::vector<std::string> RunSupervisor::child_environment(const ChildTemplate& child,
                                                          const RenderContext& context) const {
  return inflight::child_environment(environ, child, context);
}

// Each attempt under its own run shim, in a cgroup named after serve and the
// run: instances sharing a cgroup never pick the same name.
ContainedChild RunSupervisor::spawn_attempt(Run& run, const RenderContext& context, Fd console) {
  const auto cgroup = "inflight-" + std::to_string(::getpid()) + "-" + run.id;
  ChildSpec spec{.argv = run.params.argv,
                 .cwd = run.params.cwd,
                 .env = child_environment(*run.child, context),
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

void RunSupervisor::start_attempt(Run& run) {
  const int attempt = run.attempts() + 1;
  run.on(RunEvent::start);
  // An attempt after the first continues the run's checkpoint.
  const bool resume = attempt > 1;
  const RenderContext context{run.id, fs::absolute(run.dir).string(), attempt, resume};
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
    run.process.emplace(spawn_attempt(run, context, std::move(console)));
    run.on(RunEvent::spawned);
    reaper_.watch(run.process->shim(),
                  [this, &run](int wait_status) { on_exit(run, wait_status); });
    log::info("attempt started",
              {{"run_id", run.id}, {"attempt", attempt}, {"pid", run.process->leader()}});
  } catch (const std::system_error& e) {
    reaper_.end_strays();  // a shim that missed its start deadline may have forked
    not_started(run, e.code());
  }
}

// The child could not be started (the program is gone since serve checked
// it, or cannot be executed): the run fails, and says why in its status.
void RunSupervisor::not_started(Run& run, const std::error_code& error) {
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
  settle(run, Outcome::failed);
}

void RunSupervisor::on_exit(Run& run, int wait_status) {
  const auto status = decode_wait_status(wait_status);
  const auto outcome = classify(status, run.lifecycle.stop_cause(), run.child->retry_exit_codes());
  run.stop_timer.cancel();
  // The shim exits as the leader did, once every process of the attempt
  // ended; had it been killed itself (by the OOM killer, or by its child),
  // what it left was reparented here, and ends now.
  run.process->clean_up();
  run.process.reset();
  reaper_.end_strays();
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
  settle(run, outcome);
  if (exit_listener_) exit_listener_(run);
  start_queued();
}

void RunSupervisor::settle(Run& run, Outcome outcome) {
  ++outcomes_[outcome];
  run.params.attempts.back().outcome = std::string(to_string(outcome));
  switch (outcome) {
    case Outcome::succeeded:
    case Outcome::failed:
    case Outcome::cancelled:
      run.on(outcome == Outcome::succeeded ? RunEvent::succeed
             : outcome == Outcome::failed  ? RunEvent::fail
                                           : RunEvent::cancelled);
      finish(run);
      break;
    case Outcome::interrupted:
      run.on(RunEvent::interrupt);
      run.finished_at = iso8601_utc(SystemClock::now());
      break;
    case Outcome::crashed:
    case Outcome::deferred:
      retry(run, outcome);
      break;
  }
  // At shutdown every child ends at once, and a durable write each would
  // serialise fsyncs on the event loop. Both the old and the new run-params
  // make the run resumable, so an atomic rename is enough there. On failure
  // the file keeps the attempt without its end, which a restore reads as
  // crashed: resumable.
  write_params(run, phase_ == Phase::shutting_down ? checkpoint::Durability::atomic
                                                   : checkpoint::Durability::synced);
  // After the write: the final commit must carry final_status. A run out of
  // budget is released only to be published (fail_out_of_budget).
  const bool own_end =
      outcome == Outcome::succeeded || outcome == Outcome::failed || outcome == Outcome::cancelled;
  const bool out_of_budget = !own_end && run.params.final_status.has_value();
  if (own_end || (out_of_budget && settings_.publish)) release_checkpoint(run);
}

// An attempt that ended by the run's own doing is tried again while neither
// budget is spent; at shutdown it is interrupted like the others.
void RunSupervisor::retry(Run& run, Outcome outcome) {
  if (phase_ == Phase::shutting_down) {
    run.on(RunEvent::interrupt);
  } else if (const auto budget = exhausted_budget(run); !budget) {
    // A signal nobody here sent (OOM killer, a stray kill): resume at once.
    if (outcome == Outcome::crashed && run.on(RunEvent::retry)) queue_.push_front(&run);
    if (outcome == Outcome::deferred && run.on(RunEvent::defer)) defer(run);
  } else {
    fail_out_of_budget(run, *budget);
  }
}

// The child asked to be run again later: the run waits, queued but out of
// the queue, for its backoff, doubled with each deferral in a row.
void RunSupervisor::defer(Run& run) {
  int deferrals = 0;
  for (auto a = run.params.attempts.rbegin();
       a != run.params.attempts.rend() && a->outcome == to_string(Outcome::deferred); ++a)
    ++deferrals;
  const auto delay = run.child->retry_delay(deferrals);
  log::info("run deferred by its child; it resumes after the backoff",
            {{"run_id", run.id},
             {"exit_code", run.exit_code ? OrderedJson(*run.exit_code) : nullptr},
             {"backoff", format_duration(delay)}});
  run.retry_timer.expires_after(delay);
  run.retry_timer.async_wait([this, &run](const boost::system::error_code& ec) {
    if (ec || run.lifecycle.state() != RunState::deferred || phase_ != Phase::ready) return;
    run.on(RunEvent::backoff_over);
    queue_.push_back(&run);
    start_queued();
  });
}

// The budget the run has used up, if any: it gets no further attempt.
std::optional<Budget> RunSupervisor::exhausted_budget(const Run& run) const {
  const auto spent = checkpoint::spent_budgets(run.params);
  if (spent.failures >= settings_.max_attempts) return Budget::attempts;
  if (spent.interruptions >= settings_.max_interruptions) return Budget::interruptions;
  return std::nullopt;
}

// Published, a run out of budget is kept for inspection by its result;
// unpublished, by its branch. The caller writes run-params.json first.
void RunSupervisor::fail_out_of_budget(Run& run, Budget budget) {
  ++run_events_.out_of_budget[budget];
  const std::string flag = budget == Budget::attempts ? "--max-attempts" : "--max-interruptions";
  const auto spent = checkpoint::spent_budgets(run.params);
  log::error("run reached " + flag +
                 (settings_.publish ? "; marked failed and published"
                                    : "; marked failed, checkpoint kept for inspection"),
             {{"run_id", run.id},
              {"attempts", run.attempts()},
              {"failures", spent.failures},
              {"interruptions", spent.interruptions}});
  run.on(RunEvent::fail);
  finish(run);
}

// Records the end its lifecycle reached: when, and the status the run keeps.
void RunSupervisor::finish(Run& run) {
  run.finished_at = iso8601_utc(SystemClock::now());
  run.params.final_status = std::string(to_string(run.status()));
}

}  // namespace inflight
