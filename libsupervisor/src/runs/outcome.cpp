#include "inflight/supervisor/runs/outcome.hpp"

#include <sys/wait.h>

#include <algorithm>

#include "inflight/core/word_table.hpp"

namespace inflight {

namespace {

constexpr WordTable<Outcome, 6> kNames{{
    {Outcome::succeeded, "succeeded"},
    {Outcome::failed, "failed"},
    {Outcome::interrupted, "interrupted"},
    {Outcome::cancelled, "cancelled"},
    {Outcome::crashed, "crashed"},
    {Outcome::deferred, "deferred"},
}};

constexpr WordTable<Budget, 2> kBudgetNames{{
    {Budget::attempts, "attempts"},
    {Budget::interruptions, "interruptions"},
}};

}  // namespace

std::string_view to_string(Budget budget) {
  return word_of(kBudgetNames, budget);
}

std::string_view to_string(Outcome outcome) {
  return word_of(kNames, outcome);
}

std::optional<Outcome> outcome_from_string(std::string_view text) {
  return value_of(kNames, text);
}

bool is_resumable(Outcome outcome) {
  return outcome == Outcome::interrupted || outcome == Outcome::crashed ||
         outcome == Outcome::deferred;
}

ExitStatus decode_wait_status(int wait_status) {
  if (WIFEXITED(wait_status)) return {WEXITSTATUS(wait_status), std::nullopt};
  if (WIFSIGNALED(wait_status)) return {std::nullopt, WTERMSIG(wait_status)};
  return {};
}

// A signal we sent decides first, whatever the exit code: a tool that pauses
// on it and exits 0 has work left, and must be resumed, never published as
// finished.
Outcome classify(const ExitStatus& status, StopCause cause, std::span<const int> retry_exit_codes) {
  if (cause == StopCause::shutdown) return Outcome::interrupted;
  if (cause == StopCause::cancel) return Outcome::cancelled;
  if (status.exit_code == 0) return Outcome::succeeded;
  if (status.signal) return Outcome::crashed;
  if (std::find(retry_exit_codes.begin(), retry_exit_codes.end(), *status.exit_code) !=
      retry_exit_codes.end())
    return Outcome::deferred;
  return Outcome::failed;
}

}  // namespace inflight
