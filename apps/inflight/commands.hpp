// The inflight command line: its subcommands and the options each one takes
// from the options table.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <memory>
#include <string>

#include "checkpoints_command.hpp"
#include "inflight/core/exit_code.hpp"
#include "inflight/supervisor/config/settings.hpp"
#include "inflight/supervisor/lifecycle/resume.hpp"
#include "run_command.hpp"
#include "runs_command.hpp"

namespace inflight::app {

// Registers every subcommand and runs the one that was parsed.
class CommandLine {
 public:
  explicit CommandLine(CLI::App& app);
  int run();

 private:
  // Registers the options of `group` as string options of `command`,
  // collected into values_.
  void add_settings(CLI::App* command, OptionGroup group);
  OptionSources sources(CLI::App* command) const;

  CLI::App* serve_ = nullptr;
  std::unique_ptr<CheckpointsCommand> checkpoints_;
  std::unique_ptr<RunsCommand> runs_;
  std::unique_ptr<RunCommand> run_;
  CLI::App* resume_ = nullptr;
  std::string resume_target_;
  ResumeFlags resume_flags_;
  std::map<CLI::App*, std::map<std::string, std::string>> values_;
};

}  // namespace inflight::app
