// inflight: eval-run supervisor. Parses the command line and hands over to
// the libraries; every fatal error is caught here, once.
#include <CLI/CLI.hpp>
#include <iostream>
#include <optional>

#include "commands.hpp"
#include "inflight/core/child_template.hpp"
#include "inflight/core/log.hpp"
#include "inflight/core/process_secrecy.hpp"
#include "inflight/supervisor/config/settings.hpp"

namespace {

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
  app.set_version_flag("--version", std::string("inflight ") + INFLIGHT_VERSION);
  app.require_subcommand(1);
  auto* help = app.add_subcommand("help", "show this help");
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
