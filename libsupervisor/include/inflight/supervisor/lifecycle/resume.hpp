// `inflight resume`: an operator's recovery of one run in the foreground.
#pragma once

#include <string>

#include "inflight/supervisor/config/settings.hpp"
#include "inflight/supervisor/runs/run_supervisor.hpp"

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

// `inflight resume RUN_ID|BRANCH`: restores one run exactly as serve does on
// start, runs its next attempt in the foreground with its output streamed,
// and returns the child's exit code (3 when the store refused or could not be
// reached, 4 when there is no such run).
int resume(const ResumeSettings& settings, const std::string& target, ResumeFlags flags);

}  // namespace inflight
