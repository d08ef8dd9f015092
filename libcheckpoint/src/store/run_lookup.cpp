// Whether a run id is published, asked run by run: what a pod that did not read layout 2's log
// (RestoreReport::published_partial) asks before it starts a run a client named. The result refs
// are listed; a run without one is looked up in the archive by its markers (design §3.4).
#include <set>

#include "git/git_error.hpp"
#include "inflight/checkpoint/checkpoint_store.hpp"
#include "inflight/checkpoint/git_store.hpp"
#include "inflight/checkpoint/index_entry.hpp"
#include "inflight/core/branch_name.hpp"
#include "inflight/core/run_params.hpp"

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
    if (with_result.contains(run_id)) {
      run.answer = LookedUpRun::Answer::yes;
      run.entry = result_entry(run_id);
      continue;
    }
    if (!archive) continue;  // nothing was ever folded: every published run has its ref
    try {
      switch (remote_.archived(run_id)) {
        case RemoteStore::Reachable::no:
          continue;
        case RemoteStore::Reachable::unknown:
          run.answer = LookedUpRun::Answer::unknown;
          continue;
        case RemoteStore::Reachable::yes:
          run.answer = LookedUpRun::Answer::yes;
          break;
      }
      if (auto status = remote_.archived_status(run_id)) {
        IndexEntry entry;  // how it ended is all the markers say
        entry.id = run_id;
        entry.final_status = std::move(*status);
        entry.result = result_ref(run_id);
        run.entry = std::move(entry);
      }
    } catch (const GitError& e) {
      if (e.network() || e.kind() == Failure::cache) throw;
      run.answer = LookedUpRun::Answer::unknown;  // a server that serves only its tips by id
    }
  }
  return answers;
}

// The entry a published run's result makes: its run-params.json, with the result downloaded as
// `runs show` does (that run alone). nullopt when it cannot be read; the run is published all
// the same.
std::optional<IndexEntry> CheckpointStore::result_entry(const std::string& run_id) {
  try {
    const auto commit = remote_.fetch(result_ref(run_id));
    const auto text = read_file_at(cache_, commit, kRunParamsFile, kMaxRunParamsBytes);
    if (!text) return std::nullopt;
    const auto params = run_params_from_text(*text);
    if (params.run_id != run_id || !params.final_status) return std::nullopt;
    return index_entry_of(params, 0, std::nullopt);
  } catch (const GitError& e) {
    if (e.network() || e.kind() == Failure::cache) throw;
    return std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;  // a run-params.json that is not one
  }
}

}  // namespace inflight::checkpoint
