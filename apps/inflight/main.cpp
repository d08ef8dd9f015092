// inflight: eval-run supervisor. Parses the command line and hands over to
// the libraries; every fatal error is caught here, once.
#include <CLI/CLI.hpp>
#include <iostream>
#include <optional>

#include "commands.hpp"
#include "completion.hpp"
#include "inflight/core/child_template.hpp"
#include "inflight/core/log.hpp"
#include "inflight/core/process_secrecy.hpp"
#include "inflight/supervisor/config/settings.hpp"

namespace {

// CLI11 answers a missing command, and a word it did not know where a
// command was due, with "A subcommand is required": name the word and what
// it could have been. nullopt for a missing option, which CLI11 names.
std::optional<std::string> command_error(const CLI::App& app) {
  const CLI::App* level = &app;
  while (!level->get_subcommands().empty()) level = level->get_subcommands().front();
  std::string commands;
  for (const auto* command : level->get_subcommands({}))
    commands += (commands.empty() ? "" : ", ") + command->get_name();
  if (commands.empty()) return std::nullopt;
  const std::string where = level->get_parent() ? level->get_name() + ": " : "";
  const auto rest = level->remaining();
  if (rest.empty()) return where + "a command is required (one of: " + commands + ")";
  if (rest.front().starts_with("-")) return where + "unknown option '" + rest.front() + "'";
  return where + "unknown command '" + rest.front() + "' (one of: " + commands + ")";
}

// The command line, parsed; nullopt to go on, else the exit code.
std::optional<int> parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::RequiredError& e) {
    const auto error = command_error(app);
    if (!error) {
      app.exit(e);
      return inflight::kExitUsage;
    }
    std::cerr << "inflight: " << *error << "\nRun with --help for more information.\n";
    return inflight::kExitUsage;
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return inflight::kExitUsage;
  }
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything reads a secret: children run as the same user.
  inflight::forbid_inspection();
  CLI::App app{"inflight: keeps eval runs alive across pod restarts"};
  const std::string version = std::string("inflight ") + INFLIGHT_VERSION;
  app.set_version_flag("-V,--version", version);
  app.require_subcommand(1);
  auto* help = app.add_subcommand("help", "show this help");
  auto* version_command = app.add_subcommand("version", "print the version");
  std::string shell;
  auto* completion = app.add_subcommand("completion", "print a shell completion script");
  completion->add_option("shell", shell, "bash or zsh")->required();
  inflight::app::CommandLine command_line(app);
  const auto parse_exit = parse(app, argc, argv);
  // CLI11 holds its own copies now; /proc/<pid>/cmdline shows argv to anyone.
  inflight::blank_flag_values(argc, argv, {"--git-token", "--api-token"});
  if (parse_exit) return *parse_exit;
  if (help->parsed()) {
    // app.help() would describe the `help` subcommand itself once it is parsed.
    std::cout << app.get_formatter()->make_help(&app, app.get_name(), CLI::AppFormatMode::Normal);
    return inflight::kExitSuccess;
  }
  if (version_command->parsed()) {
    std::cout << version << "\n";
    return inflight::kExitSuccess;
  }
  if (completion->parsed()) {
    const auto script = inflight::app::completion_script(app, shell);
    if (!script) {
      std::cerr << "inflight: completion: unknown shell '" << shell << "' (bash or zsh)\n";
      return inflight::kExitUsage;
    }
    std::cout << *script;
    return inflight::kExitSuccess;
  }
  try {
    return command_line.run();
  } catch (const inflight::UsageError& e) {
    std::cerr << "inflight: " << e.what() << "\n";
    return inflight::kExitUsage;
  } catch (const inflight::ConfigError& e) {
    std::cerr << "inflight: config: " << e.what() << "\n";
    return inflight::kExitUsage;
  } catch (const std::exception& e) {
    inflight::log::error("fatal", {{"error", e.what()}});
    return inflight::kExitFailure;
  }
}
