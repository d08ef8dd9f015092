// The steps of finished runs that ride a periodic push (store_types.hpp's
// ReleaseSteps): what each adds to the push, and what its ref's outcome
// says. Each step is the next push's once the one before it landed, so a
// pod whose runs finish makes no push of its own for them.
#include "inflight/checkpoint/checkpoint_store.hpp"
#include "inflight/checkpoint/index_entry.hpp"
#include "snapshot/stat_cache.hpp"
#include "store/index_commit.hpp"
#include "store/store_steps.hpp"

namespace inflight::checkpoint {

namespace {

Error step_failure(Failure kind, std::string message) {
  return {.kind = kind, .message = std::move(message), .candidates = {}};
}

// A ref that did not take its update: refused by the server's rules, or
// tried again next time.
Error unlanded(const RefUpdate& update, const RefResult& result) {
  return step_failure(result.outcome == RefOutcome::refused ? Failure::refused : Failure::other,
                      update.ref + ": " + result.detail);
}

// A branch whose update lost a race has another owner.
Error branch_failure(const RefUpdate& update, const RefResult& result) {
  if (result.outcome != RefOutcome::taken) return unlanded(update, result);
  return step_failure(Failure::rejected, update.ref + ": " + result.detail);
}

}  // namespace

CheckpointStore::ReleasePush CheckpointStore::add_release_steps(const ReleaseSteps& steps,
                                                                std::vector<RefUpdate>& updates,
                                                                SaveAllReport& report) {
  ReleasePush push;
  std::vector<IndexFile> entries;
  for (const auto& run : steps.finals) {
    report.finals.emplace_back(std::nullopt);
    push.finals.push_back(add_final(run, updates, report.finals.back(), entries));
  }
  for (const auto& final_commit : steps.indexed) {
    try {
      auto published = publication(final_commit);
      entries.emplace_back(index_path(published.run_id), std::move(published.entry));
    } catch (const std::exception& e) {
      report.index = step_failure(Failure::other, e.what());
    }
  }
  if (!entries.empty() && !report.index) report.index = Result<void>{};
  if (!entries.empty()) add_index(entries, updates, push, *report.index);
  for (const auto& run : steps.deletions) {
    push.deletions.push_back(updates.size());
    updates.push_back(
        {.ref = branch_ref({run.origin_pod, run.info.run_id}), .commit = "", .from = {}});
    report.deletions.emplace_back();
  }
  return push;
}

// The run's final state on its branch (the one this cache pushed last, when
// it was one) and its result ref on top of it. A final state over the
// restore limits is neither: the branch goes as it is.
CheckpointStore::ReleaseFinal CheckpointStore::add_final(
    const SaveRequest& run, std::vector<RefUpdate>& updates,
    Result<std::optional<std::string>>& outcome, std::vector<IndexFile>& entries) {
  ReleaseFinal final{.branch = std::nullopt, .result = std::nullopt, .run_id = run.info.run_id};
  const auto ref = branch_ref({run.origin_pod, run.info.run_id});
  try {
    auto commit = pushed_final(ref);
    if (!commit) {
      commit = snapshot(run.run_dir, run.origin_pod, run.info);
      if (commit) {
        final.branch = updates.size();
        updates.push_back({.ref = ref, .commit = *commit, .from = {}});
      } else {
        commit = remote_.last_pushed(ref);
      }
    }
    outcome = commit;
    if (!config_.publish || !commit) return final;
    auto published = publication(*commit);
    final.result = updates.size();
    updates.push_back({.ref = result_ref(run.info.run_id), .commit = published.result, .from = ""});
    entries.emplace_back(index_path(run.info.run_id), std::move(published.entry));
  } catch (const GitError& e) {
    if (e.kind() == Failure::cache || e.network()) throw;
    if (e.kind() != Failure::over_limit) outcome = e.error();
  } catch (const std::exception& e) {
    outcome = step_failure(Failure::other, e.what());
  }
  return final;
}

// One index commit with every entry, on the tip as it is now.
void CheckpointStore::add_index(const std::vector<IndexFile>& entries,
                                std::vector<RefUpdate>& updates, ReleasePush& push,
                                Result<void>& outcome) {
  try {
    push.index_base = index_tip();
    const auto index = write_index(cache_, push.index_base, entries);
    if (!index) return;  // every entry is there already
    push.index = updates.size();
    updates.push_back({.ref = std::string(kIndexRef), .commit = *index, .from = {}});
  } catch (const GitError& e) {
    if (e.kind() == Failure::cache || e.network()) throw;
    outcome = e.error();
  }
}

void CheckpointStore::judge_release_steps(const ReleaseSteps& steps, const ReleasePush& push,
                                          const std::vector<RefUpdate>& updates,
                                          const std::vector<RefResult>& results,
                                          SaveAllReport& report) {
  for (std::size_t i = 0; i < push.finals.size(); ++i)
    judge_final(push.finals[i], updates, results, report.finals[i]);
  if (push.index && results[*push.index].outcome != RefOutcome::updated)
    report.index = unlanded(updates[*push.index], results[*push.index]);
  else if (push.index)
    withdraw_entries(push, updates[*push.index].commit, report);
  for (std::size_t i = 0; i < push.deletions.size(); ++i) {
    const auto n = push.deletions[i];
    const auto& run = steps.deletions[i];
    // Its final state landed: the branch is ours, and a failure is to retry.
    if (results[n].outcome != RefOutcome::updated) {
      report.deletions[i] = unlanded(updates[n], results[n]);
      continue;
    }
    snapshotters_.erase(run.run_dir.string());
    drop_stat_cache(cache_, run.run_dir);
  }
}

// The final state and the result each landed, or the result another pod
// published holds the same run dir; a result of another run dir is refused.
void CheckpointStore::judge_final(const ReleaseFinal& final, const std::vector<RefUpdate>& updates,
                                  const std::vector<RefResult>& results,
                                  Result<std::optional<std::string>>& outcome) {
  if (!outcome) return;
  if (final.branch && results[*final.branch].outcome != RefOutcome::updated) {
    outcome = branch_failure(updates[*final.branch], results[*final.branch]);
    return;
  }
  if (!final.result) return;
  const auto& result = results[*final.result];
  if (result.outcome == RefOutcome::updated) return;
  const auto same = result.outcome == RefOutcome::taken
                        ? same_result(final.run_id, updates[*final.result].commit)
                        : std::optional<bool>();
  if (same == true) return;
  outcome = same == false ? step_failure(Failure::rejected, "run " + final.run_id +
                                                                " was published by another pod "
                                                                "first (" +
                                                                result.detail + ")")
                          : unlanded(updates[*final.result], result);
}

// An entry that landed with a run whose result or branch another instance
// holds describes the wrong run dir: put back what the index held before
// (the other pod's entry, or none), in a push of its own. Rare: the same run
// id finished on two pods, or a run fenced as it finished.
void CheckpointStore::withdraw_entries(const ReleasePush& push, const std::string& index,
                                       SaveAllReport& report) {
  std::vector<std::string> paths;
  for (std::size_t i = 0; i < push.finals.size(); ++i)
    if (report.finals[i].failed_with(Failure::rejected) && push.finals[i].result)
      paths.push_back(index_path(push.finals[i].run_id));
  if (paths.empty()) return;
  const auto reverted = index_with_paths_of(cache_, index, push.index_base, paths);
  if (!reverted) return;
  const auto landed =
      remote_.update({{.ref = std::string(kIndexRef), .commit = *reverted, .from = index}});
  if (landed[0].outcome != RefOutcome::updated)
    report.index =
        step_failure(Failure::other, "withdrawing the index entries of runs another pod holds: " +
                                         landed[0].detail);
}

}  // namespace inflight::checkpoint
