// `inflight run` (docs/run.md): one
// run in the foreground, with serve's restore, lease, checkpoints, shutdown
// and publishing, for a Kubernetes Job, a CI step or a laptop.
#pragma once

#include <string>

#include "inflight/core/child_template.hpp"
#include "inflight/supervisor/config/settings.hpp"

namespace inflight {

struct OneRun {
  std::string id;
  // The submit's body: its params, typed, and `child` when one is named.
  OrderedJson request = OrderedJson::object();
  // Take the run from a live lease or claim at once, instead of waiting for
  // that record's term to pass unchanged.
  bool take_over = false;
};

// Restores the run's branch (or local copy) when there is one, else starts
// attempt 1; returns 0 when it succeeded and is published (now or before),
// 1 when it failed or was cancelled (published) or nothing of it could be
// saved, 3 when the results repo could not be reached at start, 75 when it is
// not finished and its latest state landed (the same command resumes it).
int run_one(const ResumeSettings& settings, const OneRun& run);

}  // namespace inflight
