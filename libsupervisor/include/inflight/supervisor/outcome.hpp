// How an attempt ended, read from the native wait status. A signal we sent is
// not a crash: "interrupted" and "cancelled" are outcomes of their own.
#pragma once

#include <optional>
#include <string_view>

namespace inflight {

enum class Outcome { succeeded, failed, interrupted, cancelled, crashed };

// Why the supervisor signalled the child's group, if it did.
enum class StopCause { none, shutdown, cancel };

std::string_view to_string(Outcome outcome);
std::optional<Outcome> outcome_from_string(std::string_view text);

// Interrupted and crashed runs are resumed; the others are finished.
bool is_resumable(Outcome outcome);

struct ExitStatus {
  std::optional<int> exit_code;  // set when the child exited by itself
  std::optional<int> signal;     // set when a signal killed it
};

ExitStatus decode_wait_status(int wait_status);

Outcome classify(const ExitStatus& status, StopCause cause);

}  // namespace inflight
