// Runs on this instance: admission and the queue, what follows each
// attempt, and the shutdown's first step. Its parts each do one thing: the
// AttemptRunner starts and stops children, the CheckpointScheduler takes
// runs to the store, RunLifecycle holds each run's state. All of it happens
// on one io_context; nothing here blocks.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "inflight/core/child_templates.hpp"
#include "inflight/core/duration.hpp"
#include "inflight/core/fd.hpp"
#include "inflight/supervisor/checkpoint_port.hpp"
#include "inflight/supervisor/lifecycle/disk_health.hpp"
#include "inflight/supervisor/lifecycle/pod_lease.hpp"
#include "inflight/supervisor/process/child_reaper.hpp"
#include "inflight/supervisor/runs/attempt_runner.hpp"
#include "inflight/supervisor/runs/checkpoint_scheduler.hpp"
#include "inflight/supervisor/runs/published_runs.hpp"
#include "inflight/supervisor/runs/run.hpp"

namespace inflight {

// Set from ServeSettings or ResumeSettings: the options table holds the
// defaults.
struct SupervisorSettings {
  std::filesystem::path runs_dir;
  std::string pod_name;
  int max_concurrent{};
  int max_attempts{};       // docs/serve.md "The two budgets"
  int max_interruptions{};  // docs/serve.md "The two budgets"
  int max_queued{};
  Duration stop_grace{};  // between the stop signal and SIGKILL when a run is stopped
  Duration network_timeout{};
  Duration disk_recheck{5000};  // between checks of a disk that could not checkpoint
  bool echo_output = false;     // also copy children's output to stdout
  Containment containment;      // how every process of an attempt ends with it
  std::vector<std::filesystem::path> hidden_files;  // ResumeSettings::hidden_files
  ModelGateway* models = nullptr;  // the command's model gateway; none without models
  // Finished runs are published (--publish): a run out of attempts is too,
  // and its result keeps it for inspection; unpublished, its branch does.
  bool publish = false;
  // How long a finished run stays in the API and on disk (--keep-finished).
  Duration keep_finished{std::chrono::hours(24)};
  // serve: a finished run's release steps ride the periodic pushes, one
  // step a push; otherwise (and at shutdown) a release is sent at once.
  bool release_at_ticks = false;
};

enum class Phase { restoring, ready, shutting_down };

struct SubmitResult {
  int http_status = 202;
  Run* run = nullptr;
  std::string error_code;  // set when refused
  std::string message;
  // Set instead of an answer: the run id must be looked up in the store first (look_up()),
  // then the same body submitted again with `looked_up`.
  std::optional<std::string> look_up = std::nullopt;
};

class RunSupervisor {
 public:
  RunSupervisor(boost::asio::io_context& io, ChildReaper& reaper, CheckpointPort& checkpoints,
                SupervisorSettings settings, const ChildTemplates& templates);

  SubmitResult submit(const OrderedJson& body, bool looked_up = false);
  // Asks the store whether run `id` is published, for a submit (SubmitResult::look_up); `done`
  // gets why it could not tell, or nullopt.
  void look_up(const std::string& id, std::function<void(std::optional<Error>)> done);
  Run* find(const std::string& id);
  const std::vector<std::unique_ptr<Run>>& runs() const { return runs_; }
  void stop(Run& run);

  // A run found on disk or in the store, to be resumed once restore is done.
  // `claim` is the commit that claimed the run's branch, if any. A run that
  // the configured templates refuse is held: shown, never started.
  void adopt(checkpoint::RunParams params, std::filesystem::path dir, std::string branch,
             const std::string& claim);
  // A run the store judged this instance cannot run; its branch is not ours.
  void hold(checkpoint::RunParams params, std::string branch, const std::string& reason);
  // A run that finished in an earlier life of this runs dir: shown by the
  // API, never started, until --keep-finished after its end; past that its
  // dir is removed (its result is in the results repo), unless
  // `store_answered` is false: then only the next life, or a periodic tick,
  // may remove it.
  void show_finished(checkpoint::RunParams params, bool store_answered);
  // The run ids with a result ref or an entry, as the last restore that reached the store
  // listed them: a submit of one starts nothing (docs/results.md). `partial`: the others may be
  // published too, and are looked up (published_runs.hpp).
  void know_published(std::vector<checkpoint::PublishedRun> runs, bool partial);
  void finish_restore();

  Phase phase() const { return phase_; }
  DiskHealth& disk_health() { return disk_health_; }
  CheckpointScheduler& checkpoints() { return scheduler_; }
  const CheckpointScheduler& checkpoints() const { return scheduler_; }
  // Shutdown: refuses new runs, keeps queued ones unstarted, sends every
  // child's group its template's stop signal.
  void begin_shutdown();
  void kill_remaining();
  int live_children() const;
  // Called after every child exit, with its run (the shutdown plan listens here).
  void on_child_exit(std::function<void(Run&)> listener) { exit_listener_ = std::move(listener); }

  const std::map<Outcome, std::uint64_t>& attempts_by_outcome() const { return outcomes_; }
  // What happened to runs, for /metrics (docs/metrics.md "Metrics").
  struct RunEvents {
    std::uint64_t restored = 0;                  // runs taken from the results repo or this disk
    std::uint64_t claims_lost = 0;               // claims another instance won
    std::uint64_t packs_indexed_by_libgit2 = 0;  // of restores, not by our indexer
    std::map<Budget, std::uint64_t> out_of_budget;
  };
  const RunEvents& run_events() const { return run_events_; }
  void count_lost_claims(std::size_t claims) { run_events_.claims_lost += claims; }
  void count_libgit2_indexed(std::size_t packs) { run_events_.packs_indexed_by_libgit2 += packs; }
  const SupervisorSettings& settings() const { return settings_; }

 private:
  Run& add_run(std::string id, checkpoint::RunParams params, RunState initial = RunState::queued);
  std::optional<SubmitResult> admission_refusal() const;
  std::optional<SubmitResult> published_answer(const std::string& id);
  SubmitResult accept(const std::string& id, OrderedJson request, const ChildTemplate& child);
  checkpoint::RunParams first_params(const std::string& id, OrderedJson request,
                                     const ChildTemplate& child,
                                     const std::filesystem::path& dir) const;
  bool bind_template(Run& run);
  void mark_held(Run& run, const std::string& reason);
  void remove_expired_runs();
  void start_queued();
  void start_attempt(Run& run);
  void on_fenced(Run& run);
  void on_attempt_end(Run& run, Outcome outcome);
  void settle(Run& run, Outcome outcome);
  void retry(Run& run, Outcome outcome);
  void defer(Run& run);
  void finish(Run& run);
  std::optional<Budget> exhausted_budget(const Run& run) const;
  void fail_out_of_budget(Run& run, Budget budget);

  boost::asio::io_context& io_;
  SupervisorSettings settings_;
  const ChildTemplates& templates_;
  Phase phase_ = Phase::restoring;
  std::vector<std::unique_ptr<Run>> runs_;
  std::deque<Run*> queue_;
  PublishedRuns published_;
  std::map<Outcome, std::uint64_t> outcomes_;
  RunEvents run_events_;
  std::function<void(Run&)> exit_listener_;
  DiskHealth disk_health_;
  AttemptRunner attempts_;
  CheckpointScheduler scheduler_;
};

}  // namespace inflight
