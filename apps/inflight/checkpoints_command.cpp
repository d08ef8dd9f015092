#include "checkpoints_command.hpp"

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "commands.hpp"
#include "inflight/supervisor/agent_client.hpp"
#include "inflight/supervisor/clock.hpp"
#include "inflight/supervisor/duration.hpp"

namespace inflight::app {

namespace {

using Table = std::vector<std::vector<std::string>>;

std::int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(SystemClock::now().time_since_epoch())
      .count();
}

std::string iso_time(std::int64_t epoch_seconds) {
  return iso8601_utc(SystemClock::from_time_t(static_cast<std::time_t>(epoch_seconds)));
}

// `3m ago`: the largest whole unit, as people read ages.
std::string relative_age(std::int64_t epoch_seconds) {
  const std::int64_t age = std::max<std::int64_t>(0, now_seconds() - epoch_seconds);
  if (age < 60) return std::to_string(age) + "s ago";
  if (age < 3600) return std::to_string(age / 60) + "m ago";
  if (age < 86400) return std::to_string(age / 3600) + "h ago";
  return std::to_string(age / 86400) + "d ago";
}

std::string human_size(std::uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes) / 1024;
  std::size_t unit = 0;
  for (; value >= 1024 && unit + 1 < std::size(units); ++unit) value /= 1024;
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %s", value, units[unit]);
  return text;
}

// Columns padded to their widest cell, two spaces apart; the first row is the header.
void print_table(const Table& rows) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()));
    for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i)
      line +=
          i + 1 == row.size() ? row[i] : row[i] + std::string(widths[i] - row[i].size() + 2, ' ');
    std::cout << line << "\n";
  }
}

struct Failure {
  int exit_code;
  const char* hint;
};

Failure failure_of(const std::string& kind) {
  if (kind == "unreachable" || kind == "deadline")
    return {kExitUnreachable,
            "check --results-repo and the network; a slow remote needs a longer --git-timeout"};
  if (kind == "auth")
    return {kExitUnreachable, "check --git-username and --git-token, or --git-ssh-key"};
  if (kind == "not_found")
    return {kExitNotFound, "`inflight checkpoints list` shows the runs that have checkpoints"};
  return {kExitFailure, "check that --results-repo names a git repository inflight can write to"};
}

// Prints what went wrong and what to try; returns the exit code.
int report_failure(const OrderedJson& result) {
  const auto kind = result.value("kind", std::string("other"));
  const auto error = result.value("error", std::string("the checkpoint agent failed"));
  if (kind == "ambiguous") {
    const auto branches = result.at("branches");
    std::cerr << "inflight: " << error << ": " << branches.front().get<std::string>() << "\n";
    for (std::size_t i = 1; i < branches.size(); ++i)
      std::cerr << "  " << branches[i].get<std::string>() << "\n";
    std::cerr << "name one branch, e.g. `inflight checkpoints show "
              << branches.front().get<std::string>() << "`\n";
    return kExitUsage;
  }
  const Failure failure = failure_of(kind);
  std::cerr << "inflight: " << error << "\n" << failure.hint << "\n";
  return failure.exit_code;
}

// Run ids without a branch (exit 4) and deletions the remote refused; the
// branches that were deleted are already printed.
int report_prune_errors(const OrderedJson& result) {
  int code = 0;
  for (const auto& id : result.at("missing")) {
    std::cerr << "inflight: no checkpoint branch for '" << id.get<std::string>() << "' on "
              << result.at("url").get<std::string>() << "\n";
    code = kExitNotFound;
  }
  if (code == kExitNotFound) std::cerr << failure_of("not_found").hint << "\n";
  for (const auto& failed : result.at("failed")) {
    const auto failure = failure_of(failed.at("kind").get<std::string>());
    std::cerr << "inflight: could not delete " << failed.at("branch").get<std::string>() << ": "
              << failed.at("error").get<std::string>() << "\n"
              << failure.hint << "\n";
    code = failure.exit_code;
  }
  return code;
}

void warn_problems(const OrderedJson& result) {
  for (const auto& problem : result.value("problems", OrderedJson::array()))
    std::cerr << "inflight: skipped " << problem.get<std::string>() << "\n";
}

// The agent's summary of a branch as `list --json` shows it.
OrderedJson checkpoint_json(const OrderedJson& c) {
  return {{"run_id", c.at("run_id")},
          {"origin_pod", c.at("origin_pod")},
          {"branch", c.at("branch")},
          {"attempts", c.at("attempts")},
          {"last_checkpoint", iso_time(c.at("time").get<std::int64_t>())},
          {"records", c.at("records")},
          {"size_bytes", c.at("size_bytes")},
          {"state", c.value("state", OrderedJson("resumable"))},
          {"reason", c.value("reason", OrderedJson(nullptr))}};
}

