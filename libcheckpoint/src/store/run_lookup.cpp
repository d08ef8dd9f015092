// Whether a run id is published, asked run by run: what a pod that did not read layout 2's log
// (RestoreReport::published_partial) asks before it starts a run a client named. The result refs
// are listed; a run without one is looked up in the archive by its markers (design §3.4), and so
// is how a published run ended: its status marker, never its result, which may be large.
#include <set>

#include "git/git_error.hpp"
#include "inflight/checkpoint/checkpoint_store.hpp"
#include "inflight/checkpoint/git_store.hpp"
#include "inflight/checkpoint/index_entry.hpp"
#include "inflight/core/branch_name.hpp"

namespace inflight::checkpoint {

std::vector<LookedUpRun> CheckpointStore::look_up(const std::vector<std::string>& run_ids) {
  if (run_ids.size() > kMaxLookedUp)
    throw GitError(Failure::other, "a look-up of " + std::to_string(run_ids.size()) +
                                       " runs (at most " + std::to_string(kMaxLookedUp) + ")");
  std::set<std::string> with_result;
  bool archive = false;
  for (const auto& ref : remote_.list("refs/")) {
    if (auto run_id = parse_result_ref(ref.ref)) with_result.insert(std::move(*run_id));
    archive = archive || ref.ref == kArchiveRef;
  }
  std::vector<LookedUpRun> answers;
  for (const auto& run_id : run_ids) {
    auto& run = answers.emplace_back(LookedUpRun{.run_id = run_id});
    if (!is_valid_run_id(run_id)) continue;
    const bool ref = with_result.contains(run_id);
    if (ref) run.answer = LookedUpRun::Answer::yes;
    // Nothing folded: every published run has its ref, and no status marker says how it ended.
    if (!archive) continue;
    try {
      if (!ref) {
        const auto found = remote_.archived(run_id);
        if (found == RemoteStore::Reachable::no) continue;
        if (found == RemoteStore::Reachable::unknown) {
          run.answer = LookedUpRun::Answer::unknown;
          continue;
        }
        run.answer = LookedUpRun::Answer::yes;
      }
      // How it ended, once folded (a result ref's run usually is, a push after its publish).
      if (auto status = remote_.archived_status(run_id))
        run.entry = entry_of_status(run_id, std::move(*status));
    } catch (const GitError& e) {
      if (e.kind() == Failure::cache || e.kind() == Failure::auth) throw;
      if (!ref) run.answer = LookedUpRun::Answer::unknown;  // the archive could not be asked
    }
  }
  return answers;
}

}  // namespace inflight::checkpoint
