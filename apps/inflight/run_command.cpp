// See run_command.hpp.
#include "run_command.hpp"

#include "inflight/core/bounded_json.hpp"
#include "inflight/core/branch_name.hpp"
#include "inflight/core/log.hpp"
#include "inflight/core/process_secrecy.hpp"

namespace inflight::app {

RunCommand::RunCommand(CLI::App& app, const std::function<void(CLI::App*)>& add_settings) {
  command_ = app.add_subcommand(
      "run", "run one eval in the foreground: restored, checkpointed and published as by serve");
  // Each repeatable option takes one word per use: `--env A=B -- PROGRAM -c`
  // leaves `--` and what follows to the command.
  command_->add_option("--id", id_, "the run's id (letters, digits, '.', '_', '-')")
      ->type_name("RUN_ID")
      ->required();
  command_->add_option("--child", child_, "the child template of --config (default: default)")
      ->type_name("NAME");
  command_
      ->add_option("--param", params_,
                   "a param of the template, typed as declared; an array param repeats it")
      ->allow_extra_args(false)
      ->type_name("KEY=VALUE");
  command_
      ->add_option("--resume-arg", resume_args_,
                   "with a command after --: appended when the run resumes; repeatable")
      ->allow_extra_args(false)
      ->type_name("ARG");
  command_
      ->add_option("--progress-file", progress_file_,
                   "with a command after --: its JSON-lines records, in the run dir")
      ->type_name("PATH");
  command_
      ->add_option("--stop-signal", stop_signal_,
                   "with a command after --: what stops it (default SIGTERM)")
      ->type_name("SIG");
  command_
      ->add_option("--env", env_,
                   "with a command after --: a variable of the child, {run_id}, {output_dir}, "
                   "{attempt}, {model_url:NAME} and {model_key} filled in; repeatable")
      ->allow_extra_args(false)
      ->type_name("NAME=VALUE");
  command_
      ->add_option("--inherit-env", inherit_env_,
                   "with a command after --: a variable of inflight's environment the child also "
                   "gets; repeatable")
      ->allow_extra_args(false)
      ->type_name("NAME");
  command_->add_flag("--take-over", take_over_,
                     "take the run from another pod's live lease or claim at once; make sure "
                     "that pod is gone");
  command_->add_option("command", program_,
                       "PROGRAM [ARG...] after --; {run_id}, {output_dir} and {attempt} are "
                       "filled in");
  add_settings(command_);
}

int RunCommand::run(const OptionSources& sources) const {
  if (!checkpoint::is_valid_run_id(id_))
    throw UsageError("--id: '" + printable(id_) + "' is not a run id (it must match " +
                     std::string(checkpoint::kRunIdPattern) + ")");
  const bool configured = sources.given("config").has_value();
  if (program_.empty() && (!resume_args_.empty() || !progress_file_.empty() ||
                           !stop_signal_.empty() || !env_.empty() || !inherit_env_.empty()))
    throw UsageError(
        "--resume-arg, --progress-file, --stop-signal, --env and --inherit-env go with a "
        "command after --");
  if (program_.empty() && !configured)
    throw UsageError("no command: give PROGRAM [ARG...] after --, or --config with a template");
  if (!program_.empty() && (!child_.empty() || !params_.empty()))
    throw UsageError(
        "a command after -- and a configured template (--child, --param) at once: give one "
        "(with a command, --config is read for its `models` only)");
  auto settings = read_resume_settings(sources);
  if (!program_.empty()) {
    settings.children = ad_hoc_template();
    try {
      settings.children.check_models(model_specs(settings.models));
    } catch (const ConfigError& e) {
      throw UsageError("the command after --: " + std::string(e.what()));
    }
    settings.store.withheld_variables = withheld_variables(settings.children, settings.models);
  }
  const auto what = one_run(settings.children);
  hide_environment_secrets(settings.store.withheld_variables);
  log::set_format(settings.store.log_format);
  return run_one(settings, what);
}

ChildTemplates RunCommand::ad_hoc_template() const {
  OrderedJson child{{"argv", program_}};
  if (!resume_args_.empty()) child["resume_argv"] = resume_args_;
  if (!progress_file_.empty()) child["progress_file"] = progress_file_;
  if (!stop_signal_.empty()) child["stop_signal"] = stop_signal_;
  if (!inherit_env_.empty()) child["inherit_env"] = inherit_env_;
  OrderedJson env = OrderedJson::object();
  for (const auto& assignment : env_) {
    const auto equals = assignment.find('=');
    if (equals == std::string::npos || equals == 0)
      throw UsageError("--env '" + printable(assignment) + "' is not NAME=VALUE");
    env[assignment.substr(0, equals)] = assignment.substr(equals + 1);
  }
  if (!env.empty()) child["env"] = env;
  try {
    return ChildTemplates::from_config({{"child", child}}, "");
  } catch (const ConfigError& e) {
    throw UsageError("the command after --: " + std::string(e.what()));
  }
}

// The submit's body, validated exactly as a submit is.
OneRun RunCommand::one_run(const ChildTemplates& templates) const {
  const auto name = child_.empty() ? std::string(checkpoint::kDefaultTemplate) : child_;
  const ChildTemplate* child = templates.find(name);
  if (!child)
    throw UsageError("--child: no template named '" + printable(name) +
                     "' (configured: " + templates.names() + ")");
  OneRun what{.id = id_, .request = OrderedJson::object(), .take_over = take_over_};
  for (const auto& word : params_)
    if (const auto problem = child->add_param_word(what.request, word))
      throw UsageError("--param " + printable(word) + ": " + problem->param + " " +
                       problem->message);
  if (const auto problem = child->validate(what.request))
    throw UsageError("--param: " + problem->param + " " + problem->message);
  if (!child_.empty()) what.request["child"] = child_;
  return what;
}

}  // namespace inflight::app
