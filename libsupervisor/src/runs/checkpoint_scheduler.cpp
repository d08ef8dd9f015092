// See checkpoint_scheduler.hpp. This file: each run's queue of store
// operations, its checkpoints and their bookkeeping, the fence, and the
// periodic tick; store_batches.cpp: many runs in one push, and releases.
#include "inflight/supervisor/runs/checkpoint_scheduler.hpp"

#include <algorithm>

#include "inflight/core/log.hpp"
#include "inflight/core/run_dir.hpp"
#include "runs/store_requests.hpp"

namespace inflight {

CheckpointScheduler::CheckpointScheduler(boost::asio::io_context& io, CheckpointPort& port,
                                         SchedulerSettings settings, DiskHealth& disk_health,
                                         const std::vector<std::unique_ptr<Run>>& runs, Hooks hooks)
    : port_(port),
      settings_(settings),
      disk_health_(disk_health),
      runs_(runs),
      hooks_(std::move(hooks)),
      periodic_timer_(io) {}

namespace {

// The op runs from a local: it may end itself (op_done) and start the next
// one before it returns, which pops its slot in the queue.
void start_front(Run& run) {
  const auto op = std::move(run.store_ops.front());
  op();
}

}  // namespace

void CheckpointScheduler::enqueue(Run& run, std::function<void()> op) {
  run.store_ops.push_back(std::move(op));
  if (run.store_ops.size() == 1) start_front(run);
}

void CheckpointScheduler::op_done(Run& run) {
  run.store_ops.pop_front();
  if (!run.store_ops.empty()) start_front(run);
}

void CheckpointScheduler::checkpoint(Run& run, checkpoint::CheckpointReason reason,
                                     SteadyClock::time_point deadline,
                                     std::function<void(const CheckpointResult&)> done) {
  enqueue(run, [this, &run, reason, deadline, done = std::move(done)] {
    if (run.lifecycle.fenced()) {
      done(fenced_result());
      return op_done(run);
    }
    auto request = checkpoint_request(run, reason);
    const auto records = request.records;
    port_.save(std::move(request), deadline, [this, &run, done, records](CheckpointResult result) {
      record(run, result, records);
      done(result);
      op_done(run);
    });
  });
}

void CheckpointScheduler::when_store_idle(Run& run, std::function<void()> done) {
  enqueue(run, [this, &run, done = std::move(done)] {
    op_done(run);
    done();
  });
}

// `records`: what the run's progress file held when the checkpoint was taken.
void CheckpointScheduler::record(Run& run, const CheckpointResult& result, std::uint64_t records) {
  disk_health_.report(result);
  if (!result) return record_failure(run, result.error());
  run.checkpoint.failing_since.reset();
  run.checkpoint.error.reset();
  run.checkpoint.refusals = 0;
  log_left_out(run, result->left_out);
  // Saved as of the snapshot; a later change is seen by the next tick.
  run.checkpoint.records_saved = records;
  run.checkpoint.unsaved_since.reset();
  if (!result->commit) return;
  ++pushes_.landed;
  last_landed_ = SystemClock::now();
  run.checkpoint.last_commit = result->commit;
  run.checkpoint.last_at = iso8601_utc(*last_landed_);
  log::info("checkpoint pushed",
            {{"run_id", run.id}, {"branch", run.checkpoint.branch}, {"commit", *result->commit}});
}

// Shown in the run's status and counted for /metrics until a checkpoint lands.
void CheckpointScheduler::record_failure(Run& run, const Error& error) {
  ++failures_[error.kind];
  ++(error.kind == Failure::rejected ? pushes_.fenced : pushes_.failed);
  run.checkpoint.error = error.message;
  if (!run.checkpoint.failing_since) run.checkpoint.failing_since = iso8601_utc(SystemClock::now());
  if (error.kind == Failure::rejected) return fence(run, error);
  if (error.kind == Failure::refused) back_off(run.checkpoint);
  const nlohmann::json fields{
      {"run_id", run.id}, {"reason", to_string(error.kind)}, {"error", error.message}};
  // No retry mends a run dir over the limits: only the child or an operator can.
  if (error.kind == Failure::over_limit)
    log::error("checkpoint refused: the run dir is over the restore limits", fields);
  else if (error.kind == Failure::refused)
    log::error(
        "checkpoint refused by the results repo's rules (a hook, a permission, a quota); "
        "the run goes on, its push is tried again",
        fields);
  else
    log::warn("checkpoint not pushed", fields);
}

// Each entry the run's checkpoints leave out is logged the first time, naming
// the rule; past kMaxLoggedLeftOut entries a run's new ones go unnamed.
void CheckpointScheduler::log_left_out(Run& run, const checkpoint::LeftOut& left_out) {
  constexpr std::size_t kMaxLoggedLeftOut = 1000;
  auto& state = run.checkpoint;
  bool unnamed = left_out.unnamed > 0;
  for (const auto& entry : left_out.named) {
    std::string key = entry.path + "\n" + entry.rule;
    if (state.left_out_logged.contains(key)) continue;
    if (state.left_out_logged.size() == kMaxLoggedLeftOut) {
      unnamed = true;
      continue;
    }
    state.left_out_logged.insert(std::move(key));
    log::warn("checkpoint entry left out",
              {{"run_id", run.id}, {"path", entry.path}, {"rule", entry.rule}});
  }
  if (!unnamed || state.unnamed_left_out_logged) return;
  state.unnamed_left_out_logged = true;
  log::warn("more checkpoint entries left out than are named; the rest are not logged",
            {{"run_id", run.id}, {"unnamed", left_out.unnamed}});
}

// A rejected fast-forward means another instance claimed the run: it owns the
// branch now, and this instance must not write to the run again. For a
// finished run it may also be a result another pod published first (the
// same run id finished twice): its branch is kept for an operator.
void CheckpointScheduler::fence(Run& run, const Error& error) {
  if (run.lifecycle.fenced()) return;
  ++runs_fenced_;
  // A run that is over keeps its state; nothing of it is ours to release.
  const bool over = run.lifecycle.over();
  if (over) run.on(ReleaseEvent::lost);
  const nlohmann::json fields{
      {"run_id", run.id}, {"branch", run.checkpoint.branch}, {"error", error.message}};
  if (over)
    log::error(
        "the release of a finished run lost to another instance; its branch is kept for an "
        "operator",
        fields);
  else
    log::error(
        "another instance owns this run (its checkpoint push was rejected); stopping it here",
        fields);
  // This disk's copy is stale from now on: no later start here resumes it,
  // even once the owner finished the run and deleted its branch. A running
  // child's exit writes the mark with its attempt's end.
  run.params.handed_over =
      over ? "release lost at " + iso8601_utc(SystemClock::now()) + ": " + error.message
           : "fenced at " + iso8601_utc(SystemClock::now()) +
                 ": another instance's push replaced this pod's";
  if (over) return run.write_params();
  hooks_.fenced(run);
}

void CheckpointScheduler::start_periodic_checkpoints(Duration interval, PodLease* lease) {
  if (interval <= Duration::zero()) return;
  periodic_interval_ = interval;
  periodic_lease_ = lease;
  const bool releasing = std::any_of(
      runs_.begin(), runs_.end(), [](const auto& run) { return run->lifecycle.release_pending(); });
  schedule_tick(releasing ? std::min(interval, kReleaseWindow) : interval);
}

// A tick whose timer was set again (bring_tick_forward) finds its
// generation gone, even when its handler was already queued.
void CheckpointScheduler::schedule_tick(Duration after) {
  const auto generation = ++tick_generation_;
  periodic_timer_.expires_after(after);
  periodic_timer_.async_wait([this, generation](const boost::system::error_code& ec) {
    if (ec || generation != tick_generation_ || stopped_) return;
    periodic_tick();
    schedule_tick(periodic_interval_);
  });
}

// A finished run's next release step rides a push within kReleaseWindow
// rather than a whole interval: its result shows soon, and runs ending
// within the window still share the push. Intervals that short are left as
// they are.
void CheckpointScheduler::bring_tick_forward() {
  if (periodic_interval_ <= kReleaseWindow || stopped_) return;
  if (periodic_timer_.expiry() - SteadyClock::now() <= kReleaseWindow) return;
  schedule_tick(kReleaseWindow);
}

// Whether a branch of this pod answers for a run, or is about to (a queued
// run's first push): a run neither over and released, nor another
// instance's, nor held.
bool CheckpointScheduler::holds_a_run() const {
  return std::any_of(runs_.begin(), runs_.end(), [](const auto& run) {
    const auto& lifecycle = run->lifecycle;
    return !lifecycle.fenced() && !lifecycle.held() &&
           !(lifecycle.over() && !lifecycle.release_pending());
  });
}

// One push for every run that changed since its last checkpoint and for the
// lease: a pod with fifty runs makes one connection per interval, not fifty.
void CheckpointScheduler::periodic_tick() {
  hooks_.before_tick();
  PodLease* lease = periodic_lease_;
  std::vector<Run*> changed;
  std::vector<Run*> refused;
  auto signatures = std::make_shared<std::map<const Run*, std::uint64_t>>();
  for (auto& owned : runs_) {
    Run& run = *owned;
    if (run.lifecycle.fenced() || !run.store_ops.empty()) continue;
    if (run.checkpoint.ticks_to_skip > 0) {
      --run.checkpoint.ticks_to_skip;
      continue;
    }
    if (run.lifecycle.release_pending() && settings_.release_at_ticks) {
      // Its next release step rides this push; once the server's rules
      // refused one (a hook that declines results declines the whole push,
      // the lease and other runs' checkpoints with it), in a push of its own.
      (run.checkpoint.refusals > 0 ? refused : changed).push_back(&run);
      continue;
    }
    if (run.lifecycle.release_pending()) release_checkpoint(run);
    // A queued run gets one checkpoint too: accepted with a 202, it must
    // survive the loss of this pod before it ever starts.
    const bool never_saved_queued =
        run.status() == RunStatus::queued && !run.checkpoint.last_commit;
    if (run.status() != RunStatus::running && !never_saved_queued) continue;
    const auto signature = checkpoint::stat_signature(run.dir);
    if (signature == run.saved_signature) continue;
    if (!run.checkpoint.unsaved_since) run.checkpoint.unsaved_since = SteadyClock::now();
    changed.push_back(&run);
    (*signatures)[&run] = signature;
  }
  // An idle pod pushes nothing: a lease guards only runs it holds.
  const bool lease_needed = lease && holds_a_run();
  if (lease && !lease_needed) lease->let_go();
  checkpoint_together(changed, {.reason = checkpoint::CheckpointReason::periodic,
                                .deadline = SteadyClock::now() + settings_.network_timeout,
                                .lease_until = lease_needed ? lease->renewal() : std::nullopt,
                                .each =
                                    [signatures](Run& run, const CheckpointResult& result) {
                                      if (result) run.saved_signature = signatures->at(&run);
                                    },
                                .done =
                                    [lease](const std::optional<CheckpointResult>& renewed) {
                                      if (renewed) lease->renewed(*renewed);
                                    }});
  // Each alone: one run's refusal must not hold another's release back.
  for (Run* run : refused)
    checkpoint_together({run}, {.reason = checkpoint::CheckpointReason::final,
                                .deadline = SteadyClock::now() + settings_.network_timeout,
                                .lease_until = std::nullopt,
                                .release_lease = false,
                                .keep_objects = true,
                                .each = [](Run&, const CheckpointResult&) {},
                                .done = [](const std::optional<CheckpointResult>&) {}});
}

}  // namespace inflight
