// Why a checkpoint commit was written: the word in its subject (docs/checkpoints.md "What the
// results repo holds") and the text the checkpoint agent's protocol carries. One table spells each
// reason, so the commit, the wire and the code that acts on a reason cannot drift apart.
#pragma once

#include <optional>
#include <string_view>

#include "inflight/core/word_table.hpp"

namespace inflight::checkpoint {

enum class CheckpointReason {
  shutdown,  // the owner let the run go: the next pod may take it at once
  periodic,  // a tick; skipped when the run dir did not change
  manual,    // part of the message contract; nothing writes it today
  claim,     // a new owner's compare-and-swap token
  final,     // the run is over; its branch is deleted next
};

inline constexpr WordTable<CheckpointReason, 5> kCheckpointReasons{{
    {CheckpointReason::shutdown, "shutdown"},
    {CheckpointReason::periodic, "periodic"},
    {CheckpointReason::manual, "manual"},
    {CheckpointReason::claim, "claim"},
    {CheckpointReason::final, "final"},
}};

constexpr std::string_view to_string(CheckpointReason reason) {
  return word_of(kCheckpointReasons, reason);
}

// nullopt for any text the table does not hold.
constexpr std::optional<CheckpointReason> parse_checkpoint_reason(std::string_view text) {
  return value_of(kCheckpointReasons, text);
}

}  // namespace inflight::checkpoint
