#include "inflight/supervisor/lifecycle/shutdown_plan.hpp"

#include <algorithm>
#include <csignal>

#include "inflight/core/log.hpp"

namespace inflight {

ShutdownPlan::ShutdownPlan(boost::asio::io_context& io, RunSupervisor& supervisor, PodLease* lease,
                           Duration grace_period, Duration flush_window,
                           std::function<void(int)> done)
    : supervisor_(supervisor),
      lease_(lease),
      grace_period_(grace_period),
      flush_window_(flush_window),
      done_(std::move(done)),
      flush_timer_(io),
      grace_timer_(io) {}

void ShutdownPlan::on_signal(int signal) {
  log::info("shutdown signal", {{"signal", signal}});
  if (stage_ == Stage::idle) return begin();
  if (stage_ == Stage::flushing) end_flush();
}

namespace {

// The pushes end max(1 s, 5 %) before the grace period does (at most half of
// it): serve's own exit (ending the agents, writing the exit) needs time too,
// before the kubelet's SIGKILL.
Duration pushes_time(Duration grace_period) {
  const Duration margin = std::max<Duration>(std::chrono::seconds(1), grace_period / 20);
  return std::max(grace_period - margin, grace_period / 2);
}

}  // namespace

void ShutdownPlan::begin() {
  started_ = SteadyClock::now();
  deadline_ = started_ + pushes_time(grace_period_);
  grace_timer_.expires_at(deadline_);
  grace_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stage_ == Stage::done) return;
    log::error("grace period over before every checkpoint landed");
    keeps_lease_ = true;
    finish(1);
  });
  supervisor_.on_child_exit([this](Run& run) { on_child_exit(run); });
  supervisor_.begin_shutdown();
  stage_ = Stage::flushing;
  // The push's connection opens while the children flush; each run is
  // snapshotted as its child exits. Runs a restore may still claim wait for
  // it (checkpoint_all).
  if (restored_ && supervisor_.live_children() > 0)
    stream_ = supervisor_.checkpoints().open_checkpoint_stream(
        shutdown_step(std::nullopt, [this] { std::exchange(after_stream_, {})(); }));
  if (restored_) release_rounds();
  if (supervisor_.live_children() == 0) return end_flush();
  flush_timer_.expires_after(std::min(flush_window_, pushes_time(grace_period_)));
  flush_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec && stage_ == Stage::flushing) end_flush();
  });
}

void ShutdownPlan::on_child_exit(Run& run) {
  if (stage_ == Stage::flushing || stage_ == Stage::killing) stream_after_calls(run);
  if (supervisor_.live_children() > 0) return;
  if (stage_ == Stage::flushing || stage_ == Stage::killing) checkpoint_after_calls();
}

bool ShutdownPlan::stopping() const {
  return stage_ == Stage::flushing || stage_ == Stage::killing;
}

// A run's model calls in flight are read to their end, within the flush
// window, and recorded in its journal before its snapshot (SPEC §13).
void ShutdownPlan::stream_after_calls(Run& run) {
  auto* models = supervisor_.settings().models;
  if (!models || models->in_flight(run.id) == 0) {
    stream(run);
    return;
  }
  log::info("waiting for the run's model calls in flight",
            {{"run_id", run.id}, {"calls", models->in_flight(run.id)}});
  models->when_idle(run.id, [this, &run] {
    if (!stopping()) return;
    run.write_params();  // the attempt's model counts, with the calls that ended since
    stream(run);
  });
}

void ShutdownPlan::checkpoint_after_calls() {
  auto* models = supervisor_.settings().models;
  if (!models) return checkpoint_all();
  models->when_all_idle([this] {
    if (stopping()) checkpoint_all();
  });
}

void ShutdownPlan::end_flush() {
  flush_timer_.cancel();
  auto* models = supervisor_.settings().models;
  if (models && models->in_flight() > 0) {
    log::warn("flush window over; cutting the model calls in flight",
              {{"calls", models->in_flight()}});
    models->cut_all();
  }
  stage_ = Stage::killing;
  if (supervisor_.live_children() == 0) return checkpoint_after_calls();
  log::warn("flush window over; killing what is left", {{"children", supervisor_.live_children()}});
  supervisor_.kill_remaining();
}

void ShutdownPlan::restore_finished() {
  restored_ = true;
  if (stage_ == Stage::awaiting_restore) checkpoint_all();
}

