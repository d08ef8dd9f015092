// `inflight run`: serve's restore, lease, attempts, checkpoints, shutdown and
// publishing for one run in the foreground, ended by an exit code a Job's
// podFailurePolicy can judge (docs/run.md).
#include "inflight/supervisor/lifecycle/one_run.hpp"

#include <optional>

#include "inflight/core/branch_name.hpp"
#include "inflight/core/exit_code.hpp"
#include "inflight/core/log.hpp"
#include "inflight/supervisor/agent_client/agent_checkpoints.hpp"
#include "inflight/supervisor/lifecycle/command_loop.hpp"
#include "inflight/supervisor/lifecycle/pod_lease.hpp"
#include "inflight/supervisor/lifecycle/record_watch.hpp"
#include "inflight/supervisor/lifecycle/resume.hpp"
#include "inflight/supervisor/lifecycle/shutdown_plan.hpp"
#include "inflight/supervisor/runs/local_runs.hpp"

namespace inflight {

namespace fs = std::filesystem;

namespace {

// This disk's copies of the run: resumable ones to offer the store, and the
// ids of finished ones for it to publish.
RestoreQuery query_of(const fs::path& runs_dir, const OneRun& what) {
  RestoreQuery query{.local = find_resumable_runs(runs_dir),
                     .only = what.id,
                     .skip = {},
                     .lease_until = std::nullopt,
                     .take_over = what.take_over};
  std::erase_if(query.local, [&](const RestoredRun& r) { return r.params.run_id != what.id; });
  for (const auto& run : find_finished_runs(runs_dir))
    if (run.params.run_id == what.id) query.finished.push_back(what.id);
  return query;
}

int exit_code_of(const checkpoint::PublishedRun& published) {
  const bool failed = published.entry && published.entry->final_status != "succeeded";
  return failed ? kExitFailure : kExitSuccess;
}

class OneRunCommand {
 public:
  OneRunCommand(const ResumeSettings& s, const OneRun& what, const fs::path& runs_dir)
      : settings_(s),
        what_(what),
        runs_dir_(runs_dir),
        terms_(lease_terms(s.checkpoint_interval, s.grace_period)),
        checkpoints_(loop_.io(), loop_.reaper(), s.store, runs_dir, s.children),
        supervisor_(loop_.io(), loop_.reaper(), checkpoints_,
                    foreground_supervision(s, runs_dir, choose_containment(s.containment), models_),
                    s.children),
        lease_(loop_.io(), checkpoints_, terms_, s.store.git_timeout),
        plan_(loop_.io(), supervisor_, &lease_, s.grace_period, s.flush_window,
              [this](int code) { shut_down(code); }),
        timer_(loop_.io()),
        watch_(terms_.period),
        races_(what.take_over) {}

  int run() {
    loop_.on_signal([this](int signal) { on_signal(signal); });
    look();
    loop_.run();
    return exit_code_;
  }

 private:
  // The first look takes the lease before it claims anything, as serve's.
  void look() {
    auto query = query_of(runs_dir_, what_);
    if (first_look_) query.lease_until = lease_.take();
    query.expired = watch_.expired(SteadyClock::now());
    plan_.restore_started();
    checkpoints_.restore(query, SteadyClock::now() + settings_.store.git_timeout,
                         [this](RestoreResult result) { looked(std::move(result)); });
  }

  void looked(RestoreResult result) {
    plan_.restore_finished();
    const bool first = std::exchange(first_look_, false);
    if (first) lease_.taken(!result.failure);
    if (shutting_down_) {  // claimed meanwhile: the shutdown pushes it back
      adopt_restored(supervisor_, settings_.children, std::move(result.runs));
      return;
    }
    if (const auto code = refusal(result, first)) return end(*code);
    if (first && settings_.checkpoint_interval > Duration::zero())
      supervisor_.checkpoints().start_periodic_checkpoints(settings_.checkpoint_interval, &lease_);
    else if (first)
      lease_.keep();
    if (races_.claim_again(result, what_.id)) return look();
    // A later look that failed (a network blip while waiting) looks again.
    if (!result.left.empty() || result.failure) return wait_for_holder(result);
    if (!result.runs.empty()) {
      if (!first) lease_.claimed();  // after waiting, while the lease was let go
      return start(std::move(result.runs));
    }
    start_new();
  }

  // The exit code of a look that leaves this command nothing to run, once
  // logged; nullopt when there is something to run or wait for.
  std::optional<int> refusal(const RestoreResult& result, bool first) const {
    if (result.failure && (result.failure->kind == Failure::auth || first)) {
      log::error("the results repo could not be used; nothing started",
                 {{"run_id", what_.id}, {"error", result.failure->message}});
      return kExitUnreachable;
    }
    if (result.published)
      for (const auto& published : *result.published)
        if (published.run_id == what_.id) {
          log::info("the run is finished and published; it does not run again",
                    {{"run_id", what_.id},
                     {"result", checkpoint::result_ref(what_.id)},
                     {"final_status", published.entry ? OrderedJson(published.entry->final_status)
                                                      : OrderedJson(nullptr)}});
          return exit_code_of(published);
        }
    if (!result.ambiguous.empty()) {
      log::error("several pods' branches hold a run of this id; resume one by its branch",
                 {{"run_id", what_.id}, {"branches", result.ambiguous}});
      return kExitUsage;
    }
    if (!result.held.empty()) {
      log::error("this command cannot run the run; its checkpoint is kept",
                 {{"run_id", what_.id}, {"reason", result.held.front().reason}});
      return kExitUsage;
    }
    return std::nullopt;
  }

