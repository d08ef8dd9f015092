// The exit codes of every command (docs/recovery.md "Exit codes of every command"), in one place:
// the app's commands and `inflight resume` return the same numbers for the same cases.
#pragma once

namespace inflight {

inline constexpr int kExitSuccess = 0;
inline constexpr int kExitFailure = 1;      // runtime failure; serve: a checkpoint did not land
inline constexpr int kExitUsage = 2;        // bad flags, config or target
inline constexpr int kExitUnreachable = 3;  // remote unreachable or credentials refused
inline constexpr int kExitNotFound = 4;
// `inflight run`: not finished, its latest state landed: run the same command
// again (EX_TEMPFAIL; a Job's podFailurePolicy can ignore it).
inline constexpr int kExitTryAgain = 75;

}  // namespace inflight
