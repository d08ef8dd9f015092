// One run: an eval with one id, executed in one or more attempts (docs/serve.md "Runs and
// attempts").
#pragma once

#include <sys/types.h>

#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "inflight/core/child_template.hpp"
#include "inflight/core/clock.hpp"
#include "inflight/core/run_dir.hpp"
#include "inflight/core/run_params.hpp"
#include "inflight/supervisor/process/child_process.hpp"
#include "inflight/supervisor/runs/run_lifecycle.hpp"

namespace inflight {

struct CheckpointState {
  std::string branch;
  std::optional<std::string> last_at;
  std::optional<std::string> last_commit;
  // Since when, and why, this run's checkpoints fail; cleared once one lands.
  std::optional<std::string> failing_since;
  std::optional<std::string> error;
  // Pushes the server's rules refused in a row (a hook, a permission, a
  // quota), and the periodic ticks to let pass before the next try: each
  // refusal doubles the wait, up to kMaxTicksSkipped.
  int refusals = 0;
  int ticks_to_skip = 0;
  // Since when the run dir holds changes that have not landed (the attempt's
  // start, or the periodic tick that first saw them), and the records the
  // last landed checkpoint held: the work a lost pod would cost.
  std::optional<SteadyClock::time_point> unsaved_since;
  std::uint64_t records_saved = 0;
  // The entries left out of its checkpoints already logged ("path\nrule"):
  // each is logged once per run (docs/checkpoints.md "What a checkpoint saves, a restore takes").
  std::set<std::string> left_out_logged;
  bool unnamed_left_out_logged = false;
};

struct Run {
  Run(std::string id, std::filesystem::path dir, checkpoint::RunParams params,
      boost::asio::io_context& io, RunState initial = RunState::queued)
      : id(std::move(id)),
        dir(std::move(dir)),
        params(std::move(params)),
        lifecycle(initial),
        stop_timer(io),
        retry_timer(io) {}

  std::string id;
  std::filesystem::path dir;
  checkpoint::RunParams params;
  // The instance's configured template named params.child_name; null while
  // the run is held.
  const ChildTemplate* child = nullptr;
  RunLifecycle lifecycle;
  // Why this instance cannot run the run (no template of that name, a request
  // that no longer validates), once it is held: it is shown, never started,
  // and its branch and run dir are left as they are.
  std::string held_reason;
  std::optional<ContainedChild> process;  // while a child runs
  std::optional<std::string> finished_at;
  std::optional<int> exit_code;
  checkpoint::RecordCounter records;
  CheckpointState checkpoint;
  std::optional<std::string> final_commit;  // once its final state and result landed
  // Store operations of this run, one at a time, so that a periodic push, the
  // shutdown push and the branch deletion never race each other.
  std::deque<std::function<void()>> store_ops;
  std::optional<std::uint64_t> saved_signature;  // stat_signature of the last checkpoint
  boost::asio::steady_timer stop_timer;          // escalates a stop to the end of every process
  boost::asio::steady_timer retry_timer;         // ends the backoff of a deferred run
  // The current attempt's model calls, kept up to date by the model gateway
  // (which may end a call after the child); copied into the attempt's record
  // at each write_params. Null when the attempt reaches no model.
  std::shared_ptr<checkpoint::ModelCounts> model_calls;

  int attempts() const { return static_cast<int>(params.attempts.size()); }
  RunStatus status() const { return lifecycle.status(); }
  // Moves the run by `event`; an event its state refuses is logged as the
  // bug it is and changes nothing.
  bool on(RunEvent event);
  bool on(ReleaseEvent event);
  // run-params.json from `params`. A run dir that cannot be written fails
  // the run's record alone: logged, never thrown; its state stays in memory.
  void write_params(checkpoint::Durability durability = checkpoint::Durability::synced);
  std::uint64_t record_count();
  // The model calls of every attempt, the current one as of now; nullopt
  // when no attempt reached a model.
  std::optional<checkpoint::ModelCounts> model_totals();
  // Records the run holds when done, when its template says (progress_total).
  std::optional<std::uint64_t> records_expected() const;

 private:
  void record_model_calls();
};

}  // namespace inflight
