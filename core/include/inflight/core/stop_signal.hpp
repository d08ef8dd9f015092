// The signals a child template may name as its `stop_signal` (docs/serve.md "The config file and
// the child templates"): what the child's process group gets at a stop and at shutdown. Some tools
// save their progress only on one of them (promptfoo: SIGINT).
#pragma once

#include <csignal>
#include <optional>
#include <string_view>

#include "inflight/core/word_table.hpp"

namespace inflight {

inline constexpr WordTable<int, 6> kStopSignals{{
    {SIGTERM, "SIGTERM"},
    {SIGINT, "SIGINT"},
    {SIGHUP, "SIGHUP"},
    {SIGQUIT, "SIGQUIT"},
    {SIGUSR1, "SIGUSR1"},
    {SIGUSR2, "SIGUSR2"},
}};

// nullopt for any name outside kStopSignals.
inline std::optional<int> stop_signal_named(std::string_view name) {
  return value_of(kStopSignals, name);
}

}  // namespace inflight
