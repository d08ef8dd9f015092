// `inflight resume`: serve's restore, attempt and shutdown machinery for one
// run in the foreground.
#include "inflight/supervisor/lifecycle/resume.hpp"

#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <optional>

#include "inflight/core/bounded_json.hpp"
#include "inflight/core/branch_name.hpp"
#include "inflight/core/exit_code.hpp"
#include "inflight/core/log.hpp"
#include "inflight/supervisor/lifecycle/shutdown_plan.hpp"
#include "inflight/supervisor/process/event_loop.hpp"
#include "inflight/supervisor/runs/local_runs.hpp"
#include "inflight/supervisor/store/checkpoint_agent.hpp"

namespace inflight {

namespace fs = std::filesystem;

namespace {

// `r-1` → {"", r-1}; `inflight/pod-a/r-1` or `refs/heads/inflight/pod-a/r-1`
// → {pod-a, r-1}.
checkpoint::BranchName target_of(const std::string& target) {
  if (checkpoint::is_valid_run_id(target)) return {.pod = "", .run_id = target};
  const auto ref = target.starts_with(checkpoint::kHeadsPrefix)
                       ? target
                       : std::string(checkpoint::kHeadsPrefix) + target;
  if (auto name = checkpoint::parse_branch_ref(ref)) return *name;
  throw UsageError("'" + printable(target) +
                   "' is neither a run id nor an inflight/<pod>/<run-id> branch");
}

// The exit code the child gave, or the shell's 128+N for a signal.
int child_exit_code(const Run& run) {
  if (run.params.attempts.empty()) return kExitFailure;
  const auto& last = run.params.attempts.back();
  if (last.exit_code) return *last.exit_code;
  if (last.signal) return 128 + *last.signal;
  return kExitFailure;
}

// The resumable local copy of the run the target names, if any.
std::vector<RestoredRun> local_run(const fs::path& runs_dir, const checkpoint::BranchName& name) {
  auto runs = find_resumable_runs(runs_dir);
  std::erase_if(runs, [&](const RestoredRun& r) {
    return r.params.run_id != name.run_id || (!name.pod.empty() && r.params.origin_pod != name.pod);
  });
  return runs;
}

}  // namespace

int resume(const ResumeSettings& s, const std::string& target, bool restore_only) {
  const auto name = target_of(target);
  const auto& run_id = name.run_id;
  s.children.check_programs();
  const auto runs_dir = fs::absolute(s.store.runs_dir).lexically_normal();
  fs::create_directories(runs_dir);
  boost::asio::io_context io;
  ChildReaper::become_subreaper();
  ChildReaper reaper(io);
  AgentCheckpoints checkpoints(io, reaper, s.store, runs_dir, s.children);
  const SupervisorSettings supervised{.runs_dir = runs_dir,
                                      .pod_name = s.store.pod_name,
                                      .max_concurrent = 1,
                                      .max_attempts = s.store.max_attempts,
                                      .max_queued = 1,
                                      .stop_grace = s.flush_window,
                                      .network_timeout = s.store.git_timeout,
                                      .echo_output = true};
  std::optional<RunSupervisor> supervisor;
  std::optional<ShutdownPlan> plan;
  int exit_code = kExitFailure;
  auto finish = [&](int code) {
    exit_code = code;
    io.stop();
  };

  auto start = [&](RestoredRun restored) {
    supervisor.emplace(io, reaper, checkpoints, supervised, s.children);
    if (adopt_restored(*supervisor, s.children, {std::move(restored)}) == 0)
      return finish(kExitFailure);
    Run& run = *supervisor->find(run_id);
    if (run.held) return finish(kExitUsage);
    if (is_final(run.status)) return finish(kExitFailure);  // out of attempts
    plan.emplace(io, *supervisor, nullptr, s.grace_period, s.flush_window,
                 [&](int code) { finish(code == 0 ? child_exit_code(run) : code); });
    supervisor->on_child_exit([&] {
      if (run.status == RunStatus::queued) return;  // a crash being retried
      supervisor->when_store_idle(run, [&] { finish(child_exit_code(run)); });
    });
    supervisor->finish_restore();
    supervisor->start_periodic_checkpoints(s.checkpoint_interval);
  };

  checkpoints.restore(
      {.local = local_run(runs_dir, name), .only = target, .skip = {}, .lease_until = std::nullopt},
      SteadyClock::now() + s.store.git_timeout, [&](RestoreResult result) {
        if (result.refused) {
          log::error("the results repo refused our credentials", {{"error", *result.refused}});
          return finish(kExitUnreachable);
        }
        if (!result.ambiguous.empty()) {
          log::error("several pods hold a run of this id; name one branch",
                     {{"run_id", run_id}, {"branches", result.ambiguous}});
          return finish(kExitUsage);
        }
        if (!result.held.empty()) {
          log::error("this instance cannot run the run; its checkpoint is kept",
                     {{"run_id", run_id}, {"reason", result.held.front().reason}});
          return finish(kExitUsage);
        }
        if (!result.left.empty() && !result.left.front().pod.empty()) {
          log::error("another live instance holds this run; left to it",
                     {{"run_id", run_id},
                      {"pod", result.left.front().pod},
                      {"until", iso8601_utc(SystemClock::from_time_t(result.left.front().until))}});
          return finish(kExitFailure);
        }
        if (result.runs.empty()) {
          log::error(
              "no checkpoint and no resumable run dir for this run; try `inflight "
              "checkpoints list`",
              {{"run_id", run_id}, {"runs_dir", runs_dir.string()}});
          return finish(result.unreachable ? kExitUnreachable : kExitNotFound);
        }
        if (!restore_only) return start(std::move(result.runs.front()));
        prepare_for_resume(result.runs.front(), s.children);
        log::info("restored; the branch is kept",
                  {{"run_id", run_id}, {"dir", result.runs.front().dir.string()}});
        finish(0);
      });

  boost::asio::signal_set signals(io, SIGTERM, SIGINT);
  std::function<void()> await_signal = [&] {
    signals.async_wait([&](const boost::system::error_code& ec, int signal) {
      if (ec) return;
      if (!plan) return finish(128 + signal);  // nothing started yet
      plan->on_signal(signal);
      await_signal();
    });
  };
  await_signal();
  run_event_loop(io);
  return exit_code;
}

}  // namespace inflight
