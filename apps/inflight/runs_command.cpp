#include "runs_command.hpp"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "inflight/core/exit_code.hpp"
#include "inflight/supervisor/agent_client/agent_client.hpp"
#include "runs_list_cache.hpp"
#include "terminal_output.hpp"

namespace inflight::app {

namespace {

constexpr std::string_view kRunsListed =
    "`inflight runs list` shows every run the results repo knows";

// A private file for the agent to write into: a log is any bytes, and a listing of 100,000 runs
// is cheaper read from a file than from an answer.
class TempFile {
 public:
  TempFile() {
    const char* dir = std::getenv("TMPDIR");
    path_ = std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/inflight-output.XXXXXX";
    const int fd = ::mkstemp(path_.data());
    if (fd < 0) throw std::runtime_error("cannot create a temporary file in " + path_);
    ::close(fd);
  }
  ~TempFile() { ::unlink(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void print_attempts(const OrderedJson& params) {
  Table rows{{"ATTEMPT", "POD", "STARTED", "ENDED", "OUTCOME"}};
  const auto text = [](const OrderedJson& j, const char* key) {
    const auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string("-");
  };
  const auto attempts = params.find("attempts");
  if (attempts != params.end() && attempts->is_array())
    for (const auto& a : *attempts)
      if (a.is_object())
        rows.push_back({a.contains("attempt") ? a["attempt"].dump() : "-", text(a, "pod"),
                        text(a, "started_at"), text(a, "ended_at"), text(a, "outcome")});
  print_table(rows);
}

}  // namespace

RunsCommand::RunsCommand(CLI::App& app, const std::function<void(CLI::App*)>& add_store_flags) {
  auto* group = app.add_subcommand("runs", "every run the results repo knows, from any machine");
  group->require_subcommand(1);
  list_ = group->add_subcommand("list", "one row per run: live, waiting or published");
  list_->add_flag("--json", json_, "one JSON document instead of a table");
  list_->add_option("--state", state_, "only runs in this state")
      ->check(CLI::IsMember({"live", "waiting", "succeeded", "failed", "cancelled"}));
  show_ = group->add_subcommand("show", "a run's attempts and where its data is");
  show_->add_option("run_id", run_id_, "run id")->required();
  show_->add_flag("--json", json_, "one JSON document");
  logs_ = group->add_subcommand("logs", "a run's console.log (only that run is downloaded)");
  logs_->add_option("run_id", run_id_, "run id")->required();
  prune_ = group->add_subcommand("prune", "delete published results and their index entries");
  prune_->add_option("--older-than", older_than_, "finished longer ago than, e.g. 30d");
  prune_->add_option("--run-id", run_ids_, "these runs");
  prune_->add_flag("--dry-run", dry_run_, "print what would be deleted, delete nothing");
  migrate_ = group->add_subcommand(
      "migrate", "copy the index into the history layout's log, and fold the results");
  migrate_->add_flag("--dry-run", dry_run_, "count what would be copied and folded, write nothing");
  compact_ = group->add_subcommand(
      "compact", "rewrite the history layout's log as few commits, which runs list reads faster");
  compact_->add_flag("--dry-run", dry_run_, "count the commits it would write, write nothing");
  for (auto* command : {list_, show_, logs_, prune_, migrate_, compact_}) add_store_flags(command);
}

CLI::App* RunsCommand::parsed() const {
  for (auto* command : {list_, show_, logs_, prune_, migrate_, compact_})
    if (command->parsed()) return command;
  return nullptr;
}

int RunsCommand::run(const OptionSources& sources) const {
  const auto store = read_store_settings(sources);
  if (list_->parsed()) return list(store);
  if (show_->parsed()) return show(store);
  if (logs_->parsed()) return logs(store);
  if (migrate_->parsed()) return migrate(store);
  if (compact_->parsed()) return compact(store);
  return prune(store);
}

// A repo whose refs did not change since the last listing from this directory, with the same
// flags, prints that listing again (runs_list_cache.hpp).
int RunsCommand::list(const StoreSettings& store) const {
  const auto cache = cache_repo_path(store.runs_dir) / kCachedListingFile;
  const auto args = std::string(INFLIGHT_VERSION) + (json_ ? " json " : " table ") +
                    (state_.empty() ? "-" : state_) + " " +
                    checkpoint::display_url(store.results_repo);
  const auto cached = read_cached_listing(cache, args);
  const TempFile file;
  const auto reply = call_agent(
      store,
      agent::ListRuns{.state = state_,
                      .json = json_,
                      .path = file.path(),
                      .known_digest = cached ? std::optional(cached->digest) : std::nullopt});
  if (!reply) return report_failure(reply.error(), kRunsListed);
  if (reply->unchanged) {
    if (!cached)
      return report_failure(Error{Failure::other, "an unchanged listing of none", {}}, kRunsListed);
    warn_problems(cached->problems);
    std::cout << cached->output;
    return kExitSuccess;
  }
  warn_problems(reply->problems);
  std::ifstream in(file.path(), std::ios::binary);
  std::ostringstream out;
  if (!(out << in.rdbuf()))  // also when empty: a listing says "no runs" at least
    return report_failure(
        Error{Failure::other, "the listing written to " + file.path() + " could not be read", {}},
        kRunsListed);
  std::cout << out.str();
  if (!reply->digest.empty())
    keep_cached_listing(
        cache, args, {.digest = reply->digest, .problems = reply->problems, .output = out.str()});
  return kExitSuccess;
}

namespace {

// The model calls of every attempt of a run-params.json read from the
// results repo (SPEC §13 "Accounting"); nullopt when none had models or the
// file does not say.
std::optional<checkpoint::ModelCounts> model_totals(const OrderedJson& run_params) {
  if (!run_params.is_object() || !run_params.contains("attempts") ||
      !run_params["attempts"].is_array())
    return std::nullopt;
  std::optional<checkpoint::ModelCounts> total;
  for (const auto& attempt : run_params["attempts"]) {
    if (!attempt.is_object() || !attempt.contains("model")) continue;
    try {
      total = total.value_or(checkpoint::ModelCounts{}) +=
          checkpoint::model_counts_from_json(attempt["model"]);
    } catch (const std::runtime_error&) {
      continue;  // a hand-edited record: shown without it
    }
  }
  return total;
}

std::string model_line(const checkpoint::ModelCounts& m) {
  return std::to_string(m.calls) + " calls, " + std::to_string(m.replayed) +
         " replayed; tokens paid " + std::to_string(m.input_tokens) + " in, " +
         std::to_string(m.output_tokens) + " out; saved " + std::to_string(m.saved_input_tokens) +
         " in, " + std::to_string(m.saved_output_tokens) + " out";
}

}  // namespace

int RunsCommand::show(const StoreSettings& store) const {
  const auto reply = call_agent(store, agent::ShowRun{.run_id = run_id_});
  if (!reply) return report_failure(reply.error(), kRunsListed);
  if (json_) {
    const auto model = model_totals(reply->run_params);
    std::cout << OrderedJson{{"id", run_id_},
                             {"where", reply->where},
                             {"model", model ? checkpoint::to_json(*model) : OrderedJson(nullptr)},
                             {"run_params", reply->run_params}}
                     .dump(2)
              << "\n";
    return kExitSuccess;
  }
  Table rows{{"run", run_id_}, {"where", reply->where}};
  if (const auto model = model_totals(reply->run_params))
    rows.push_back({"model calls", model_line(*model)});
  print_table(rows);
  std::cout << "\nattempts:\n";
  print_attempts(reply->run_params);
  return kExitSuccess;
}

int RunsCommand::logs(const StoreSettings& store) const {
  const TempFile file;
  const auto reply = call_agent(store, agent::WriteRunLog{.run_id = run_id_, .path = file.path()});
  if (!reply) return report_failure(reply.error(), kRunsListed);
  if (!reply->found) {
    std::cerr << "inflight: run " << run_id_ << " has no console.log (" << reply->where << ")\n";
    return kExitNotFound;
  }
  std::ifstream in(file.path(), std::ios::binary);
  std::cout << in.rdbuf();
  return kExitSuccess;
}

agent::PruneRuns RunsCommand::prune_request() const {
  if (older_than_.empty() == run_ids_.empty())
    throw UsageError(
        "runs prune needs exactly one of --older-than DURATION, --run-id ID...; "
        "e.g. `inflight runs prune --older-than 30d --dry-run`");
  return {.older_than_seconds = older_than_seconds(older_than_),
          .run_ids = run_ids_,
          .dry_run = dry_run_};
}

int RunsCommand::prune(const StoreSettings& store) const {
  const auto reply = call_agent(store, prune_request());
  if (!reply) return report_failure(reply.error(), kRunsListed);
  warn_problems(reply->problems);
  for (const auto& id : reply->deleted)
    std::cout << (dry_run_ ? "would delete " : "deleted ") << id << "\n";
  if (reply->deleted.empty()) std::cout << "nothing to prune on " << reply->url << "\n";
  for (const auto& id : reply->missing)
    std::cerr << "inflight: run " << id << " is not published on " << reply->url << "\n";
  for (const auto& failed : reply->failed) std::cerr << "inflight: " << failed << "\n";
  if (!reply->failed.empty()) return kExitFailure;
  return reply->missing.empty() ? kExitSuccess : kExitNotFound;
}

// Exit 1 when the server refused an update: the log lacks the entries yet, whatever folds
// landed; running it again finishes it.
int RunsCommand::migrate(const StoreSettings& store) const {
  const auto reply = call_agent(store, agent::MigrateRuns{.dry_run = dry_run_});
  if (!reply) return report_failure(reply.error(), kRunsListed);
  warn_problems(reply->problems);
  for (const auto& failed : reply->failed) std::cerr << "inflight: not updated: " << failed << "\n";
  if (!reply->failed.empty()) return kExitFailure;
  std::cout << (dry_run_ ? "would copy " : "copied ") << reply->copied
            << " index entries into the log of " << reply->url << ", and "
            << (dry_run_ ? "fold " : "folded ") << reply->folded << " results into its archive\n";
  return kExitSuccess;
}

// Exit 1 when the log was not rewritten: not read whole, or a publish moved it meanwhile (nothing
// is lost; run it again).
int RunsCommand::compact(const StoreSettings& store) const {
  const auto reply = call_agent(store, agent::CompactRuns{.dry_run = dry_run_});
  if (!reply) return report_failure(reply.error(), kRunsListed);
  warn_problems(reply->problems);
  for (const auto& failed : reply->failed) std::cerr << "inflight: " << failed << "\n";
  if (!reply->failed.empty()) return kExitFailure;
  std::cout << "the log of " << reply->url << " lists " << reply->entries << " runs and "
            << reply->removals << " removed in " << reply->commits_before << " commits; ";
  if (reply->commits_after >= reply->commits_before)
    std::cout << "it is compact already\n";
  else
    std::cout << (dry_run_ ? "it would take " : "it now takes ") << reply->commits_after << "\n";
  return kExitSuccess;
}

}  // namespace inflight::app