// The table, then why each branch that will not resume here does not.
void print_checkpoints(const OrderedJson& checkpoints) {
  Table rows{{"RUN ID", "POD", "ATTEMPTS", "LAST CHECKPOINT", "RECORDS", "SIZE", "STATE"}};
  std::vector<std::string> reasons;
  for (const auto& c : checkpoints) {
    rows.push_back({c.at("run_id").get<std::string>(), c.at("origin_pod").get<std::string>(),
                    c.at("attempts").dump(), relative_age(c.at("time").get<std::int64_t>()),
                    c.at("records").dump(), human_size(c.at("size_bytes").get<std::uint64_t>()),
                    c.at("state").get<std::string>()});
    if (c.at("reason").is_string())
      reasons.push_back(c.at("branch").get<std::string>() + ": " +
                        c.at("state").get<std::string>() + ": " +
                        c.at("reason").get<std::string>());
  }
  print_table(rows);
  if (!reasons.empty()) std::cout << "\n";
  for (const auto& reason : reasons) std::cout << reason << "\n";
}

OrderedJson history_json(const OrderedJson& history) {
  OrderedJson out = OrderedJson::array();
  for (const auto& c : history)
    out.push_back({{"commit", c.at("oid")},
                   {"time", iso_time(c.at("time").get<std::int64_t>())},
                   {"reason", c.at("reason")},
                   {"attempt", c.at("attempt")},
                   {"pod", c.at("pod")},
                   {"records", c.at("records")}});
  return out;
}

void print_history(const OrderedJson& history) {
  Table rows{{"TIME", "AGE", "REASON", "ATTEMPT", "POD", "RECORDS", "COMMIT"}};
  for (const auto& c : history) {
    const auto time = c.at("time").get<std::int64_t>();
    rows.push_back({iso_time(time), relative_age(time), c.at("reason").get<std::string>(),
                    c.at("attempt").dump(), c.at("pod").get<std::string>(), c.at("records").dump(),
                    c.at("oid").get<std::string>().substr(0, 12)});
  }
  print_table(rows);
}

void print_run(const OrderedJson& run) {
  print_table({{"run", run.at("run_id").get<std::string>()},
               {"branch", run.at("branch").get<std::string>()},
               {"tip", run.at("tip").get<std::string>()},
               {"attempts", run.at("attempts").dump()},
               {"records", run.at("records").dump()},
               {"size", human_size(run.at("size_bytes").get<std::uint64_t>())}});
  std::cout << "\nhistory (newest first):\n";
  print_history(run.at("history"));
  std::cout << "\nrun-params.json:\n";
  if (run.at("run_params").is_null())
    std::cout << "(missing or not JSON: this branch was not written by inflight)\n";
  else
    std::cout << run.at("run_params").dump(2) << "\n";
}

// One agent call bounded by --git-timeout.
OrderedJson call(const StoreSettings& store, OrderedJson request) {
  return call_agent(store, store.runs_dir, std::move(request), store.git_timeout);
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
  OrderedJson request{{"op", "list"}, {"children", templates.sources()}};
  if (!pod_.empty()) request["pod"] = pod_;
  const auto result = call(store, std::move(request));
  if (!result.value("ok", false)) return report_failure(result);
  warn_problems(result);
  const auto& checkpoints = result.at("checkpoints");
  if (json_) {
    OrderedJson out = OrderedJson::array();
    for (const auto& c : checkpoints) out.push_back(checkpoint_json(c));
    std::cout << OrderedJson{{"checkpoints", out}}.dump(2) << "\n";
  } else if (checkpoints.empty()) {
    std::cout << "no checkpoints" << (pod_.empty() ? "" : " of pod " + pod_) << " on "
              << result.at("url").get<std::string>() << "\n";
  } else {
    print_checkpoints(checkpoints);
  }
  return 0;
}

int CheckpointsCommand::show(const StoreSettings& store) const {
  const auto result = call(store, {{"op", "show"}, {"run_id", run_id_}});
  if (!result.value("ok", false)) return report_failure(result);
  if (!json_) {
    print_run(result);
    return 0;
  }
  auto out = checkpoint_json(result);
  out["tip"] = result.at("tip");
  out["history"] = history_json(result.at("history"));
  out["run_params"] = result.at("run_params");
  std::cout << out.dump(2) << "\n";
  return 0;
}

OrderedJson CheckpointsCommand::prune_request() const {
  const int selectors = !older_than_.empty() + !run_ids_.empty() + all_;
  if (selectors != 1)
    throw UsageError(
        "prune needs exactly one of --older-than DURATION, --run-id ID..., --all; "
        "e.g. `inflight checkpoints prune --older-than 7d --dry-run`");
  OrderedJson request{{"op", "prune"}, {"dry_run", dry_run_}, {"all", all_}, {"run_ids", run_ids_}};
  if (older_than_.empty()) return request;
  const auto age = parse_duration(older_than_);
  if (!age)
    throw UsageError("--older-than '" + older_than_ +
                     "' is not a duration; write e.g. 90m, 12h or 7d");
  request["older_than_seconds"] = std::chrono::duration_cast<std::chrono::seconds>(*age).count();
  return request;
}

int CheckpointsCommand::prune(const StoreSettings& store) const {
  const auto result = call(store, prune_request());
  if (!result.value("ok", false)) return report_failure(result);
  warn_problems(result);
  for (const auto& branch : result.at("deleted"))
    std::cout << (dry_run_ ? "would delete " : "deleted ") << branch.get<std::string>() << "\n";
  if (result.at("deleted").empty())
    std::cout << "nothing to prune on " << result.at("url").get<std::string>() << "\n";
  return report_prune_errors(result);
}

}  // namespace inflight::app
