#include "checkpoints_command.hpp"

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "commands.hpp"
#include "inflight/core/clock.hpp"
#include "inflight/supervisor/agent_client/agent_client.hpp"
#include "terminal_output.hpp"

namespace inflight::app {

namespace {

constexpr std::string_view kCheckpointsListed =
    "`inflight checkpoints list` shows the runs that have checkpoints";

// Run ids without a branch (exit 4) and deletions the remote refused; the
// branches that were deleted are already printed.
int report_prune_errors(const agent::Pruned& pruned) {
  int code = kExitSuccess;
  for (const auto& id : pruned.missing) {
    std::cerr << "inflight: no checkpoint branch for '" << id << "' on " << pruned.url << "\n";
    code = kExitNotFound;
  }
  if (code == kExitNotFound) std::cerr << kCheckpointsListed << "\n";
  for (const auto& failed : pruned.failed) {
    const auto hint = failure_of(failed.failure.kind, kCheckpointsListed);
    std::cerr << "inflight: could not delete " << failed.branch << ": " << failed.failure.message
              << "\n"
              << hint.hint << "\n";
    code = hint.exit_code;
  }
  return code;
}

// A branch as `list --json` and `show --json` show it.
OrderedJson checkpoint_json(const agent::BranchInfo& c) {
  return {{"run_id", c.run_id},
          {"origin_pod", c.origin_pod},
          {"branch", c.branch},
          {"attempts", c.attempts},
          {"last_checkpoint", iso_time(c.time)},
          {"records", c.records},
          {"size_bytes", c.size_bytes},
          {"state", c.state},
          {"reason", c.reason}};
}

// The table, then why each branch that will not resume here does not.
void print_checkpoints(const std::vector<agent::BranchInfo>& checkpoints) {
  Table rows{{"RUN ID", "POD", "ATTEMPTS", "LAST CHECKPOINT", "RECORDS", "SIZE", "STATE"}};
  std::vector<std::string> reasons;
  for (const auto& c : checkpoints) {
    rows.push_back({c.run_id, c.origin_pod, std::to_string(c.attempts), relative_age(c.time),
                    std::to_string(c.records), human_size(c.size_bytes),
                    std::string(agent::to_string(c.state))});
    if (c.reason)
      reasons.push_back(c.branch + ": " + std::string(agent::to_string(c.state)) + ": " +
                        *c.reason);
  }
  print_table(rows);
  if (!reasons.empty()) std::cout << "\n";
  for (const auto& reason : reasons) std::cout << reason << "\n";
}

OrderedJson history_json(const std::vector<agent::HistoryEntry>& history) {
  OrderedJson out = OrderedJson::array();
  for (const auto& c : history)
    out.push_back({{"commit", c.oid},
                   {"time", iso_time(c.time)},
                   {"reason", c.reason},
                   {"attempt", c.attempt},
                   {"pod", c.pod},
                   {"records", c.records}});
  return out;
}

void print_history(const std::vector<agent::HistoryEntry>& history) {
  Table rows{{"TIME", "AGE", "REASON", "ATTEMPT", "POD", "RECORDS", "COMMIT"}};
  for (const auto& c : history)
    rows.push_back({iso_time(c.time), relative_age(c.time), c.reason, std::to_string(c.attempt),
                    c.pod, std::to_string(c.records), c.oid.substr(0, 12)});
  print_table(rows);
}

void print_run(const agent::Shown& run) {
  print_table({{"run", run.branch.run_id},
               {"branch", run.branch.branch},
               {"tip", run.tip},
               {"attempts", std::to_string(run.branch.attempts)},
               {"records", std::to_string(run.branch.records)},
               {"size", human_size(run.branch.size_bytes)}});
  std::cout << "\nhistory (newest first):\n";
  print_history(run.history);
  std::cout << "\nrun-params.json:\n";
  if (run.run_params.is_null())
    std::cout << "(missing or not JSON: this branch was not written by inflight)\n";
  else
    std::cout << run.run_params.dump(2) << "\n";
}

}  // namespace

CheckpointsCommand::CheckpointsCommand(CLI::App& app,
                                       const std::function<void(CLI::App*)>& add_store_flags) {
  auto* group = app.add_subcommand("checkpoints", "list, show and prune checkpoint branches");
  group->require_subcommand(1);
  list_ = group->add_subcommand("list", "one row per checkpoint branch");
  list_->add_flag("--json", json_, "one JSON document instead of a table");
  list_->add_option("--pod", pod_, "only branches of this origin pod");
  show_ = group->add_subcommand("show", "a run's branch, checkpoint history and run-params.json");
  show_->add_option("run_id", run_id_, "run id, or branch inflight/<pod>/<run-id>")->required();
  show_->add_flag("--json", json_, "one JSON document");
  prune_ = group->add_subcommand("prune", "delete checkpoint branches");
  prune_->add_option("--older-than", older_than_, "last checkpoint older than, e.g. 7d");
  prune_->add_option("--run-id", run_ids_, "these runs (ids or branches)");
  prune_->add_flag("--all", all_, "every checkpoint branch");
  prune_->add_flag("--dry-run", dry_run_, "print what would be deleted, delete nothing");
  prune_->add_flag("--take-over", take_over_,
                   "delete a branch even while the pod that wrote it holds a lease (a one-shot "
                   "command cannot watch it end); make sure that pod is gone");
  prune_->add_flag("--force", force_,
                   "delete a finished run's branch even when it cannot be published first");
  for (auto* command : {list_, show_, prune_}) add_store_flags(command);
}

CLI::App* CheckpointsCommand::parsed() const {
  for (auto* command : {list_, show_, prune_})
    if (command->parsed()) return command;
  return nullptr;
}

int CheckpointsCommand::run(const OptionSources& sources) const {
  const auto store = read_store_settings(sources);
  if (list_->parsed()) return list(store, read_child_templates(sources));
  if (show_->parsed()) return show(store);
  return prune(store);
}

int CheckpointsCommand::list(const StoreSettings& store, const ChildTemplates& templates) const {
  const auto reply =
      call_agent(store, agent::List{.pod = pod_.empty() ? std::nullopt : std::optional(pod_),
                                    .children = templates.sources()});
  if (!reply) return report_failure(reply.error(), kCheckpointsListed);
  const auto& listed = *reply;
  warn_problems(listed.problems);
  if (json_) {
    OrderedJson out = OrderedJson::array();
    for (const auto& c : listed.checkpoints) out.push_back(checkpoint_json(c));
    std::cout << OrderedJson{{"checkpoints", out}}.dump(2) << "\n";
  } else if (listed.checkpoints.empty()) {
    std::cout << "no checkpoints" << (pod_.empty() ? "" : " of pod " + pod_) << " on " << listed.url
              << "\n";
  } else {
    print_checkpoints(listed.checkpoints);
  }
  return kExitSuccess;
}

int CheckpointsCommand::show(const StoreSettings& store) const {
  const auto reply = call_agent(store, agent::Show{.run_id = run_id_});
  if (!reply) return report_failure(reply.error(), kCheckpointsListed);
  const auto& shown = *reply;
  if (!json_) {
    print_run(shown);
    return kExitSuccess;
  }
  auto out = checkpoint_json(shown.branch);
  out["tip"] = shown.tip;
  out["history"] = history_json(shown.history);
  out["run_params"] = shown.run_params;
  std::cout << out.dump(2) << "\n";
  return kExitSuccess;
}

agent::Prune CheckpointsCommand::prune_request() const {
  const int selectors = !older_than_.empty() + !run_ids_.empty() + all_;
  if (selectors != 1)
    throw UsageError(
        "prune needs exactly one of --older-than DURATION, --run-id ID..., --all; "
        "e.g. `inflight checkpoints prune --older-than 7d --dry-run`");
  return {.older_than_seconds = older_than_seconds(older_than_),
          .run_ids = run_ids_,
          .all = all_,
          .dry_run = dry_run_,
          .force = force_,
          .take_over = take_over_};
}

int CheckpointsCommand::prune(const StoreSettings& store) const {
  const auto reply = call_agent(store, prune_request());
  if (!reply) return report_failure(reply.error(), kCheckpointsListed);
  const auto& pruned = *reply;
  warn_problems(pruned.problems);
  for (const auto& branch : pruned.published) std::cout << "published " << branch << "\n";
  for (const auto& branch : pruned.deleted)
    std::cout << (dry_run_ ? "would delete " : "deleted ") << branch << "\n";
  if (pruned.deleted.empty()) std::cout << "nothing to prune on " << pruned.url << "\n";
  return report_prune_errors(pruned);
}

}  // namespace inflight::app
