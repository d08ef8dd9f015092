// Turns the parsed command line into settings and runs the chosen command.
#include "commands.hpp"

#include "inflight/core/log.hpp"
#include "inflight/core/process_secrecy.hpp"
#include "inflight/supervisor/lifecycle/resume.hpp"
#include "inflight/supervisor/lifecycle/serve.hpp"
#include "inflight/supervisor/process/sibling_binaries.hpp"

namespace inflight::app {

CommandLine::CommandLine(CLI::App& app) {
  serve_ =
      app.add_subcommand("serve", "run the HTTP API, supervise eval children, checkpoint them");
  add_settings(serve_, OptionGroup::store);
  add_settings(serve_, OptionGroup::run);
  add_settings(serve_, OptionGroup::serve);
  resume_ = app.add_subcommand("resume", "restore one run and run it in the foreground");
  resume_->add_option("target", resume_target_, "RUN_ID or inflight/<pod>/<run-id> branch")
      ->required();
  resume_->add_flag("--restore-only", resume_flags_.restore_only,
                    "stop once the run dir is restored");
  resume_->add_flag("--take-over", resume_flags_.take_over,
                    "take the run even while another pod's lease or claim is present (a "
                    "one-shot command cannot watch it end); make sure that pod is gone");
  add_settings(resume_, OptionGroup::store);
  add_settings(resume_, OptionGroup::run);
  const auto add_store_flags = [this](CLI::App* command) {
    add_settings(command, OptionGroup::store);
  };
  run_ = std::make_unique<RunCommand>(app, [this](CLI::App* command) {
    add_settings(command, OptionGroup::store);
    add_settings(command, OptionGroup::run);
  });
  checkpoints_ = std::make_unique<CheckpointsCommand>(app, add_store_flags);
  runs_ = std::make_unique<RunsCommand>(app, add_store_flags);
}

// CLI11 only collects the text: OptionSources reads the environment, the
// config file and the table's default, so that the precedence stays its own.
void CommandLine::add_settings(CLI::App* command, OptionGroup group) {
  auto& values = values_[command];
  for (const auto* spec : options_of(group))
    command->add_option(spec->flag(), values[spec->name], help_text(*spec))
        ->type_name(spec->type_word);
}

OptionSources CommandLine::sources(CLI::App* command) const {
  std::map<std::string, std::string> given;
  for (const auto& [name, value] : values_.at(command))
    if (command->get_option("--" + name)->count() > 0) given[name] = value;
  OrderedJson file = OrderedJson::object();
  auto config = given.count("config")
                    ? std::optional(given["config"])
                    : OptionSources::process_env(option_spec("config").env_name());
  if (config && !config->empty()) file = OptionSources::load_config_file(*config);
  return OptionSources(std::move(given), std::move(file), &OptionSources::process_env);
}

int CommandLine::run() {
  // Every command runs its git steps in the agent: a missing one stops it
  // now (exit 2), not at its first network step.
  checkpoint_agent_binary();
  // Once read, the secrets leave what the kernel shows of this process; the
  // children's `${NAME}` variables are known once the templates are read.
  if (serve_->parsed()) {
    const auto settings = read_serve_settings(sources(serve_));
    hide_environment_secrets(settings.store.withheld_variables);
    log::set_format(settings.store.log_format);
    return serve(settings);
  }
  if (auto* command = checkpoints_->parsed()) {
    hide_environment_secrets({});  // no children here: inflight's own variables only
    return checkpoints_->run(sources(command));
  }
  if (auto* command = runs_->parsed()) {
    hide_environment_secrets({});
    return runs_->run(sources(command));
  }
  if (auto* command = run_->parsed()) return run_->run(sources(command));
  if (resume_->parsed()) {
    const auto settings = read_resume_settings(sources(resume_));
    hide_environment_secrets(settings.store.withheld_variables);
    log::set_format(settings.store.log_format);
    return resume(settings, resume_target_, resume_flags_);
  }
  return kExitUsage;
}

}  // namespace inflight::app
