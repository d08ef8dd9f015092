#include "inflight/supervisor/runs/run_lifecycle.hpp"

#include "inflight/core/word_table.hpp"

namespace inflight {

namespace {

using S = RunState;
using E = RunEvent;

// The run's table. A stop while its child stops already changes nothing
// (the first signal's grace runs); a shutdown keeps an operator's stop a
// cancel; a fence turns any stop into the fence's, whose end is `fenced`.
constexpr RunTransition kRunTransitions[] = {
    {S::queued, E::start, S::starting},
    {S::queued, E::stop, S::cancelled},
    {S::queued, E::shut_down, S::interrupted},
    {S::queued, E::fence, S::fenced},
    {S::queued, E::hold, S::held},
    {S::queued, E::fail, S::failed},  // restored with no budget left
    {S::deferred, E::backoff_over, S::queued},
    {S::deferred, E::stop, S::cancelled},
    {S::deferred, E::shut_down, S::interrupted},
    {S::deferred, E::fence, S::fenced},
    {S::starting, E::spawned, S::running},
    {S::starting, E::fail, S::failed},            // its program could not be started
    {S::starting, E::interrupt, S::interrupted},  // its run dir could not be written
    {S::running, E::stop, S::cancelling},
    {S::running, E::shut_down, S::stopping},
    {S::running, E::fence, S::fencing},
    {S::running, E::succeed, S::succeeded},
    {S::running, E::fail, S::failed},
    {S::running, E::retry, S::queued},
    {S::running, E::defer, S::deferred},
    {S::running, E::interrupt, S::interrupted},  // a crash or a deferral seen at shutdown
    {S::cancelling, E::shut_down, S::cancelling},
    {S::cancelling, E::fence, S::fencing},
    {S::cancelling, E::cancelled, S::cancelled},
    {S::stopping, E::shut_down, S::stopping},
    {S::stopping, E::fence, S::fencing},
    {S::stopping, E::interrupt, S::interrupted},
    {S::fencing, E::shut_down, S::fencing},
    {S::fencing, E::interrupt, S::fenced},
    {S::interrupted, E::fence, S::fenced},  // its shutdown push was rejected
};

using R = ReleaseStep;
using RE = ReleaseEvent;

// The release's table: `begin` again on a release under way keeps its step
// (a retry); a release that is done may begin again (a run cancelled twice).
constexpr ReleaseTransition kReleaseTransitions[] = {
    {R::none, RE::begin, R::final_state},
    {R::done, RE::begin, R::final_state},
    {R::final_state, RE::begin, R::final_state},
    {R::index, RE::begin, R::index},
    {R::deletion, RE::begin, R::deletion},
    {R::final_state, RE::final_saved, R::final_state},
    {R::index, RE::final_saved, R::index},
    {R::deletion, RE::final_saved, R::deletion},
    {R::final_state, RE::landed, R::index},
    {R::final_state, RE::indexed, R::deletion},
    {R::index, RE::landed, R::index},
    {R::index, RE::indexed, R::deletion},
    {R::final_state, RE::released, R::done},  // all steps in one call (release())
    {R::index, RE::released, R::done},
    {R::deletion, RE::released, R::done},
    {R::none, RE::lost, R::lost},
    {R::final_state, RE::lost, R::lost},
    {R::index, RE::lost, R::lost},
    {R::deletion, RE::lost, R::lost},
};

constexpr WordTable<RunStatus, 8> kRunStatusWords{{{RunStatus::queued, "queued"},
                                                   {RunStatus::starting, "starting"},
                                                   {RunStatus::running, "running"},
                                                   {RunStatus::stopping, "stopping"},
                                                   {RunStatus::succeeded, "succeeded"},
                                                   {RunStatus::failed, "failed"},
                                                   {RunStatus::cancelled, "cancelled"},
                                                   {RunStatus::interrupted, "interrupted"}}};

constexpr WordTable<RunState, 13> kRunStateWords{{{S::queued, "queued"},
                                                  {S::deferred, "deferred"},
                                                  {S::starting, "starting"},
                                                  {S::running, "running"},
                                                  {S::cancelling, "cancelling"},
                                                  {S::stopping, "stopping"},
                                                  {S::fencing, "fencing"},
                                                  {S::interrupted, "interrupted"},
                                                  {S::held, "held"},
                                                  {S::fenced, "fenced"},
                                                  {S::succeeded, "succeeded"},
                                                  {S::failed, "failed"},
                                                  {S::cancelled, "cancelled"}}};

constexpr WordTable<RunEvent, 13> kRunEventWords{{{E::start, "start"},
                                                  {E::spawned, "spawned"},
                                                  {E::stop, "stop"},
                                                  {E::shut_down, "shut_down"},
                                                  {E::fence, "fence"},
                                                  {E::hold, "hold"},
                                                  {E::backoff_over, "backoff_over"},
                                                  {E::succeed, "succeed"},
                                                  {E::fail, "fail"},
                                                  {E::cancelled, "cancelled"},
                                                  {E::interrupt, "interrupt"},
                                                  {E::retry, "retry"},
                                                  {E::defer, "defer"}}};

constexpr WordTable<ReleaseStep, 6> kReleaseStepWords{{{R::none, "none"},
                                                       {R::final_state, "final_state"},
                                                       {R::index, "index"},
                                                       {R::deletion, "deletion"},
                                                       {R::done, "done"},
                                                       {R::lost, "lost"}}};

constexpr WordTable<ReleaseEvent, 6> kReleaseEventWords{{{RE::begin, "begin"},
                                                         {RE::final_saved, "final_saved"},
                                                         {RE::landed, "landed"},
                                                         {RE::indexed, "indexed"},
                                                         {RE::released, "released"},
                                                         {RE::lost, "lost"}}};

template <class Row, class State, class Event>
std::optional<State> next(std::span<const Row> table, State from, Event event) {
  for (const auto& row : table)
    if (row.from == from && row.event == event) return row.to;
  return std::nullopt;
}

}  // namespace

std::span<const RunTransition> run_transitions() {
  return kRunTransitions;
}

std::span<const ReleaseTransition> release_transitions() {
  return kReleaseTransitions;
}

std::string_view to_string(RunStatus status) {
  return word_of(kRunStatusWords, status);
}

std::optional<RunStatus> run_status_named(std::string_view word) {
  return value_of(kRunStatusWords, word);
}

bool is_final(RunStatus status) {
  return status == RunStatus::succeeded || status == RunStatus::failed ||
         status == RunStatus::cancelled || status == RunStatus::interrupted;
}

std::string_view to_string(RunState state) {
  return word_of(kRunStateWords, state);
}

std::string_view to_string(RunEvent event) {
  return word_of(kRunEventWords, event);
}

std::string_view to_string(ReleaseStep step) {
  return word_of(kReleaseStepWords, step);
}

std::string_view to_string(ReleaseEvent event) {
  return word_of(kReleaseEventWords, event);
}

bool RunLifecycle::apply(RunEvent event) {
  const auto to = next(run_transitions(), state_, event);
  if (!to) return false;
  state_ = *to;
  return true;
}

bool RunLifecycle::apply(ReleaseEvent event) {
  const auto to = next(release_transitions(), release_, event);
  if (!to) return false;
  if (event == ReleaseEvent::final_saved) final_landed_ = true;
  release_ = *to;
  return true;
}

RunStatus RunLifecycle::status() const {
  switch (state_) {
    case S::queued:
    case S::deferred:
      return RunStatus::queued;
    case S::starting:
      return RunStatus::starting;
    case S::running:
      return RunStatus::running;
    case S::cancelling:
    case S::stopping:
    case S::fencing:
      return RunStatus::stopping;
    case S::interrupted:
    case S::held:
    case S::fenced:
      return RunStatus::interrupted;
    case S::succeeded:
      return RunStatus::succeeded;
    case S::failed:
      return RunStatus::failed;
    case S::cancelled:
      return RunStatus::cancelled;
  }
  return RunStatus::interrupted;
}

StopCause RunLifecycle::stop_cause() const {
  switch (state_) {
    case S::cancelling:
      return StopCause::cancel;
    case S::stopping:
    case S::fencing:
      return StopCause::shutdown;
    default:
      return StopCause::none;
  }
}

bool RunLifecycle::over() const {
  return state_ == S::succeeded || state_ == S::failed || state_ == S::cancelled;
}

bool RunLifecycle::fenced() const {
  return state_ == S::fencing || state_ == S::fenced || release_ == R::lost;
}

bool RunLifecycle::release_pending() const {
  return release_ == R::final_state || release_ == R::index || release_ == R::deletion;
}

RunState final_state_named(std::string_view final_status) {
  const auto status = run_status_named(final_status);
  if (status == RunStatus::succeeded) return S::succeeded;
  if (status == RunStatus::cancelled) return S::cancelled;
  return S::failed;
}

}  // namespace inflight
