// SIGTERM or SIGINT to serve (docs/serve.md "Shutdown"): refuse new runs, SIGTERM every
// group, wait for the children or the flush window, SIGKILL the rest, checkpoint every interrupted
// run within the grace period, then report the exit code. The last push also releases the pod's
// lease when it can (see checkpoint_batch).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "inflight/core/duration.hpp"
#include "inflight/supervisor/checkpoint_port.hpp"
#include "inflight/supervisor/lifecycle/pod_lease.hpp"
#include "inflight/supervisor/runs/run_supervisor.hpp"

namespace inflight {

class ShutdownPlan {
 public:
  // `lease` is none for a command that holds no lease (`inflight resume`).
  ShutdownPlan(boost::asio::io_context& io, RunSupervisor& supervisor, PodLease* lease,
               Duration grace_period, Duration flush_window, std::function<void(int)> done);

  // The first signal starts the shutdown; a second skips what is left of the flush window.
  void on_signal(int signal);
  // Restore is under way: checkpoints wait for it, so that the runs it claims
  // are pushed back before exit instead of stranded under a fresh claim.
  void restore_started() { restored_ = false; }
  void restore_finished();
  // Whether the last push released the lease: no separate step needed.
  bool lease_released() const { return lease_released_; }
  // Whether some run's last state may be on this disk alone (its push did
  // not land, or the grace period ended first): the lease is then kept, so
  // that a restart here finds that run still its own. A finished run whose
  // final state landed and only its deletion failed keeps nothing back.
  bool keeps_lease() const { return keeps_lease_; }

 private:
  enum class Stage { idle, flushing, killing, awaiting_restore, checkpointing, done };

  void begin();
  void on_child_exit(Run& run);
  bool stopping() const;
  void stream_after_calls(Run& run);
  void checkpoint_after_calls();
  void end_flush();
  void checkpoint_all();
  bool stream(Run& run);
  void close_stream(bool last, std::function<void()> then);
  void checkpoint_batch(const std::vector<Run*>& runs, bool last, std::function<void()> then);
  StoreStep shutdown_step(std::optional<SystemClock::time_point> release,
                          std::function<void()> then);
  std::optional<SystemClock::time_point> lease_release(const std::vector<Run*>& deleting) const;
  void on_checkpointed(Run& run, const CheckpointResult& result);
  bool rounds_release(const Run& run) const;
  void release_rounds();
  std::vector<std::vector<Run*>> release_groups() const;
  void release_round(int round);
  void push_round(const std::vector<Run*>& runs, int round,
                  const std::shared_ptr<std::size_t>& left);
  void rounds_over(const std::vector<std::vector<Run*>>& left);
  void release_then_report(Run& run);
  void on_released(Run& run);
  void finish_when_idle();
  void finish(int exit_code);

  RunSupervisor& supervisor_;
  PodLease* lease_;
  Duration grace_period_;
  Duration flush_window_;
  std::function<void(int)> done_;
  Stage stage_ = Stage::idle;
  SteadyClock::time_point started_;
  SteadyClock::time_point deadline_;
  boost::asio::steady_timer flush_timer_;
  boost::asio::steady_timer grace_timer_;
  int in_flight_ = 0;
  bool all_landed_ = true;
  bool restored_ = true;
  bool lease_released_ = false;
  bool keeps_lease_ = false;
  bool releasing_ = false;                        // a release round is under way
  bool again_ = false;                            // … and runs finished since it began
  CheckpointScheduler::CheckpointStream stream_;  // the runs that had started
  std::set<std::string> streamed_;                // their ids, once added
  std::function<void()> after_stream_;
};

}  // namespace inflight