// Interrupted runs are pushed, all in one step; finished runs whose branch deletion is queued,
// under way or failed are awaited too: a finished run whose branch survives
// would run again on the next pod.
void ShutdownPlan::checkpoint_all() {
  if (!restored_) {
    stage_ = Stage::awaiting_restore;
    return log::info("waiting for restore to finish before checkpointing");
  }
  stage_ = Stage::checkpointing;
  const std::chrono::duration<double> stopping = SteadyClock::now() - started_;
  log::info("children stopped", {{"seconds", stopping.count()}});
  std::vector<Run*> started;
  std::vector<Run*> unstarted;
  for (const auto& owned : supervisor_.runs()) {
    Run& run = *owned;
    if (run.lifecycle.fenced() || run.lifecycle.held()) continue;
    if (run.status() == RunStatus::interrupted) {
      if (!stream(run)) (run.attempts() > 0 ? started : unstarted).push_back(&run);
      continue;
    }
    if (!run.lifecycle.release_pending() && run.store_ops.empty()) continue;
    if (run.lifecycle.release_pending() && rounds_release(run)) continue;
    ++in_flight_;
    supervisor_.checkpoints().when_store_idle(run, [this, &run] { release_then_report(run); });
  }
  ++in_flight_;  // no release round may take the lease before the runs below are pushed
  release_rounds();
  --in_flight_;
  // One push for all; runs that had started hold paid-for work: they go first.
  auto finish = [this] { finish_when_idle(); };
  auto then = unstarted.empty() ? std::function<void()>(finish) : [this, unstarted, finish] {
    checkpoint_batch(unstarted, true, finish);
  };
  if (stream_) return close_stream(unstarted.empty(), then);
  checkpoint_batch(started, unstarted.empty(), then);
}

// Adds an interrupted run that had started to the stream, once; whether the
// stream answers for it (a fenced or held run needs no push at all).
bool ShutdownPlan::stream(Run& run) {
  if (!stream_ || run.status() != RunStatus::interrupted || run.attempts() == 0) return false;
  if (run.lifecycle.fenced() || run.lifecycle.held() || !streamed_.insert(run.id).second)
    return true;
  supervisor_.checkpoints().add_to_stream(stream_, run);
  return true;
}

void ShutdownPlan::close_stream(bool last, std::function<void()> then) {
  const auto release = last ? lease_release({}) : std::nullopt;
  ++in_flight_;
  after_stream_ = std::move(then);
  supervisor_.checkpoints().close_stream(stream_, release, release.has_value());
}

// The lease rides the last push when nothing else is under way, every
// earlier push landed, and no finished run is left to release but the
// deletions that push carries (their final states landed): a shutdown is
// then one connection. Otherwise it is given up after everything landed, or
// kept (serve.cpp).
std::optional<SystemClock::time_point> ShutdownPlan::lease_release(
    const std::vector<Run*>& deleting) const {
  if (lease_ == nullptr || !all_landed_ || in_flight_ > 0) return std::nullopt;
  for (const auto& owned : supervisor_.runs())
    if (owned->lifecycle.release_pending() && rounds_release(*owned) &&
        std::find(deleting.begin(), deleting.end(), owned.get()) == deleting.end())
      return std::nullopt;
  return lease_->release();
}

void ShutdownPlan::checkpoint_batch(const std::vector<Run*>& runs, bool last,
                                    std::function<void()> then) {
  const auto release = last ? lease_release({}) : std::nullopt;
  ++in_flight_;
  supervisor_.checkpoints().checkpoint_together(runs, shutdown_step(release, std::move(then)));
}

StoreStep ShutdownPlan::shutdown_step(std::optional<SystemClock::time_point> release,
                                      std::function<void()> then) {
  return {
      .reason = checkpoint::CheckpointReason::shutdown,
      .deadline = deadline_,
      .lease_until = release,
      .release_lease = release.has_value(),
      .keep_objects = false,
      .each = [this](Run& run, const CheckpointResult& result) { on_checkpointed(run, result); },
      .done =
          [this, then = std::move(then)](const std::optional<CheckpointResult>& lease) {
            if (stage_ == Stage::done) return;
            --in_flight_;
            if (lease && *lease) lease_released_ = true;
            if (lease && !*lease)
              log::warn("lease not released with the runs", {{"error", lease->error().message}});
            then();
          }};
}

void ShutdownPlan::on_checkpointed(Run& run, const CheckpointResult& result) {
  if (stage_ == Stage::done || result) return;
  all_landed_ = false;
  keeps_lease_ = true;
  log::error("checkpoint not pushed; the run stays on local disk",
             {{"run_id", run.id}, {"error", result.error().message}});
}

