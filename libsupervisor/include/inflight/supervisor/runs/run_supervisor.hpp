// Runs and their children: submit, queue, start attempts, classify exits,
// stop. All of it happens on one io_context; nothing here blocks.
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
#include "inflight/supervisor/lifecycle/disk_health.hpp"
#include "inflight/supervisor/lifecycle/pod_lease.hpp"
#include "inflight/supervisor/process/child_reaper.hpp"
#include "inflight/supervisor/runs/run.hpp"
#include "inflight/supervisor/store/checkpoint_port.hpp"

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

// How soon a finished run's next release step is pushed when the periodic
// interval is longer (docs/results.md).
inline constexpr Duration kReleaseWindow = std::chrono::seconds(2);

// One store step for many runs (checkpoint_together).
struct StoreStep {
  checkpoint::CheckpointReason reason;
  SteadyClock::time_point deadline;
  std::optional<SystemClock::time_point> lease_until;       // renewed in the same push
  bool release_lease = false;                               // … or released (SaveAllRequest)
  bool keep_objects = true;                                 // SaveAllRequest
  std::function<void(Run&, const CheckpointResult&)> each;  // every run's result
  std::function<void(const std::optional<CheckpointResult>& lease)> done;  // once, at the end
};

struct SubmitResult {
  int http_status = 202;
  Run* run = nullptr;
  std::string error_code;  // set when refused
  std::string message;
};

class RunSupervisor {
 public:
  RunSupervisor(boost::asio::io_context& io, ChildReaper& reaper, CheckpointPort& checkpoints,
                SupervisorSettings settings, const ChildTemplates& templates);

  SubmitResult submit(const OrderedJson& body);
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
  // The run ids with a result ref, as the last restore that reached the
  // store listed them: a submit of one starts nothing (docs/results.md).
  void know_published(std::vector<checkpoint::PublishedRun> runs);
  // Removes the dirs of finished runs whose --keep-finished is over, once
  // nothing of theirs waits for the store.
  void remove_expired_runs();
  void finish_restore();

  Phase phase() const { return phase_; }
  DiskHealth& disk_health() { return disk_health_; }
  // Shutdown: refuses new runs, keeps queued ones unstarted, sends every
  // child's group its template's stop signal.
  void begin_shutdown();
  void kill_remaining();
  int live_children() const;
  // Called after every child exit, with its run (the shutdown plan listens here).
  void on_child_exit(std::function<void(Run&)> listener) { exit_listener_ = std::move(listener); }

  // Checkpoints the run through the store, after any store operation of the
  // run still under way.
  void checkpoint(Run& run, checkpoint::CheckpointReason reason, SteadyClock::time_point deadline,
                  std::function<void(const CheckpointResult&)> done);
  // Checkpoints every run in one store step, each after any store operation
  // of its own still under way.
  void checkpoint_together(const std::vector<Run*>& runs, StoreStep step);
  // checkpoint_together() of runs added one at a time (a shutdown's, each as
  // its child exits): the store connects when the stream opens and takes
  // each run's snapshot when its turn comes; close_stream() pushes them all
  // with the lease step it is given (StoreStep::lease_until, release_lease).
  struct StoreBatch;
  using CheckpointStream = std::shared_ptr<StoreBatch>;
  CheckpointStream open_checkpoint_stream(StoreStep step);
  void add_to_stream(const CheckpointStream& stream, Run& run);
  void close_stream(const CheckpointStream& stream,
                    std::optional<SystemClock::time_point> lease_until, bool release_lease);
  // Calls `done` once the store operations queued for the run so far are over.
  void when_store_idle(Run& run, std::function<void()> done);
  // Pushes the finished run's final state and deletes its branch (again, after
  // a failure), after any store operation of the run still under way.
  void release_checkpoint(Run& run);
  // Every `interval`, checkpoints the running runs whose files changed, in
  // one push that also renews `lease`, when given.
  void start_periodic_checkpoints(Duration interval, PodLease* lease = nullptr);

