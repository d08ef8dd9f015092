// `inflight run` (docs/run.md): its
// flags, and the run they describe: a configured template with typed
// `--param`s, or an ad-hoc template from the command after `--`. Bad input is
// refused here, before anything is written or pushed.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "inflight/supervisor/config/settings.hpp"
#include "inflight/supervisor/lifecycle/one_run.hpp"

namespace inflight::app {

class RunCommand {
 public:
  // `add_settings` gives the subcommand serve's store, checkpoint, shutdown
  // and budget flags.
  RunCommand(CLI::App& app, const std::function<void(CLI::App*)>& add_settings);
  // CLI11 holds pointers to the members: the object must stay put.
  RunCommand(const RunCommand&) = delete;
  RunCommand& operator=(const RunCommand&) = delete;

  CLI::App* parsed() const { return command_->parsed() ? command_ : nullptr; }
  // Throws UsageError for bad input; returns the exit code of run_one().
  int run(const OptionSources& sources) const;

 private:
  // The ad-hoc template from the command after `--`, as the only one.
  ChildTemplates ad_hoc_template() const;
  OneRun one_run(const ChildTemplates& templates) const;

  CLI::App* command_ = nullptr;
  std::string id_;
  std::string child_;
  std::vector<std::string> params_;
  std::vector<std::string> resume_args_;
  std::string progress_file_;
  std::string stop_signal_;
  bool take_over_ = false;
  std::vector<std::string> env_;          // --env NAME=VALUE
  std::vector<std::string> inherit_env_;  // --inherit-env NAME
  std::vector<std::string> program_;      // the command after `--`
};

}  // namespace inflight::app
