// `inflight runs list|show|logs|prune|migrate` (docs/results.md "Every run of the fleet: `inflight
// runs`"): every run of the fleet from any machine with only --results-repo (and its credentials),
// through the checkpoint agent, so --git-timeout bounds each command. No config is needed: nothing
// is judged against a template.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "inflight/checkpoint/agent_commands.hpp"
#include "inflight/supervisor/config/settings.hpp"

namespace inflight::app {

class RunsCommand {
 public:
  // `add_store_flags` gives a subcommand every store flag (--results-repo, ...).
  RunsCommand(CLI::App& app, const std::function<void(CLI::App*)>& add_store_flags);
  // CLI11 holds pointers to the members: the object must stay put.
  RunsCommand(const RunsCommand&) = delete;
  RunsCommand& operator=(const RunsCommand&) = delete;

  // The subcommand that was parsed, or nullptr.
  CLI::App* parsed() const;
  // Runs the parsed subcommand; returns the process exit code.
  int run(const OptionSources& sources) const;

 private:
  int list(const StoreSettings& store) const;
  int show(const StoreSettings& store) const;
  int logs(const StoreSettings& store) const;
  int prune(const StoreSettings& store) const;
  int migrate(const StoreSettings& store) const;
  int compact(const StoreSettings& store) const;
  agent::PruneRuns prune_request() const;

  CLI::App* list_ = nullptr;
  CLI::App* show_ = nullptr;
  CLI::App* logs_ = nullptr;
  CLI::App* prune_ = nullptr;
  CLI::App* migrate_ = nullptr;
  CLI::App* compact_ = nullptr;
  bool json_ = false;
  std::string state_;
  std::string run_id_;
  std::string older_than_;
  std::vector<std::string> run_ids_;
  bool dry_run_ = false;
};

}  // namespace inflight::app
