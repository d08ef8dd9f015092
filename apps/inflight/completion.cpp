// See completion.hpp. One bash function serves both shells: zsh runs it
// through its bashcompinit layer. It walks the words typed so far, following
// those that name a command of the level reached, and offers that level's
// commands and flags.
#include "completion.hpp"

namespace inflight::app {

namespace {

// Each level's commands and flags, as bash associative-array entries.
void add_level(const CLI::App& level, const std::string& path, std::string& commands,
               std::string& flags) {
  std::string names;
  for (const auto* command : level.get_subcommands({})) {
    names += (names.empty() ? "" : " ") + command->get_name();
    add_level(*command, path + " " + command->get_name(), commands, flags);
  }
  std::string options;
  for (const auto* option : level.get_options()) {
    for (const auto& name : option->get_snames()) options += " -" + name;
    for (const auto& name : option->get_lnames()) options += " --" + name;
  }
  commands += "    [\"" + path + "\"]=\"" + names + "\"\n";
  flags += "    [\"" + path + "\"]=\"" + options.substr(options.empty() ? 0 : 1) + "\"\n";
}

}  // namespace

std::optional<std::string> completion_script(const CLI::App& app, std::string_view shell) {
  if (shell != "bash" && shell != "zsh") return std::nullopt;
  std::string commands;
  std::string flags;
  add_level(app, "inflight", commands, flags);  // bash has no empty keys
  std::string script = "# inflight " + std::string(shell) + " completion: " +
                       (shell == "bash" ? "source it, or put it where bash-completion looks"
                                        : "source it from .zshrc, after compinit") +
                       ".\n";
  if (shell == "zsh") script += "autoload -U +X bashcompinit && bashcompinit\n";
  script += "_inflight() {\n  local -A commands=(\n" + commands + "  )\n  local -A flags=(\n" +
            flags +
            "  )\n"
            "  local level=inflight word i\n"
            "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
            "    word=${COMP_WORDS[i]}\n"
            "    if [[ \" ${commands[$level]} \" == *\" $word \"* ]]; then\n"
            "      level=\"$level $word\"\n"
            "    fi\n"
            "  done\n"
            "  COMPREPLY=($(compgen -W \"${commands[$level]} ${flags[$level]}\" -- "
            "\"${COMP_WORDS[COMP_CWORD]}\"))\n"
            "}\n"
            "complete -F _inflight inflight\n";
  return script;
}

}  // namespace inflight::app
