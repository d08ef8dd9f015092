// SIGTERM or SIGINT to serve (SPEC §8): refuse new runs, SIGTERM every group,
// wait for the children or the flush window, SIGKILL the rest, checkpoint every
// interrupted run within the grace period, then report the exit code.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <vector>

#include "inflight/supervisor/checkpoint_port.hpp"
#include "inflight/supervisor/duration.hpp"
#include "inflight/supervisor/run_supervisor.hpp"

namespace inflight {

class ShutdownPlan {
 public:
  ShutdownPlan(boost::asio::io_context& io, RunSupervisor& supervisor, Duration grace_period,
               Duration flush_window, std::function<void(int)> done);

  // The first signal starts the shutdown; a second skips what is left of the flush window.
  void on_signal(int signal);
  // Restore is under way: checkpoints wait for it, so that the runs it claims
  // are pushed back before exit instead of stranded under a fresh claim.
  void restore_started() { restored_ = false; }
  void restore_finished();

 private:
  enum class Stage { idle, flushing, killing, awaiting_restore, checkpointing, done };

  void begin();
  void on_child_exit();
  void end_flush();
  void checkpoint_all();
  void checkpoint_batch(const std::vector<Run*>& runs, std::function<void()> then);
  void on_checkpointed(Run& run, const CheckpointResult& result);
  void on_released(Run& run);
  void finish_when_idle();
  void finish(int exit_code);

  RunSupervisor& supervisor_;
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
};

}  // namespace inflight
