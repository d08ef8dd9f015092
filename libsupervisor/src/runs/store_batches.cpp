// See checkpoint_scheduler.hpp. This file: many runs in one store step (a
// periodic tick, a shutdown's batch or stream), the release steps of runs
// that are over riding those pushes, and releases sent at once.
#include "inflight/core/log.hpp"
#include "inflight/supervisor/runs/checkpoint_scheduler.hpp"
#include "runs/store_requests.hpp"

namespace inflight {

namespace {

// A finished run whose release step the server's rules refused saves its
// final state as a plain checkpoint first: a hook that declines results
// would decline the final state with them, and the next start would run the
// run again from an older checkpoint.
bool saves_final_alone(const Run& run) {
  return run.checkpoint.refusals > 0 && run.lifecycle.release_step() == ReleaseStep::final_state &&
         !run.lifecycle.final_landed();
}

}  // namespace

// Runs of one store step: the step starts once each run's queue reached it.
// A stream's runs are added to `stream` as their turn comes.
struct CheckpointScheduler::StoreBatch {
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

void CheckpointScheduler::checkpoint_together(const std::vector<Run*>& runs, StoreStep step) {
  auto batch = std::make_shared<StoreBatch>(
      StoreBatch{.runs = {}, .waiting = runs.size(), .step = std::move(step)});
  if (runs.empty()) return send_batch(batch);
  for (Run* run : runs)
    enqueue(*run, [this, batch, run] {
      batch->runs.push_back(run);
      if (--batch->waiting == 0) send_batch(batch);
    });
}

void CheckpointScheduler::send_batch(const std::shared_ptr<StoreBatch>& batch) {
  const auto& step = batch->step;
  SaveAllRequest request{.runs = {},
                         .lease_until = epoch_seconds(step.lease_until),
                         .release_lease = step.release_lease,
                         .keep_objects = step.keep_objects};
  for (Run* run : batch->runs) {
    // A release push whose run was released meanwhile (by a push under way
    // when the shutdown began) has nothing left to send for it.
    if (step.reason == checkpoint::CheckpointReason::final && !run->lifecycle.release_pending()) {
      op_done(*run);
      continue;
    }
    if (run->lifecycle.fenced()) {
      if (!run->lifecycle.release_pending()) step.each(*run, fenced_result());
      op_done(*run);
    } else if (run->lifecycle.release_pending() && !saves_final_alone(*run)) {
      add_release_step(*batch, request, *run);
    } else {
      request.runs.push_back(batch->send(*run));
    }
  }
  const bool releasing =
      !batch->finals.empty() || !batch->indexed.empty() || !batch->deletions.empty();
  if (request.runs.empty() && !request.lease_until && !releasing) return step.done(std::nullopt);
  port_.save_all(request, step.deadline,
                 [this, batch](const SaveAllResult& result) { answer_batch(batch, result); });
}

void CheckpointScheduler::answer_batch(const std::shared_ptr<StoreBatch>& batch,
                                       const SaveAllResult& result) {
  for (std::size_t i = 0; i < batch->sending.size(); ++i) {
    Run& run = *batch->sending[i];
    const int refusals = run.checkpoint.refusals;
    record(run, result.runs[i], batch->records[i]);
    // A finished run's final state, saved alone: its release steps stay in
    // pushes of their own until one of them lands.
    if (batch->finished[i] && result.runs[i]) {
      run.checkpoint.refusals = refusals;
      run.on(ReleaseEvent::final_saved);
    }
    batch->step.each(run, result.runs[i]);
    op_done(run);
  }
  for (std::size_t i = 0; i < batch->finals.size(); ++i)
    release_step_done(*batch->finals[i], result.finals[i], result.index);
  for (Run* run : batch->indexed) release_step_done(*run, *result.index, result.index);
  for (std::size_t i = 0; i < batch->deletions.size(); ++i)
    release_step_done(*batch->deletions[i], result.deletions[i], std::nullopt);
  batch->step.done(result.lease);
}

void CheckpointScheduler::add_release_step(StoreBatch& batch, SaveAllRequest& request, Run& run) {
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
void CheckpointScheduler::release_step_done(Run& run, const CheckpointResult& result,
                                            const std::optional<CheckpointResult>& index) {
  const auto step = run.lifecycle.release_step();
  if (step == ReleaseStep::deletion || result.failed_with(Failure::rejected))
    return released(run, result);
  if (!result) {
    disk_health_.report(result);
    if (result.failed_with(Failure::refused)) back_off(run.checkpoint);
    log::warn("a release step of a finished run did not land; tried again next interval",
              {{"run_id", run.id}, {"error", result.error().message}});
    return op_done(run);
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
  op_done(run);
  if (indexed) bring_tick_forward();
}

CheckpointScheduler::CheckpointStream CheckpointScheduler::open_checkpoint_stream(StoreStep step) {
  auto batch = std::make_shared<StoreBatch>(StoreBatch{.runs = {}, .step = std::move(step)});
  batch->stream = port_.open_save_all(batch->step.deadline);
  return batch;
}

void CheckpointScheduler::add_to_stream(const CheckpointStream& batch, Run& run) {
  ++batch->waiting;
  enqueue(run, [this, batch, &run] {
    --batch->waiting;
    if (run.lifecycle.fenced()) {
      batch->step.each(run, fenced_result());
      op_done(run);
    } else {
      batch->stream->add(batch->send(run));
    }
    if (batch->closing && batch->waiting == 0) push_stream(batch);
  });
}

void CheckpointScheduler::close_stream(const CheckpointStream& batch,
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
void CheckpointScheduler::push_stream(const std::shared_ptr<StoreBatch>& batch) {
  const auto stream = std::move(batch->stream);
  const auto& step = batch->step;
  if (batch->sending.empty() && !step.lease_until) return step.done(std::nullopt);
  stream->push({.runs = {},
                .lease_until = epoch_seconds(step.lease_until),
                .release_lease = step.release_lease,
                .keep_objects = false},
               [this, batch](const SaveAllResult& result) { answer_batch(batch, result); });
}

// A release holds its run's store queue until its batch is answered. With
// release_at_ticks, its steps ride the periodic pushes instead, and a
// shutdown's release rounds send what is left (ShutdownPlan).
void CheckpointScheduler::release_checkpoint(Run& run) {
  run.on(ReleaseEvent::begin);
  if (settings_.release_at_ticks) return bring_tick_forward();
  enqueue(run, [this, &run] {
    if (run.lifecycle.fenced() || !run.lifecycle.release_pending()) return op_done(run);
    releases_waiting_.push_back(&run);
    if (!release_sent_) send_releases();
  });
}

void CheckpointScheduler::send_releases() {
  const auto batch = std::exchange(releases_waiting_, {});
  release_sent_ = !batch.empty();
  if (batch.empty()) return;
  std::vector<CheckpointRequest> requests;
  for (Run* run : batch)
    requests.push_back(checkpoint_request(*run, checkpoint::CheckpointReason::final));
  // The deadline runs from the batch's turn, not from its runs' queueing.
  port_.release(requests, SteadyClock::now() + settings_.network_timeout,
                [this, batch](const std::vector<CheckpointResult>& results) {
                  for (std::size_t i = 0; i < batch.size(); ++i) released(*batch[i], results[i]);
                  send_releases();
                });
}

void CheckpointScheduler::released(Run& run, const CheckpointResult& result) {
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
  op_done(run);
}

}  // namespace inflight
