// `inflight resume`: serve's restore, attempt and shutdown machinery for one
// run in the foreground.
#include "inflight/supervisor/lifecycle/resume.hpp"

#include <optional>

#include "inflight/core/bounded_json.hpp"
#include "inflight/core/branch_name.hpp"
#include "inflight/core/exit_code.hpp"
#include "inflight/core/log.hpp"
#include "inflight/supervisor/agent_client/agent_checkpoints.hpp"
#include "inflight/supervisor/lifecycle/command_loop.hpp"
#include "inflight/supervisor/lifecycle/shutdown_plan.hpp"
#include "inflight/supervisor/runs/local_runs.hpp"

namespace inflight {

namespace fs = std::filesystem;

namespace {

// The run or branch `target` names (parse_run_target), or a usage error.
checkpoint::BranchName target_of(const std::string& target) {
  if (auto name = checkpoint::parse_run_target(target)) return *name;
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

// One `inflight resume`: the restore of the run the target names, then its
// attempts in the foreground until the child exits or a signal's shutdown
// ends. Every step ends the command through finish().
class ResumeCommand {
 public:
  ResumeCommand(const ResumeSettings& s, const checkpoint::BranchName& name,
                const std::string& target, ResumeFlags flags, const fs::path& runs_dir)
      : settings_(s),
        name_(name),
        target_(target),
        flags_(flags),
        races_(flags.take_over),
        runs_dir_(runs_dir),
        checkpoints_(loop_.io(), loop_.reaper(), s.store, runs_dir, s.children) {
    // Before any work: a command that runs a child must be able to contain it.
    if (!flags.restore_only) containment_ = choose_containment(s.containment);
  }

  int run() {
    restore();
    loop_.on_signal([this](int signal) { on_signal(signal); });
    loop_.run();
    return exit_code_;
  }

 private:
  void restore() {
    checkpoints_.restore({.local = local_run(runs_dir_, name_),
                          .only = target_,
                          .skip = {},
                          .lease_until = std::nullopt,
                          .take_over = flags_.take_over},
                         SteadyClock::now() + settings_.store.git_timeout,
                         [this](RestoreResult result) { restored(std::move(result)); });
  }

  void restored(RestoreResult result) {
    if (races_.claim_again(result, name_.run_id)) return restore();
    if (const auto code = refusal(result)) return finish(*code);
    if (!flags_.restore_only) return start(std::move(result.runs.front()));
    prepare_for_resume(result.runs.front(), settings_.children, settings_.store.pod_name);
    log::info("restored; the branch is kept",
              {{"run_id", name_.run_id}, {"dir", result.runs.front().dir.string()}});
    finish(0);
  }

  const checkpoint::PublishedRun* published_run(const RestoreResult& result) const {
    if (!result.published) return nullptr;
    for (const auto& run : *result.published)
      if (run.run_id == name_.run_id) return &run;
    return nullptr;
  }

  // The exit code of a restore that gave this command nothing to run, once
  // logged; nullopt when it gave the run.
  std::optional<int> refusal(const RestoreResult& result) const {
    const auto& run_id = name_.run_id;
    if (result.failure && result.failure->kind == Failure::auth) {
      log::error("the results repo refused our credentials", {{"error", result.failure->message}});
      return kExitUnreachable;
    }
    if (const auto* published = published_run(result)) {
      log::info("the run is finished and published; nothing to resume",
                {{"run_id", run_id},
                 {"result", checkpoint::result_ref(run_id)},
                 {"final_status", published->entry ? OrderedJson(published->entry->final_status)
                                                   : OrderedJson(nullptr)}});
      return kExitSuccess;
    }
    if (!result.ambiguous.empty()) {
      log::error("several pods hold a run of this id; name one branch",
                 {{"run_id", run_id}, {"branches", result.ambiguous}});
      return kExitUsage;
    }
    if (!result.held.empty()) {
      log::error("this instance cannot run the run; its checkpoint is kept",
                 {{"run_id", run_id}, {"reason", result.held.front().reason}});
      return kExitUsage;
    }
    if (result.claims_lost > 0) {
      log::error("another instance claimed this run first; left to it", {{"run_id", run_id}});
      return kExitFailure;
    }
    if (!result.left.empty() && !result.left.front().pod.empty()) {
      log::error(
          "another instance's lease or claim holds this run; left to it (--take-over takes it "
          "once that pod is gone)",
          {{"run_id", run_id},
           {"pod", result.left.front().pod},
           {"lease_says_until", iso8601_utc(SystemClock::from_time_t(result.left.front().until))}});
      return kExitFailure;
    }
    if (!result.runs.empty()) return std::nullopt;
    log::error(
        "no checkpoint and no resumable run dir for this run; try `inflight checkpoints list`",
        {{"run_id", run_id}, {"runs_dir", runs_dir_.string()}});
    return result.failure ? kExitUnreachable : kExitNotFound;
  }

  void start(RestoredRun restored) {
    supervisor_.emplace(loop_.io(), loop_.reaper(), checkpoints_,
                        foreground_supervision(settings_, runs_dir_, *containment_, models_),
                        settings_.children);
    if (adopt_restored(*supervisor_, settings_.children, {std::move(restored)}) == 0)
      return finish(kExitFailure);
    Run& run = *supervisor_->find(name_.run_id);
    if (run.lifecycle.held()) return finish(kExitUsage);
    if (runs_another_program(run)) return finish(kExitUsage);
    if (is_final(run.status())) return finish(kExitFailure);  // out of attempts
    supervise(run);
  }

  // A run `inflight run -- PROGRAM` started is never handed to the demo that
  // stands in when the config has no template: its command is the
  // operator's to give again. The program's name is compared, not the
  // template's digest, which covers the demo's path on each install.
  bool runs_another_program(const Run& run) const {
    if (!settings_.children.built_in_only() || run.params.argv.empty()) return false;
    const auto demo = fs::path(run.child->programs().front()).filename();
    if (fs::path(run.params.argv.front()).filename() == demo) return false;
    log::error(
        "the run was started with another command; run the same `inflight run ... -- "
        "PROGRAM` command again, or resume with a --config holding its template",
        {{"run_id", run.id}, {"program", printable(run.params.argv.front())}});
    return true;
  }

  // The run's attempts until its child exits for good; a signal from here on
  // is the shutdown plan's.
  void supervise(Run& run) {
    plan_.emplace(loop_.io(), *supervisor_, nullptr, settings_.grace_period, settings_.flush_window,
                  [this, &run](int code) { finish(code == 0 ? child_exit_code(run) : code); });
    supervisor_->on_child_exit([this, &run](Run&) {
      if (run.status() == RunStatus::queued) return;  // a crash being retried
      supervisor_->checkpoints().when_store_idle(run,
                                                 [this, &run] { finish(child_exit_code(run)); });
    });
    supervisor_->finish_restore();
    supervisor_->checkpoints().start_periodic_checkpoints(settings_.checkpoint_interval);
  }

  void on_signal(int signal) {
    if (!plan_) return finish(128 + signal);  // nothing started yet
    plan_->on_signal(signal);
  }

  void finish(int code) {
    exit_code_ = code;
    loop_.stop();
  }

  const ResumeSettings& settings_;
  const checkpoint::BranchName name_;
  const std::string target_;
  const ResumeFlags flags_;
  TakeOverRaces races_;
  const fs::path runs_dir_;
  CommandLoop loop_;
  AgentCheckpoints checkpoints_;
  std::optional<Containment> containment_;  // unset with --restore-only
  ModelGateway models_{loop_.io(), settings_.models};
  std::optional<RunSupervisor> supervisor_;
  std::optional<ShutdownPlan> plan_;
  int exit_code_ = kExitFailure;
};

}  // namespace

bool TakeOverRaces::claim_again(const RestoreResult& result, const std::string& run_id) {
  if (!take_over_ || result.claims_lost == 0 || result.failure || gave_up()) return false;
  if (++lost_ > kMaxRaces) {
    log::error("the take-over lost every race with the holder's checkpoints; racing no more",
               {{"run_id", run_id}, {"races", kMaxRaces}});
    return false;
  }
  log::info("the take-over lost a race with the holder's checkpoint; claiming its new tip",
            {{"run_id", run_id}});
  return true;
}

SupervisorSettings foreground_supervision(const ResumeSettings& s, const fs::path& runs_dir,
                                          Containment containment, ModelGateway& models) {
  return {.runs_dir = runs_dir,
          .pod_name = s.store.pod_name,
          .max_concurrent = 1,
          .max_attempts = s.store.max_attempts,
          .max_interruptions = s.store.max_interruptions,
          .max_queued = 1,
          .stop_grace = s.flush_window,
          .network_timeout = s.store.git_timeout,
          .echo_output = true,
          .containment = containment,
          .hidden_files = s.hidden_files,
          .models = &models,
          .publish = s.store.publish};
}

int resume(const ResumeSettings& s, const std::string& target, ResumeFlags flags) {
  const auto name = target_of(target);
  s.children.check_programs();
  const auto runs_dir = fs::absolute(s.store.runs_dir).lexically_normal();
  fs::create_directories(runs_dir);
  return ResumeCommand(s, name, target, flags, runs_dir).run();
}

}  // namespace inflight
