// When and how runs reach the checkpoint store: each run's store operations
// one at a time, many runs in one push (a periodic tick, a shutdown), the
// release steps of runs that are over, and the fence when another instance
// owns a run. It knows the store only through CheckpointPort and never
// touches a process: a fenced run is handed back to its owner (the
// supervisor) to stop.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "inflight/core/duration.hpp"
#include "inflight/supervisor/checkpoint_port.hpp"
#include "inflight/supervisor/lifecycle/disk_health.hpp"
#include "inflight/supervisor/lifecycle/pod_lease.hpp"
#include "inflight/supervisor/runs/run.hpp"

namespace inflight {

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

struct SchedulerSettings {
  Duration network_timeout{};
  bool publish = false;  // SupervisorSettings::publish
  // serve: a finished run's release steps ride the periodic pushes, one
  // step a push; otherwise (and at shutdown) a release is sent at once.
  bool release_at_ticks = false;
};

class CheckpointScheduler {
 public:
  // `fenced`: another instance owns the run, which is not over; its owner
  // stops it. `before_tick`: called at each periodic tick, first.
  struct Hooks {
    std::function<void(Run&)> fenced;
    std::function<void()> before_tick;
  };

  CheckpointScheduler(boost::asio::io_context& io, CheckpointPort& port, SchedulerSettings settings,
                      DiskHealth& disk_health, const std::vector<std::unique_ptr<Run>>& runs,
                      Hooks hooks);

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
  // one push that also renews `lease`, when given and while a run is held.
  void start_periodic_checkpoints(Duration interval, PodLease* lease = nullptr);
  // No periodic tick from now on: the shutdown pushes what is left.
  void stop_periodic_checkpoints() { stopped_ = true; }

  // Pushes of run checkpoints, by outcome (docs/metrics.md "Metrics").
  struct Pushes {
    std::uint64_t landed = 0;
    std::uint64_t failed = 0;  // a refusal by the server's rules included
    std::uint64_t fenced = 0;  // lost to another instance
  };
  const Pushes& pushes() const { return pushes_; }
  // Run checkpoints that did not land, by why.
  const std::map<Failure, std::uint64_t>& failures() const { return failures_; }
  std::uint64_t results_published() const { return results_published_; }
  std::uint64_t runs_fenced() const { return runs_fenced_; }  // runs another instance took
  // When a checkpoint of this pod last landed.
  std::optional<SystemClock::time_point> last_landed() const { return last_landed_; }

 private:
  void enqueue(Run& run, std::function<void()> op);
  void op_done(Run& run);
  void record(Run& run, const CheckpointResult& result, std::uint64_t records);
  void record_failure(Run& run, const Error& error);
  void log_left_out(Run& run, const checkpoint::LeftOut& left_out);
  void send_batch(const std::shared_ptr<StoreBatch>& batch);
  bool holds_a_run() const;
  void push_stream(const std::shared_ptr<StoreBatch>& batch);
  void answer_batch(const std::shared_ptr<StoreBatch>& batch, const SaveAllResult& result);
  void add_release_step(StoreBatch& batch, SaveAllRequest& request, Run& run);
  void release_step_done(Run& run, const CheckpointResult& result,
                         const std::optional<CheckpointResult>& index);
  void send_releases();
  void released(Run& run, const CheckpointResult& result);
  void fence(Run& run, const Error& error);
  void periodic_tick();
  void schedule_tick(Duration after);
  void bring_tick_forward();

  CheckpointPort& port_;
  SchedulerSettings settings_;
  DiskHealth& disk_health_;
  const std::vector<std::unique_ptr<Run>>& runs_;
  Hooks hooks_;
  std::map<Failure, std::uint64_t> failures_;
  std::uint64_t results_published_ = 0;
  std::uint64_t runs_fenced_ = 0;
  Pushes pushes_;
  std::optional<SystemClock::time_point> last_landed_;
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
  bool stopped_ = false;
};

}  // namespace inflight
