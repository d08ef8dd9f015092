// Serve's restore (docs/checkpoints.md "Restore on start"). The first look at the store, before
// serve is ready, takes this pod's lease and claims every run it may. Then it looks again every
// lease period (sooner when a watched record's term ends first) and takes the runs whose owner
// handed them over (a scale-down) or died. A shutdown signal lets a look under way finish (the plan
// waits), so the runs it claims are pushed back before exit rather than stranded.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <string>

#include "inflight/supervisor/checkpoint_port.hpp"
#include "inflight/supervisor/config/settings.hpp"
#include "inflight/supervisor/lifecycle/pod_lease.hpp"
#include "inflight/supervisor/lifecycle/record_watch.hpp"
#include "inflight/supervisor/lifecycle/shutdown_plan.hpp"
#include "inflight/supervisor/runs/run_supervisor.hpp"

namespace inflight {

class Restoration {
 public:
  Restoration(boost::asio::io_context& io, RunSupervisor& supervisor, CheckpointPort& store,
              ShutdownPlan& plan, PodLease& lease, const ServeSettings& settings,
              std::function<void(const std::string&)> on_refused);

  void start() { look(true); }

 private:
  void look(bool first);
  void on_result(RestoreResult result, bool first);
  void look_again_later();

  RunSupervisor& supervisor_;
  CheckpointPort& store_;
  ShutdownPlan& plan_;
  PodLease& lease_;
  const ServeSettings& settings_;
  Duration period_;
  std::function<void(const std::string&)> on_refused_;
  boost::asio::steady_timer timer_;
  RecordWatch watch_;
};

}  // namespace inflight
