// `inflight resume`: an operator's recovery of one run in the foreground.
#pragma once

#include <string>

#include "inflight/supervisor/config/settings.hpp"
#include "inflight/supervisor/runs/run_supervisor.hpp"
#include "inflight/supervisor/store/checkpoint_port.hpp"

namespace inflight {

struct ResumeFlags {
  // Stop once the run dir is materialised and its branch claimed.
  bool restore_only = false;
  // Take the run even from a pod whose lease is present, or from another
  // command's claim: a one-shot command cannot watch a lease for its term.
  bool take_over = false;
};

// The supervisor of a command that runs one run in the foreground (`resume`,
// `run`): one child at a time, its output echoed to the terminal.
SupervisorSettings foreground_supervision(const ResumeSettings& settings,
                                          const std::filesystem::path& runs_dir,
                                          Containment containment);

// Whether a take-over's restore lost its claim to the holder's checkpoint,
// landed between the listing and the claim, and should claim the new tip at
// once (logged): waiting would leave the run to the holder it means to take.
bool claim_again(const RestoreResult& result, bool take_over, const std::string& run_id);

// `inflight resume RUN_ID|BRANCH`: restores one run exactly as serve does on
// start, runs its next attempt in the foreground with its output streamed,
// and returns the child's exit code (3 when the store refused or could not be
// reached, 4 when there is no such run).
int resume(const ResumeSettings& settings, const std::string& target, ResumeFlags flags);

}  // namespace inflight
