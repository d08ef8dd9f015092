// See disk_health.hpp.
#include "inflight/supervisor/lifecycle/disk_health.hpp"

#include "inflight/core/log.hpp"

namespace inflight {

DiskHealth::DiskHealth(boost::asio::io_context& io, CheckpointPort& checkpoints, Duration recheck,
                       Duration timeout)
    : checkpoints_(checkpoints), recheck_(recheck), timeout_(timeout), timer_(io) {}

void DiskHealth::report(const CheckpointResult& result) {
  if (result.failed_with(Failure::cache)) return report_failure(result.error().message);
  if (!result || !problem_ || awaits_restore_) return;
  log::info("this disk can checkpoint again; ready", {});
  problem_.reset();
  timer_.cancel();
}

void DiskHealth::report_restore(const RestoreResult& result) {
  if (result.disk_failure) {
    report_failure("restore a run: " + *result.disk_failure);
    awaits_restore_ = true;
    return;
  }
  if (!awaits_restore_ || result.failure) return;
  // The look wrote its copies, or had none left to write here: a check says the rest.
  awaits_restore_ = false;
  schedule_check();
}

void DiskHealth::report_failure(const std::string& error) {
  if (!problem_)
    log::error("this disk cannot hold a checkpoint; not ready until it can", {{"error", error}});
  problem_ = error;
  schedule_check();
}

void DiskHealth::stop() {
  stopped_ = true;
  timer_.cancel();
}

void DiskHealth::schedule_check() {
  if (checking_ || stopped_) return;
  checking_ = true;
  timer_.expires_after(recheck_);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopped_ || !problem_ || awaits_restore_) {
      checking_ = false;
      return;
    }
    checkpoints_.check(SteadyClock::now() + timeout_, [this](CheckpointResult result) {
      checking_ = false;
      // Whatever stops the check, this disk is not known to be able to hold a checkpoint.
      if (!result) return report_failure(result.error().message);
      report(result);
    });
  });
}

}  // namespace inflight