// In serve, finished runs release in steps that ride its pushes: at shutdown
// the steps left go at once, every run in each push (the final states,
// results and index entries, then the deletions), so that a shutdown with
// ten finished runs is two pushes, not forty.
bool ShutdownPlan::rounds_release(const Run& run) const {
  return supervisor_.settings().release_at_ticks && !run.lifecycle.fenced();
}

void ShutdownPlan::release_rounds() {
  if (releasing_) {
    again_ = true;  // runs finished since join a chain of rounds from the start
    return;
  }
  release_round(0);
}

// What each push of a round carries: every finished run together, but one
// whose release step the server's rules refused alone (a hook that declines
// its result declines every ref of the push it rides).
std::vector<std::vector<Run*>> ShutdownPlan::release_groups() const {
  std::vector<std::vector<Run*>> groups(1);
  for (const auto& owned : supervisor_.runs()) {
    if (!owned->lifecycle.release_pending() || !rounds_release(*owned)) continue;
    if (owned->checkpoint.refusals > 0)
      groups.push_back({owned.get()});
    else
      groups.front().push_back(owned.get());
  }
  if (groups.front().empty()) groups.erase(groups.begin());
  return groups;
}

void ShutdownPlan::release_round(int round) {
  constexpr int kRounds = 4;  // final state, index entry again, deletion, one more try
  const auto groups = release_groups();
  if (round == 0 && groups.empty()) return;
  if (groups.empty() || round == kRounds) {
    releasing_ = false;
    if (std::exchange(again_, false) && !groups.empty()) return release_round(0);
    return rounds_over(groups);
  }
  releasing_ = true;
  auto left = std::make_shared<std::size_t>(groups.size());
  for (const auto& runs : groups) push_round(runs, round, left);
}

void ShutdownPlan::push_round(const std::vector<Run*>& runs, int round,
                              const std::shared_ptr<std::size_t>& left) {
  const bool deleting = std::all_of(runs.begin(), runs.end(), [](const Run* run) {
    return run->lifecycle.release_step() == ReleaseStep::deletion && run->checkpoint.refusals == 0;
  });
  const auto release =
      deleting && stage_ == Stage::checkpointing ? lease_release(runs) : std::nullopt;
  ++in_flight_;
  supervisor_.checkpoints().checkpoint_together(
      runs, {.reason = checkpoint::CheckpointReason::final,
             .deadline = deadline_,
             .lease_until = release,
             .release_lease = release.has_value(),
             .keep_objects = true,  // the next round builds on this one's commits
             .each = [](Run&, const CheckpointResult&) {},
             .done =
                 [this, round, left](const std::optional<CheckpointResult>& lease) {
                   if (stage_ == Stage::done) return;
                   --in_flight_;
                   if (lease && *lease) lease_released_ = true;
                   if (--*left == 0) release_round(round + 1);
                 }});
}

// Rounds that end during the flush are started again by checkpoint_all,
// for the runs a cancel finished since; what is left after that is reported.
void ShutdownPlan::rounds_over(const std::vector<std::vector<Run*>>& left) {
  if (stage_ != Stage::checkpointing) return;
  for (const auto& runs : left)
    for (Run* run : runs) {
      all_landed_ = false;
      // Only a final state that did not land lives on this disk alone.
      if (!run->lifecycle.final_landed()) keeps_lease_ = true;
      log::error("the branch of a finished run is not deleted; its final state stays on local disk",
                 {{"run_id", run->id}});
    }
  finish_when_idle();
}

// What a periodic push left of a finished run's release (or a release that
// failed) is sent at once, all its steps, and awaited.
void ShutdownPlan::release_then_report(Run& run) {
  if (!run.lifecycle.release_pending() || run.lifecycle.fenced()) return on_released(run);
  supervisor_.checkpoints().release_checkpoint(run);
  supervisor_.checkpoints().when_store_idle(run, [this, &run] { on_released(run); });
}

void ShutdownPlan::on_released(Run& run) {
  if (stage_ == Stage::done) return;
  --in_flight_;
  if (run.lifecycle.release_pending()) {
    all_landed_ = false;
    keeps_lease_ = keeps_lease_ || !run.lifecycle.final_landed();
    log::error("the branch of a finished run is not deleted; its final state stays on local disk",
               {{"run_id", run.id}});
  }
  finish_when_idle();
}

void ShutdownPlan::finish_when_idle() {
  if (in_flight_ == 0) finish(all_landed_ ? 0 : 1);
}

void ShutdownPlan::finish(int exit_code) {
  if (stage_ == Stage::done) return;
  stage_ = Stage::done;
  flush_timer_.cancel();
  grace_timer_.cancel();
  done_(exit_code);
}

}  // namespace inflight
