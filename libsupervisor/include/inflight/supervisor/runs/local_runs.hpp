// Runs left on local disk by an earlier instance (a persistent volume).
#pragma once

#include <filesystem>
#include <vector>

#include "inflight/core/child_templates.hpp"
#include "inflight/supervisor/checkpoint_port.hpp"

namespace inflight {

// Run dirs under runs_dir whose run is not over: the last attempt was
// interrupted, crashed or never recorded its end, or no attempt started.
std::vector<RestoredRun> find_resumable_runs(const std::filesystem::path& runs_dir);
// Run dirs under runs_dir whose run is over for good (docs/results.md): shown by the API until
// --keep-finished ends.
std::vector<RestoredRun> find_finished_runs(const std::filesystem::path& runs_dir);

// Makes a restored run dir ready for its next attempt: a torn last record of
// the progress file is dropped, and an attempt that never recorded its end
// (its instance died) is marked crashed when `pod` (this one) ran it, a
// restart of its own, and interrupted when another pod did: that pod was
// lost (a node gone, SIGKILL past the grace period), which is no fault of
// the run's (docs/serve.md "The two budgets").
void prepare_for_resume(RestoredRun& run, const ChildTemplates& templates, const std::string& pod);

class RunSupervisor;
// Prepares and adopts restored runs, oldest first so that they keep their
// submission order in the queue; returns how many were adopted.
std::size_t adopt_restored(RunSupervisor& supervisor, const ChildTemplates& templates,
                           std::vector<RestoredRun> runs);

}  // namespace inflight
