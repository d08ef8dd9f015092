// Whether this instance's disk can hold a checkpoint: its cache repo opens
// and takes a write. A store operation that failed on the disk makes the
// instance not ready (/readyz 503, submits refused) until a check passes:
// runs accepted there could never be checkpointed. Checks run on a timer
// while the problem lasts, so readiness returns on its own. A branch copy a
// restore could not write waits for a later restore that writes its copies
// (or has none left to write here) before a check may clear it: a check's
// small write passes on a disk with room for it but not for the copy, and the
// next look would fail again, so that readiness would flap.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <optional>
#include <string>

#include "inflight/core/duration.hpp"
#include "inflight/supervisor/checkpoint_port.hpp"

namespace inflight {

class DiskHealth {
 public:
  DiskHealth(boost::asio::io_context& io, CheckpointPort& checkpoints, Duration recheck,
             Duration timeout);

  // Every store operation's outcome: a disk failure sets the problem, a
  // landed operation clears it.
  void report(const CheckpointResult& result);
  void report_failure(const std::string& error);
  // Every restore's outcome: a branch copy this disk could not write sets
  // the problem, which no check clears until a restore that reached the
  // store wrote no copy it could not.
  void report_restore(const RestoreResult& result);
  // Why this disk cannot checkpoint, while it cannot.
  const std::optional<std::string>& problem() const { return problem_; }
  // No more checks (shutdown).
  void stop();

 private:
  void schedule_check();

  CheckpointPort& checkpoints_;
  Duration recheck_;
  Duration timeout_;
  std::optional<std::string> problem_;
  bool checking_ = false;
  bool awaits_restore_ = false;  // the problem is a branch copy's
  bool stopped_ = false;
  boost::asio::steady_timer timer_;
};

}  // namespace inflight
