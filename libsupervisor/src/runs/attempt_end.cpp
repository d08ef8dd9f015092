// What follows the end of an attempt: the run is over, retried, deferred,
// interrupted, or out of its budgets (docs/serve.md "The two budgets").
#include "inflight/core/log.hpp"
#include "inflight/supervisor/runs/run_supervisor.hpp"

namespace inflight {

void RunSupervisor::on_attempt_end(Run& run, Outcome outcome) {
  settle(run, outcome);
  if (exit_listener_) exit_listener_(run);
  start_queued();
}

void RunSupervisor::settle(Run& run, Outcome outcome) {
  ++outcomes_[outcome];
  run.params.attempts.back().outcome = std::string(to_string(outcome));
  switch (outcome) {
    case Outcome::succeeded:
    case Outcome::failed:
    case Outcome::cancelled:
      run.on(outcome == Outcome::succeeded ? RunEvent::succeed
             : outcome == Outcome::failed  ? RunEvent::fail
                                           : RunEvent::cancelled);
      finish(run);
      break;
    case Outcome::interrupted:
      run.on(RunEvent::interrupt);
      run.finished_at = iso8601_utc(SystemClock::now());
      break;
    case Outcome::crashed:
    case Outcome::deferred:
      retry(run, outcome);
      break;
  }
  // At shutdown every child ends at once, and a durable write each would
  // serialise fsyncs on the event loop. Both the old and the new run-params
  // make the run resumable, so an atomic rename is enough there. On failure
  // the file keeps the attempt without its end, which a restore reads as
  // crashed: resumable.
  run.write_params(phase_ == Phase::shutting_down ? checkpoint::Durability::atomic
                                                  : checkpoint::Durability::synced);
  // After the write: the final commit must carry final_status. A run out of
  // budget is released only to be published (fail_out_of_budget).
  const bool own_end =
      outcome == Outcome::succeeded || outcome == Outcome::failed || outcome == Outcome::cancelled;
  const bool out_of_budget = !own_end && run.params.final_status.has_value();
  if (own_end || (out_of_budget && settings_.publish)) scheduler_.release_checkpoint(run);
}

// An attempt that ended by the run's own doing is tried again while neither
// budget is spent; at shutdown it is interrupted like the others.
void RunSupervisor::retry(Run& run, Outcome outcome) {
  if (phase_ == Phase::shutting_down) {
    run.on(RunEvent::interrupt);
  } else if (const auto budget = exhausted_budget(run); !budget) {
    // A signal nobody here sent (OOM killer, a stray kill): resume at once.
    if (outcome == Outcome::crashed && run.on(RunEvent::retry)) queue_.push_front(&run);
    if (outcome == Outcome::deferred && run.on(RunEvent::defer)) defer(run);
  } else {
    fail_out_of_budget(run, *budget);
  }
}

// The child asked to be run again later: the run waits, queued but out of
// the queue, for its backoff, doubled with each deferral in a row.
void RunSupervisor::defer(Run& run) {
  int deferrals = 0;
  for (auto a = run.params.attempts.rbegin();
       a != run.params.attempts.rend() && a->outcome == to_string(Outcome::deferred); ++a)
    ++deferrals;
  const auto delay = run.child->retry_delay(deferrals);
  log::info("run deferred by its child; it resumes after the backoff",
            {{"run_id", run.id},
             {"exit_code", run.exit_code ? OrderedJson(*run.exit_code) : nullptr},
             {"backoff", format_duration(delay)}});
  run.retry_timer.expires_after(delay);
  run.retry_timer.async_wait([this, &run](const boost::system::error_code& ec) {
    if (ec || run.lifecycle.state() != RunState::deferred || phase_ != Phase::ready) return;
    run.on(RunEvent::backoff_over);
    queue_.push_back(&run);
    start_queued();
  });
}

// The budget the run has used up, if any: it gets no further attempt.
std::optional<Budget> RunSupervisor::exhausted_budget(const Run& run) const {
  const auto spent = checkpoint::spent_budgets(run.params);
  if (spent.failures >= settings_.max_attempts) return Budget::attempts;
  if (spent.interruptions >= settings_.max_interruptions) return Budget::interruptions;
  return std::nullopt;
}

// Published, a run out of budget is kept for inspection by its result;
// unpublished, by its branch. The caller writes run-params.json first.
void RunSupervisor::fail_out_of_budget(Run& run, Budget budget) {
  ++run_events_.out_of_budget[budget];
  const std::string flag = budget == Budget::attempts ? "--max-attempts" : "--max-interruptions";
  const auto spent = checkpoint::spent_budgets(run.params);
  log::error("run reached " + flag +
                 (settings_.publish ? "; marked failed and published"
                                    : "; marked failed, checkpoint kept for inspection"),
             {{"run_id", run.id},
              {"attempts", run.attempts()},
              {"failures", spent.failures},
              {"interruptions", spent.interruptions}});
  run.on(RunEvent::fail);
  finish(run);
}

// Records the end its lifecycle reached: when, and the status the run keeps.
void RunSupervisor::finish(Run& run) {
  run.finished_at = iso8601_utc(SystemClock::now());
  run.params.final_status = std::string(to_string(run.status()));
}

}  // namespace inflight