  // Another instance's lease or claim holds the run: looked at again once
  // that record was seen unchanged for its term (docs/checkpoints.md "Leases and clocks").
  void wait_for_holder(const RestoreResult& result) {
    const auto now = SteadyClock::now();
    watch_.saw(result.watched, now);
    if (!waiting_logged_ && !result.left.empty()) {
      log::info(races_.gave_up()
                    ? "another instance holds this run; waiting for its lease or claim to end "
                      "(the take-over gave up racing its checkpoints)"
                    : "another instance holds this run; waiting for its lease or claim to end "
                      "(--take-over takes it at once)",
                {{"run_id", what_.id}, {"pod", result.left.front().pod}});
      waiting_logged_ = true;
    }
    auto delay = terms_.period;
    if (const auto next = watch_.next_expiry(now)) delay = std::min(delay, *next + kTermEndSlack);
    timer_.expires_after(delay);
    timer_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec && !shutting_down_) look();
    });
  }

  void start(std::vector<RestoredRun> restored) {
    adopt_restored(supervisor_, settings_.children, std::move(restored));
    Run* run = supervisor_.find(what_.id);
    if (!run) return end(kExitFailure);
    if (run->lifecycle.held()) return end(kExitUsage);
    supervise(*run);
  }

  void start_new() {
    auto body = what_.request;
    body["id"] = what_.id;
    supervisor_.finish_restore();
    const auto result = supervisor_.submit(body);
    if (result.http_status != 202 || !result.run) {
      log::error("the run was not accepted", {{"run_id", what_.id}, {"error", result.message}});
      return end(result.http_status == 400 ? kExitUsage : kExitFailure);
    }
    supervise(*result.run);
  }

  void supervise(Run& run) {
    supervisor_.on_child_exit([this, &run](Run&) { on_child_exit(run); });
    supervisor_.finish_restore();
    if (is_final(run.status())) settle(run);  // out of budget: published as failed
  }

  void on_child_exit(Run& run) {
    if (shutting_down_) return;  // the shutdown plan ends the command
    if (run.lifecycle.fenced()) return end(kExitTryAgain);
    if (is_final(run.status())) return settle(run);
    // A crash is retried here at once, as in serve.
    if (run.lifecycle.state() == RunState::deferred) defer(run);
  }

  // The child asked to be run later: its state is pushed, and the command
  // that runs it again (a Job's next pod) resumes it.
  void defer(Run& run) {
    run.retry_timer.cancel();
    supervisor_.checkpoints().checkpoint(
        run, checkpoint::CheckpointReason::shutdown,
        SteadyClock::now() + settings_.store.git_timeout,
        [this](const CheckpointResult& result) { end(result ? kExitTryAgain : kExitFailure); });
  }

  // Over: once its release (publish, then branch deletion) is answered.
  void settle(Run& run) {
    supervisor_.checkpoints().when_store_idle(run, [this, &run] {
      if (!run.lifecycle.release_pending())
        return end(run.status() == RunStatus::succeeded ? 0 : kExitFailure);
      log::warn("the run is over but not yet published; run the same command again",
                {{"run_id", what_.id}});
      end(kExitTryAgain);
    });
  }

  void on_signal(int signal) {
    shutting_down_ = true;
    timer_.cancel();
    lease_.stop();
    plan_.on_signal(signal);
  }

  void shut_down(int code) {
    if (code != 0) return finish(kExitFailure);
    const Run* run = supervisor_.find(what_.id);
    const bool over = run && is_final(run->status()) && run->status() != RunStatus::interrupted &&
                      !run->lifecycle.release_pending();
    code = !over ? kExitTryAgain : run->status() == RunStatus::succeeded ? 0 : kExitFailure;
    if (plan_.lease_released()) return finish(code);
    lease_.give_up(SteadyClock::now() + settings_.store.git_timeout,
                   [this, code] { finish(code); });
  }

  // Ends the command without a signal: the lease goes first, when it was taken.
  void end(int code) {
    if (ending_) return;
    ending_ = true;
    if (!lease_.expiry()) return finish(code);
    lease_.give_up(SteadyClock::now() + settings_.store.git_timeout,
                   [this, code] { finish(code); });
  }

  void finish(int code) {
    exit_code_ = code;
    supervisor_.begin_shutdown();
    supervisor_.kill_remaining();
    loop_.stop();
  }

  const ResumeSettings& settings_;
  const OneRun& what_;
  const fs::path runs_dir_;
  const LeaseTerms terms_;
  CommandLoop loop_;
  ModelGateway models_{loop_.io(), settings_.models};
  AgentCheckpoints checkpoints_;
  RunSupervisor supervisor_;
  PodLease lease_;
  ShutdownPlan plan_;
  boost::asio::steady_timer timer_;
  RecordWatch watch_;
  TakeOverRaces races_;
  bool first_look_ = true;
  bool waiting_logged_ = false;
  bool shutting_down_ = false;
  bool ending_ = false;
  int exit_code_ = kExitFailure;
};

}  // namespace

int run_one(const ResumeSettings& s, const OneRun& what) {
  s.children.check_programs();
  const auto runs_dir = fs::absolute(s.store.runs_dir).lexically_normal();
  fs::create_directories(runs_dir);
  log_destination(s.store);
  return OneRunCommand(s, what, runs_dir).run();
}

}  // namespace inflight
