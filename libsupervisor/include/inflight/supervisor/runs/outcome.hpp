// How an attempt ended, read from the native wait status. A signal we sent is
// not a crash: "interrupted" and "cancelled" are outcomes of their own.
#pragma once

#include <optional>
#include <span>
#include <string_view>

namespace inflight {

// `deferred`: the child exited with one of its template's retry_exit_codes
// ("run me again later": rate limited, preempted).
enum class Outcome { succeeded, failed, interrupted, cancelled, crashed, deferred };
inline constexpr Outcome kAllOutcomes[] = {Outcome::succeeded,   Outcome::failed,
                                           Outcome::interrupted, Outcome::cancelled,
                                           Outcome::crashed,     Outcome::deferred};

// The two budgets of a run (docs/serve.md "The two budgets"): --max-attempts counts the
// attempts that ended by its own doing, --max-interruptions the others.
enum class Budget { attempts, interruptions };
std::string_view to_string(Budget budget);

// Why the supervisor signalled the child's group, if it did.
enum class StopCause { none, shutdown, cancel };

std::string_view to_string(Outcome outcome);
std::optional<Outcome> outcome_from_string(std::string_view text);

// Interrupted, crashed and deferred runs are resumed; the others are finished.
bool is_resumable(Outcome outcome);

struct ExitStatus {
  std::optional<int> exit_code;  // set when the child exited by itself
  std::optional<int> signal;     // set when a signal killed it
};

ExitStatus decode_wait_status(int wait_status);

Outcome classify(const ExitStatus& status, StopCause cause,
                 std::span<const int> retry_exit_codes = {});

}  // namespace inflight
