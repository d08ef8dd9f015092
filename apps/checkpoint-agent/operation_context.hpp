// What the agent's operations share: the context of one request, and each
// op (store_operations.cpp: the steps serve, run and resume take;
// command_operations.cpp: the operator's commands). operations.cpp reads the
// request and calls the op its `op` names.
#pragma once

#include <functional>
#include <string>

#include "inflight/checkpoint/agent_commands.hpp"
#include "inflight/checkpoint/checkpoint_store.hpp"
#include "inflight/core/child_templates.hpp"

namespace inflight::agent_ops {

namespace ck = checkpoint;

// The store and the instance that a request concerns.
struct Context {
  ck::CheckpointStore& store;
  const std::string& pod;
  // Whether the cache writes the objects the op made to disk afterwards:
  // the next step's parents and unchanged chunks come from there.
  bool keep_objects = true;
  // The next message on stdin, for an op whose parts follow its request;
  // throws when stdin ends first.
  std::function<OrderedJson()> next_message = {};
  std::uint64_t max_file_bytes = 0;  // of a file read whole: the restore limit
};

// The store steps.
agent::Done check(Context& c, const agent::Check& call);
Result<agent::Saved> save(Context& c, const agent::Save& call);
agent::Released release(Context& c, const agent::Release& call);
agent::SavedAll save_all(Context& c, const agent::SaveAll& call);
agent::Done hold_lease(Context& c, const agent::HoldLease& call);
agent::Done drop_lease(Context& c, const agent::DropLease& call);
agent::Restored restore(Context& c, const agent::Restore& call);
agent::LookedUpRuns look_up(Context& c, const agent::LookUp& call);

// The operator's commands.
agent::Listed list(Context& c, const agent::List& call);
Result<agent::Shown> show(Context& c, const agent::Show& call);
agent::Pruned prune(Context& c, const agent::Prune& call);
agent::RunsListed list_runs(Context& c, const agent::ListRuns& call);
agent::RunShown show_run(Context& c, const agent::ShowRun& call);
agent::RunLogWritten run_log(Context& c, const agent::WriteRunLog& call);
agent::RunsPruned prune_runs(Context& c, const agent::PruneRuns& call);
agent::RunsMigrated migrate_runs(Context& c, const agent::MigrateRuns& call);
agent::RunsCompacted compact_runs(Context& c, const agent::CompactRuns& call);

// A ref judged against this pod is `rejected`: another instance owns the run.
Error ref_failure(ck::RefOutcome outcome, std::string message);
// The instance's templates, sent by the caller so that a branch is judged
// before it is claimed.
ChildTemplates templates_of(const OrderedJson& children);

}  // namespace inflight::agent_ops