  const std::map<Outcome, std::uint64_t>& attempts_by_outcome() const { return outcomes_; }
  // Run checkpoints that did not land, by why.
  // Pushes of run checkpoints, by outcome (docs/metrics.md "Metrics").
  struct CheckpointPushes {
    std::uint64_t landed = 0;
    std::uint64_t failed = 0;  // a refusal by the server's rules included
    std::uint64_t fenced = 0;  // lost to another instance
  };
  const CheckpointPushes& checkpoint_pushes() const { return checkpoint_pushes_; }
  // Finished runs whose release published their result.
  std::uint64_t results_published() const { return results_published_; }
  // What happened to runs, for /metrics (docs/metrics.md "Metrics").
  struct RunEvents {
    std::uint64_t restored = 0;     // runs taken from the results repo or this disk
    std::uint64_t claims_lost = 0;  // claims another instance won
    std::uint64_t fenced = 0;       // runs another instance took from this one
    std::map<Budget, std::uint64_t> out_of_budget;
  };
  const RunEvents& run_events() const { return run_events_; }
  void count_lost_claims(std::size_t claims) { run_events_.claims_lost += claims; }
  // When a checkpoint of this pod last landed.
  std::optional<SystemClock::time_point> last_landed() const { return last_landed_; }
  const std::map<Failure, std::uint64_t>& checkpoint_failures() const {
    return checkpoint_failures_;
  }
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
  void start_queued();
  void start_attempt(Run& run);
  void stop_child(Run& run, RunEvent stop);
  ContainedChild spawn_attempt(Run& run, const RenderContext& context, Fd console);
  void not_started(Run& run, const std::error_code& error);
  void on_exit(Run& run, int wait_status);
  void retry(Run& run, Outcome outcome);
  void settle(Run& run, Outcome outcome);
  void defer(Run& run);
  void finish(Run& run);
  std::optional<Budget> exhausted_budget(const Run& run) const;
  void fail_out_of_budget(Run& run, Budget budget);
  void write_params(Run& run, checkpoint::Durability durability = checkpoint::Durability::synced);
  std::vector<std::string> child_environment(const ChildTemplate& child,
                                             const RenderContext& context) const;
  void enqueue_store_op(Run& run, std::function<void()> op);
  void start_store_op(Run& run);
  void store_op_done(Run& run);
  void record_checkpoint(Run& run, const CheckpointResult& result, std::uint64_t records);
  void record_checkpoint_failure(Run& run, const Error& error);
  void log_left_out(Run& run, const checkpoint::LeftOut& left_out);
  void send_batch(const std::shared_ptr<StoreBatch>& batch);
  void push_stream(const std::shared_ptr<StoreBatch>& batch);
  void answer_batch(const std::shared_ptr<StoreBatch>& batch, const SaveAllResult& result);
  void add_release_step(StoreBatch& batch, SaveAllRequest& request, Run& run);
  void release_step_done(Run& run, const CheckpointResult& result,
                         const std::optional<CheckpointResult>& index);
  void send_releases();
  void released(Run& run, const CheckpointResult& result);
  void fence(Run& run, const Error& error);
  static void back_off(CheckpointState& state);
  static bool saves_final_alone(const Run& run);
  void periodic_tick(PodLease* lease);
  void schedule_tick(Duration after);
  void bring_tick_forward();

  boost::asio::io_context& io_;
  ChildReaper& reaper_;
  CheckpointPort& checkpoints_;
  SupervisorSettings settings_;
  const ChildTemplates& templates_;
  Phase phase_ = Phase::restoring;
  std::vector<std::unique_ptr<Run>> runs_;
  std::deque<Run*> queue_;
  std::map<std::string, std::optional<checkpoint::IndexEntry>> published_;
  std::map<Outcome, std::uint64_t> outcomes_;
  std::map<Failure, std::uint64_t> checkpoint_failures_;
  std::uint64_t results_published_ = 0;
  CheckpointPushes checkpoint_pushes_;
  RunEvents run_events_;
  std::optional<SystemClock::time_point> last_landed_;
  std::function<void(Run&)> exit_listener_;
  // The releases of finished runs, one batch at a time: each updates the
  // one index branch, and a pod's releases racing each other for it would
  // only lose to each other. The runs that finish while one is on its way go
  // together in the next (docs/results.md).
  std::vector<Run*> releases_waiting_;
  bool release_sent_ = false;
  boost::asio::steady_timer periodic_timer_;
  Duration periodic_interval_{};
  PodLease* periodic_lease_ = nullptr;
  std::uint64_t tick_generation_ = 0;
  DiskHealth disk_health_;
};

}  // namespace inflight
