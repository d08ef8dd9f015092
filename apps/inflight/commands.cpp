#include "commands.hpp"

#include "inflight/supervisor/agent_client.hpp"
#include "inflight/supervisor/log.hpp"
#include "inflight/supervisor/serve.hpp"

namespace inflight::app {

CommandLine::CommandLine(CLI::App& app) {
  serve_ =
      app.add_subcommand("serve", "run the HTTP API, supervise eval children, checkpoint them");
  add_settings(serve_, kStoreFlags);
  add_settings(serve_, kServeFlags);
  // Internal: serve runs every git network step through it (no group: hidden).
  agent_ = app.add_subcommand("checkpoint-agent", "")->group("");
}

void CommandLine::add_settings(CLI::App* command, const std::vector<FlagSpec>& flags) {
  auto& values = values_[command];
  for (const auto& flag : flags)
    command->add_option(std::string("--") + flag.name, values[flag.name], flag.help);
}

OptionSources CommandLine::sources(CLI::App* command) const {
  std::map<std::string, std::string> given;
  for (const auto& [name, value] : values_.at(command))
    if (command->get_option("--" + name)->count() > 0) given[name] = value;
  OrderedJson file = OrderedJson::object();
  auto config = given.count("config") ? std::optional(given["config"])
                                      : OptionSources::process_env("INFLIGHT_CONFIG");
  if (config && !config->empty()) file = OptionSources::load_config_file(*config);
  return OptionSources(std::move(given), std::move(file), &OptionSources::process_env);
}

int CommandLine::run() {
  if (serve_->parsed()) {
    const auto settings = read_serve_settings(sources(serve_));
    log::set_format(settings.store.log_format);
    return serve(settings);
  }
  if (agent_->parsed()) return run_checkpoint_agent();
  return kExitUsage;
}

}  // namespace inflight::app
