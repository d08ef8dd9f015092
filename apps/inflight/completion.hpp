// `inflight completion bash|zsh`: a shell completion script made from the
// command line itself, so that it names every command and flag there is.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace inflight::app {

// The script for `shell` (bash or zsh); nullopt for another shell.
std::optional<std::string> completion_script(const CLI::App& app, std::string_view shell);

}  // namespace inflight::app
