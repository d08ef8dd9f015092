// `inflight checkpoints list|show|prune` (docs/recovery.md "`inflight checkpoints`: list, show,
// prune"): what an operator reaches for to see and clean up checkpoint branches. Every git step
// runs in the checkpoint agent, so --git-timeout bounds each command.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "inflight/checkpoint/agent_commands.hpp"
#include "inflight/supervisor/config/settings.hpp"

namespace inflight::app {

class CheckpointsCommand {
 public:
  // `add_store_flags` gives a subcommand every store flag (--results-repo, ...).
  CheckpointsCommand(CLI::App& app, const std::function<void(CLI::App*)>& add_store_flags);
  // CLI11 holds pointers to the members: the object must stay put.
  CheckpointsCommand(const CheckpointsCommand&) = delete;
  CheckpointsCommand& operator=(const CheckpointsCommand&) = delete;

  // The subcommand that was parsed (list, show or prune), or nullptr.
  CLI::App* parsed() const;
  // Runs the parsed subcommand; returns the process exit code.
  int run(const OptionSources& sources) const;

 private:
  int list(const StoreSettings& store, const ChildTemplates& templates) const;
  int show(const StoreSettings& store) const;
  int prune(const StoreSettings& store) const;
  agent::Prune prune_request() const;

  CLI::App* list_ = nullptr;
  CLI::App* show_ = nullptr;
  CLI::App* prune_ = nullptr;
  bool json_ = false;
  std::string pod_;
  std::string run_id_;
  std::string older_than_;
  std::vector<std::string> run_ids_;
  bool all_ = false;
  bool dry_run_ = false;
  bool force_ = false;
  bool take_over_ = false;
};

}  // namespace inflight::app
