// `inflight resume`: an operator's recovery of one run in the foreground.
#pragma once

#include <string>

#include "inflight/supervisor/config/settings.hpp"

namespace inflight {

// `inflight resume RUN_ID|BRANCH`: restores one run exactly as serve does on
// start, runs its next attempt in the foreground with its output streamed,
// and returns the child's exit code (3 when the store refused or could not be
// reached, 4 when there is no such run). With restore_only it stops once the
// run dir is materialised and its branch claimed.
int resume(const ResumeSettings& settings, const std::string& target, bool restore_only);

}  // namespace inflight
