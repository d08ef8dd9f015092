// The store side of runs: checkpoints one at a time per run, periodic
// checkpoints of changed run dirs, branch release, and fencing.

#include <algorithm>

#include "inflight/core/log.hpp"
#include "inflight/core/run_dir.hpp"
#include "inflight/supervisor/runs/run_supervisor.hpp"

namespace inflight {

void RunSupervisor::enqueue_store_op(Run& run, std::function<void()> op) {
  run.store_ops.push_back(std::move(op));
  if (run.store_ops.size() == 1) start_store_op(run);
}

// The op runs from a local: it may end itself (store_op_done) and start the
// next one before it returns, which pops its slot in the queue.
void RunSupervisor::start_store_op(Run& run) {
  const auto op = std::move(run.store_ops.front());
  op();
}

void RunSupervisor::store_op_done(Run& run) {
  run.store_ops.pop_front();
  if (!run.store_ops.empty()) start_store_op(run);
}

namespace {

CheckpointRequest checkpoint_request(Run& run, checkpoint::CheckpointReason reason) {
  return {.run_id = run.id,
          .run_dir = run.dir,
          .origin_pod = run.params.origin_pod,
          .attempt = run.attempts(),
          .reason = reason,
          .records = run.record_count(),
          .total = run.records_expected()};
}

// The answer for a run another instance owns: nothing is sent to the store.
CheckpointResult fenced_result() {
  return Error{
      .kind = Failure::rejected, .message = "another instance owns the run", .candidates = {}};
}

}  // namespace

void RunSupervisor::checkpoint(Run& run, checkpoint::CheckpointReason reason,
                               SteadyClock::time_point deadline,
                               std::function<void(const CheckpointResult&)> done) {
  enqueue_store_op(run, [this, &run, reason, deadline, done = std::move(done)] {
    if (run.lifecycle.fenced()) {
      done(fenced_result());
      return store_op_done(run);
    }
    auto request = checkpoint_request(run, reason);
    const auto records = request.records;
    checkpoints_.save(std::move(request), deadline,
                      [this, &run, done, records](CheckpointResult result) {
                        record_checkpoint(run, result, records);
                        done(result);
                        store_op_done(run);
                      });
  });
}

// Runs of one store step: the step starts once each run's queue reached it.
// A stream's runs are added to `stream` as their turn comes.
struct RunSupervisor::StoreBatch {
  std::vector<Run*> runs;
  std::size_t waiting = 0;
  StoreStep step;
  std::unique_ptr<SaveStream> stream = nullptr;
  bool closing = false;
  std::vector<Run*> sending = {};
  std::vector<std::uint64_t> records = {};
  // Whether each was a finished run's final state when sent: a save sent
  // before its run ended may be answered after, and holds no final state.
  std::vector<bool> finished = {};
  // Finished runs whose release step rides the push, by step.
  std::vector<Run*> finals = {};
  std::vector<Run*> indexed = {};
  std::vector<Run*> deletions = {};

