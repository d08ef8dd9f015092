// A run's lifecycle on this instance as explicit states, and the two tables
// of the events that move it: one for the run and its attempts, one for the
// release of a run that is over (docs/serve.md "Runs and attempts",
// docs/results.md). Every change of state goes through apply(), which refuses
// an event its table has no row for, so that a run never drifts into a state
// no code expects.
#pragma once

#include <optional>
#include <span>
#include <string_view>

#include "inflight/supervisor/runs/outcome.hpp"

namespace inflight {

// What the API and /metrics show of a run: the words of SPEC's run status.
enum class RunStatus {
  queued,
  starting,
  running,
  stopping,
  succeeded,
  failed,
  cancelled,
  interrupted
};

std::string_view to_string(RunStatus status);
std::optional<RunStatus> run_status_named(std::string_view word);
inline constexpr RunStatus kAllRunStatuses[] = {
    RunStatus::queued,    RunStatus::starting, RunStatus::running,   RunStatus::stopping,
    RunStatus::succeeded, RunStatus::failed,   RunStatus::cancelled, RunStatus::interrupted};

// Over, or interrupted: nothing more runs of it in this life of serve.
bool is_final(RunStatus status);

enum class RunState {
  queued,       // waits for a free slot
  deferred,     // its child asked to be run later: waits out its backoff
  starting,     // its attempt is being prepared
  running,      // its child runs
  cancelling,   // its child was sent the stop signal: an operator stopped the run
  stopping,     // … this instance shuts down
  fencing,      // … another instance owns the run
  interrupted,  // resumable: shut down, or its attempt could not be prepared
  held,         // this instance cannot run it: shown, never started, never touched
  fenced,       // another instance owns it: never touched again
  succeeded,    // over, by the child's own doing or out of budget (failed)
  failed,
  cancelled,
};

enum class RunEvent {
  start,         // an attempt is prepared
  spawned,       // its child started
  stop,          // an operator stopped the run
  shut_down,     // this instance shuts down
  fence,         // a push was rejected: another instance owns the run
  hold,          // this instance's templates refuse the run
  backoff_over,  // a deferred run may queue again
  succeed,       // the attempt succeeded
  fail,          // the attempt failed or could not start, or no budget is left
  cancelled,     // the attempt ended after the operator's stop
  interrupt,     // the attempt ended by the shutdown (or the fence), or was never prepared
  retry,         // the attempt crashed: queued again at once
  defer,         // the attempt asked to be run later
};

// Where the release of a run that is over stands (store_types.hpp's
// ReleaseSteps): its final state with its result, the index entry again when
// only it failed, then the deletion of its branch. `lost`: another instance
// owns the branch, or published the run first; it is left for an operator.
enum class ReleaseStep { none, final_state, index, deletion, done, lost };

enum class ReleaseEvent {
  begin,        // the run is over: release it (again, after a failure)
  final_saved,  // its final state landed alone, before its release steps
  landed,       // its final state (or the index entry) landed; the index still lacks it
  indexed,      // … and its index entry is in (or nothing is published)
  released,     // its branch is deleted: the release is done
  lost,         // another instance owns the branch
};

struct RunTransition {
  RunState from;
  RunEvent event;
  RunState to;
};

struct ReleaseTransition {
  ReleaseStep from;
  ReleaseEvent event;
  ReleaseStep to;
};

// Every allowed transition; a (state, event) pair absent here is refused.
std::span<const RunTransition> run_transitions();
std::span<const ReleaseTransition> release_transitions();

std::string_view to_string(RunState state);
std::string_view to_string(RunEvent event);
std::string_view to_string(ReleaseStep step);
std::string_view to_string(ReleaseEvent event);

class RunLifecycle {
 public:
  explicit RunLifecycle(RunState initial = RunState::queued) : state_(initial) {}

  // Moves the run by its table's row for (state, event): false, and nothing
  // changes, when there is none.
  [[nodiscard]] bool apply(RunEvent event);
  [[nodiscard]] bool apply(ReleaseEvent event);

  RunState state() const { return state_; }
  RunStatus status() const;
  // Why its child's group was signalled, for classify(): none while it runs.
  StopCause stop_cause() const;
  // Over: succeeded, failed or cancelled.
  bool over() const;
  // Another instance owns the run (or its release): nothing of it is sent again.
  bool fenced() const;
  bool held() const { return state_ == RunState::held; }

  ReleaseStep release_step() const { return release_; }
  bool release_pending() const;
  // Its final state is on its branch: nothing of the run is on this disk alone.
  bool final_landed() const { return final_landed_; }
  void set_final_landed(bool landed) { final_landed_ = landed; }

 private:
  RunState state_;
  ReleaseStep release_ = ReleaseStep::none;
  bool final_landed_ = false;
};

// The state a run over shows when read back from its run-params.json or
// index entry: failed for any word that is not an end.
RunState final_state_named(std::string_view final_status);

}  // namespace inflight