  // Counts `run` among those the push answers for, in order; its request.
  CheckpointRequest send(Run& run) {
    sending.push_back(&run);
    finished.push_back(run.lifecycle.release_pending());
    auto request = checkpoint_request(run, step.reason);
    records.push_back(request.records);
    return request;
  }
};

void RunSupervisor::checkpoint_together(const std::vector<Run*>& runs, StoreStep step) {
  auto batch = std::make_shared<StoreBatch>(
      StoreBatch{.runs = {}, .waiting = runs.size(), .step = std::move(step)});
  if (runs.empty()) return send_batch(batch);
  for (Run* run : runs)
    enqueue_store_op(*run, [this, batch, run] {
      batch->runs.push_back(run);
      if (--batch->waiting == 0) send_batch(batch);
    });
}

void RunSupervisor::send_batch(const std::shared_ptr<StoreBatch>& batch) {
  const auto& step = batch->step;
  SaveAllRequest request{.runs = {},
                         .lease_until = step.lease_until,
                         .release_lease = step.release_lease,
                         .keep_objects = step.keep_objects};
  for (Run* run : batch->runs) {
    // A release push whose run was released meanwhile (by a push under way
    // when the shutdown began) has nothing left to send for it.
    if (step.reason == checkpoint::CheckpointReason::final && !run->lifecycle.release_pending()) {
      store_op_done(*run);
      continue;
    }
    if (run->lifecycle.fenced()) {
      if (!run->lifecycle.release_pending()) step.each(*run, fenced_result());
      store_op_done(*run);
    } else if (run->lifecycle.release_pending() && !saves_final_alone(*run)) {
      add_release_step(*batch, request, *run);
    } else {
      request.runs.push_back(batch->send(*run));
    }
  }
  const bool releasing =
      !batch->finals.empty() || !batch->indexed.empty() || !batch->deletions.empty();
  if (request.runs.empty() && !request.lease_until && !releasing) return step.done(std::nullopt);
  checkpoints_.save_all(request, step.deadline, [this, batch](const SaveAllResult& result) {
    answer_batch(batch, result);
  });
}

void RunSupervisor::answer_batch(const std::shared_ptr<StoreBatch>& batch,
                                 const SaveAllResult& result) {
  for (std::size_t i = 0; i < batch->sending.size(); ++i) {
    Run& run = *batch->sending[i];
    const int refusals = run.checkpoint.refusals;
    record_checkpoint(run, result.runs[i], batch->records[i]);
    // A finished run's final state, saved alone: its release steps stay in
    // pushes of their own until one of them lands.
    if (batch->finished[i] && result.runs[i]) {
      run.checkpoint.refusals = refusals;
      run.on(ReleaseEvent::final_saved);
    }
    batch->step.each(run, result.runs[i]);
    store_op_done(run);
  }
  for (std::size_t i = 0; i < batch->finals.size(); ++i)
    release_step_done(*batch->finals[i], result.finals[i], result.index);
  for (Run* run : batch->indexed) release_step_done(*run, *result.index, result.index);
  for (std::size_t i = 0; i < batch->deletions.size(); ++i)
    release_step_done(*batch->deletions[i], result.deletions[i], std::nullopt);
  batch->step.done(result.lease);
}

// A finished run whose release step the server's rules refused saves its
// final state as a plain checkpoint first: a hook that declines results
// would decline the final state with them, and the next start would run the
// run again from an older checkpoint.
bool RunSupervisor::saves_final_alone(const Run& run) {
  return run.checkpoint.refusals > 0 && run.lifecycle.release_step() == ReleaseStep::final_state &&
         !run.lifecycle.final_landed();
}

void RunSupervisor::add_release_step(StoreBatch& batch, SaveAllRequest& request, Run& run) {
  switch (run.lifecycle.release_step()) {
    case ReleaseStep::final_state:
      batch.finals.push_back(&run);
      request.finals.push_back(checkpoint_request(run, checkpoint::CheckpointReason::final));
      break;
    case ReleaseStep::index:
      batch.indexed.push_back(&run);
      request.indexed.push_back(*run.final_commit);
      break;
    case ReleaseStep::deletion:
      batch.deletions.push_back(&run);
      request.deletions.push_back(checkpoint_request(run, checkpoint::CheckpointReason::final));
      break;
    case ReleaseStep::none:
    case ReleaseStep::done:
    case ReleaseStep::lost:
      break;  // not pending: never sent
  }
}

// A step that landed moves the run to the next, which the next push takes:
// the final state and the result ride with their index entry, the deletion
// goes once both landed. A step that did not is tried again next time,
// unless another instance owns the run. `index`: the push's index commit.
void RunSupervisor::release_step_done(Run& run, const CheckpointResult& result,
                                      const std::optional<CheckpointResult>& index) {
  const auto step = run.lifecycle.release_step();
  if (step == ReleaseStep::deletion || result.failed_with(Failure::rejected))
    return released(run, result);
  if (!result) {
    disk_health_.report(result);
    if (result.failed_with(Failure::refused)) back_off(run.checkpoint);
    log::warn("a release step of a finished run did not land; tried again next interval",
              {{"run_id", run.id}, {"error", result.error().message}});
    return store_op_done(run);
  }
  if (step == ReleaseStep::final_state) {
    run.final_commit = result->commit;
    run.lifecycle.set_final_landed(result->commit.has_value());  // none: over the limits
  }
  const bool indexed = !settings_.publish || !run.final_commit || (index && *index);
  run.checkpoint.refusals = 0;
  if (!indexed && index) {
    if (index->failed_with(Failure::refused)) back_off(run.checkpoint);
    log::warn("a finished run's index entry did not land; tried again next interval",
              {{"run_id", run.id}, {"error", index->error().message}});
  }
  run.on(indexed ? ReleaseEvent::indexed : ReleaseEvent::landed);
  last_landed_ = SystemClock::now();
  store_op_done(run);
  if (indexed) bring_tick_forward();
}

RunSupervisor::CheckpointStream RunSupervisor::open_checkpoint_stream(StoreStep step) {
  auto batch = std::make_shared<StoreBatch>(StoreBatch{.runs = {}, .step = std::move(step)});
  batch->stream = checkpoints_.open_save_all(batch->step.deadline);
  return batch;
}

void RunSupervisor::add_to_stream(const CheckpointStream& batch, Run& run) {
  ++batch->waiting;
  enqueue_store_op(run, [this, batch, &run] {
    --batch->waiting;
    if (run.lifecycle.fenced()) {
      batch->step.each(run, fenced_result());
      store_op_done(run);
    } else {
      batch->stream->add(batch->send(run));
    }
    if (batch->closing && batch->waiting == 0) push_stream(batch);
  });
}

void RunSupervisor::close_stream(const CheckpointStream& batch,
                                 std::optional<SystemClock::time_point> lease_until,
                                 bool release_lease) {
  batch->step.lease_until = lease_until;
  batch->step.release_lease = release_lease;
  batch->closing = true;
  if (batch->waiting == 0) push_stream(batch);
}

// The stream leaves the batch here: its answer holds the batch, which must
// not hold the stream back (a cycle that an agent killed at exit never
// breaks). Dropped unpushed, it ends its agent, which pushes nothing.
void RunSupervisor::push_stream(const std::shared_ptr<StoreBatch>& batch) {
  const auto stream = std::move(batch->stream);
  const auto& step = batch->step;
  if (batch->sending.empty() && !step.lease_until) return step.done(std::nullopt);
  stream->push({.runs = {},
                .lease_until = step.lease_until,
                .release_lease = step.release_lease,
                .keep_objects = false},
               [this, batch](const SaveAllResult& result) { answer_batch(batch, result); });
}

void RunSupervisor::when_store_idle(Run& run, std::function<void()> done) {
  enqueue_store_op(run, [this, &run, done = std::move(done)] {
    store_op_done(run);
    done();
  });
}

// A release holds its run's store queue until its batch is answered. With
// release_at_ticks, its steps ride the periodic pushes instead, and a
// shutdown's release rounds send what is left (ShutdownPlan).
void RunSupervisor::release_checkpoint(Run& run) {
  run.on(ReleaseEvent::begin);
  if (settings_.release_at_ticks) {
    if (phase_ != Phase::shutting_down) bring_tick_forward();
    return;
  }
  enqueue_store_op(run, [this, &run] {
    if (run.lifecycle.fenced() || !run.lifecycle.release_pending()) return store_op_done(run);
    releases_waiting_.push_back(&run);
    if (!release_sent_) send_releases();
  });
}

void RunSupervisor::send_releases() {
  const auto batch = std::exchange(releases_waiting_, {});
  release_sent_ = !batch.empty();
  if (batch.empty()) return;
  std::vector<CheckpointRequest> requests;
  for (Run* run : batch)
    requests.push_back(checkpoint_request(*run, checkpoint::CheckpointReason::final));
  // The deadline runs from the batch's turn, not from its runs' queueing.
  checkpoints_.release(requests, SteadyClock::now() + settings_.network_timeout,
                       [this, batch](const std::vector<CheckpointResult>& results) {
                         for (std::size_t i = 0; i < batch.size(); ++i)
                           released(*batch[i], results[i]);
                         send_releases();
                       });
}

void RunSupervisor::released(Run& run, const CheckpointResult& result) {
  disk_health_.report(result);
  if (result.failed_with(Failure::rejected)) fence(run, result.error());
  if (result) run.on(ReleaseEvent::released);
  results_published_ += result && settings_.publish;
  if (result) last_landed_ = SystemClock::now();
  if (result.failed_with(Failure::refused)) back_off(run.checkpoint);
  if (result)
    log::info("checkpoint branch deleted", {{"run_id", run.id}});
  else if (run.lifecycle.release_pending())
    log::warn("checkpoint branch of a finished run not deleted; will retry",
              {{"run_id", run.id}, {"error", result.error().message}});
  store_op_done(run);
}

// `records`: what the run's progress file held when the checkpoint was taken.
void RunSupervisor::record_checkpoint(Run& run, const CheckpointResult& result,
                                      std::uint64_t records) {
  disk_health_.report(result);
  if (!result) return record_checkpoint_failure(run, result.error());
  run.checkpoint.failing_since.reset();
  run.checkpoint.error.reset();
  run.checkpoint.refusals = 0;
  log_left_out(run, result->left_out);
  // Saved as of the snapshot; a later change is seen by the next tick.
  run.checkpoint.records_saved = records;
  run.checkpoint.unsaved_since.reset();
  if (!result->commit) return;
  ++checkpoint_pushes_.landed;
  last_landed_ = SystemClock::now();
  run.checkpoint.last_commit = result->commit;
  run.checkpoint.last_at = iso8601_utc(*last_landed_);
  log::info("checkpoint pushed",
            {{"run_id", run.id}, {"branch", run.checkpoint.branch}, {"commit", *result->commit}});
}

// Shown in the run's status and counted for /metrics until a checkpoint lands.
void RunSupervisor::record_checkpoint_failure(Run& run, const Error& error) {
  ++checkpoint_failures_[error.kind];
  ++(error.kind == Failure::rejected ? checkpoint_pushes_.fenced : checkpoint_pushes_.failed);
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

// A push the server's rules refused is tried again after doubling waits, so
// that a declining hook is not asked every tick.
void RunSupervisor::back_off(CheckpointState& state) {
  constexpr int kMaxTicksSkipped = 15;
  state.ticks_to_skip = std::min((1 << std::min(state.refusals, 4)) - 1, kMaxTicksSkipped);
  ++state.refusals;
}

// Each entry the run's checkpoints leave out is logged the first time, naming
// the rule; past kMaxLoggedLeftOut entries a run's new ones go unnamed.
void RunSupervisor::log_left_out(Run& run, const checkpoint::LeftOut& left_out) {
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
void RunSupervisor::fence(Run& run, const Error& error) {
  if (run.lifecycle.fenced()) return;
  ++run_events_.fenced;
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
  std::erase(queue_, &run);
  // This disk's copy is stale from now on: no later start here resumes it,
  // even once the owner finished the run and deleted its branch. A running
  // child's exit writes the mark with its attempt's end.
  run.params.handed_over =
      over ? "release lost at " + iso8601_utc(SystemClock::now()) + ": " + error.message
           : "fenced at " + iso8601_utc(SystemClock::now()) +
                 ": another instance's push replaced this pod's";
  if (!run.process) {
    if (!over) run.on(RunEvent::fence);
    return write_params(run);
  }
  stop_child(run, RunEvent::fence);
}

void RunSupervisor::start_periodic_checkpoints(Duration interval, PodLease* lease) {
  if (interval <= Duration::zero()) return;
  periodic_interval_ = interval;
  periodic_lease_ = lease;
  const bool releasing = std::any_of(
      runs_.begin(), runs_.end(), [](const auto& run) { return run->lifecycle.release_pending(); });
  schedule_tick(releasing ? std::min(interval, kReleaseWindow) : interval);
}

// A tick whose timer was set again (bring_tick_forward) finds its
// generation gone, even when its handler was already queued.
void RunSupervisor::schedule_tick(Duration after) {
  const auto generation = ++tick_generation_;
  periodic_timer_.expires_after(after);
  periodic_timer_.async_wait([this, generation](const boost::system::error_code& ec) {
    if (ec || generation != tick_generation_ || phase_ == Phase::shutting_down) return;
    periodic_tick(periodic_lease_);
    schedule_tick(periodic_interval_);
  });
}

// A finished run's next release step rides a push within kReleaseWindow
// rather than a whole interval: its result shows soon, and runs ending
// within the window still share the push. Intervals that short are left as
// they are.
void RunSupervisor::bring_tick_forward() {
  if (periodic_interval_ <= kReleaseWindow || phase_ == Phase::shutting_down) return;
  if (periodic_timer_.expiry() - SteadyClock::now() <= kReleaseWindow) return;
  schedule_tick(kReleaseWindow);
}

// One push for every run that changed since its last checkpoint and for the
// lease: a pod with fifty runs makes one connection per interval, not fifty.
void RunSupervisor::periodic_tick(PodLease* lease) {
  remove_expired_runs();
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
  checkpoint_together(changed, {.reason = checkpoint::CheckpointReason::periodic,
                                .deadline = SteadyClock::now() + settings_.network_timeout,
                                .lease_until = lease ? lease->renewal() : std::nullopt,
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
