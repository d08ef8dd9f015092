// Saving runs to the results repo: one run, many runs in one push, and the
// release of a finished run. Restore is in restore.cpp.
#include "inflight/checkpoint/checkpoint_store.hpp"

#include <algorithm>

#include "git/cache_sweep.hpp"
#include "git/repo_objects.hpp"
#include "inflight/core/run_dir.hpp"
#include "snapshot/stat_cache.hpp"
#include "store/store_steps.hpp"

namespace inflight::checkpoint {

namespace fs = std::filesystem;

CheckpointStore::CheckpointStore(StoreConfig config)
    : config_(std::move(config)), cache_(config_.cache_dir), remote_(cache_, config_.remote) {
  if (config_.sweep_temp_after.count() > 0)
    swept_ = sweep_temp_files(config_.cache_dir, config_.sweep_temp_after);
}

Result<std::optional<std::string>> CheckpointStore::save(const fs::path& run_dir,
                                                         const std::string& origin_pod,
                                                         const CheckpointInfo& info) {
  try {
    const auto commit = snapshot(run_dir, origin_pod, info);
    if (commit) remote_.push(branch_ref({origin_pod, info.run_id}), *commit);
    return commit;
  } catch (const GitError& e) {
    return e.error();
  }
}

// A commit of run_dir on top of what this cache last pushed to its branch;
// each run dir keeps its snapshotter, for the stat cache.
std::optional<std::string> CheckpointStore::snapshot(const fs::path& run_dir,
                                                     const std::string& origin_pod,
                                                     const CheckpointInfo& info) {
  auto [it, inserted] = snapshotters_.try_emplace(run_dir.string(), cache_, config_.exclude_globs,
                                                  config_.restore_limits);
  return it->second.snapshot(run_dir, info,
                             remote_.last_pushed(branch_ref({origin_pod, info.run_id})));
}

SaveAllReport CheckpointStore::save_all(const std::vector<SaveRequest>& runs,
                                        const std::optional<LeaseStep>& lease,
                                        const ReleaseSteps& release) {
  std::vector<SaveOutcome> snapshots;
  for (const auto& run : runs) snapshots.push_back(snapshot_to_save(run));
  return push_saved(runs, std::move(snapshots), lease, release);
}

SaveOutcome CheckpointStore::snapshot_to_save(const SaveRequest& run) {
  SaveOutcome outcome;
  try {
    outcome.commit = snapshot(run.run_dir, run.origin_pod, run.info);
  } catch (const GitError& e) {
    if (e.kind() == Failure::cache) throw;
    outcome.error = e.what();
    outcome.snapshot_failure = e.kind();
  } catch (const std::exception& e) {
    outcome.error = e.what();
    outcome.snapshot_failure = Failure::other;
  }
  outcome.left_out = left_out(run.run_dir);
  return outcome;
}

SaveAllReport CheckpointStore::push_saved(const std::vector<SaveRequest>& runs,
                                          std::vector<SaveOutcome> snapshots,
                                          const std::optional<LeaseStep>& lease,
                                          const ReleaseSteps& release) {
  SaveAllReport report{.runs = std::move(snapshots), .rewritten = {}, .lease_error = std::nullopt};
  std::vector<RefUpdate> updates;
  // A renewal goes first and a release last: the server applies a push's refs one after the
  // other, and a pod listing in between must never see a branch of this push without the lease
  // that holds it (a pod that let its lease go takes it again with a run's first push).
  std::optional<std::size_t> lease_at;
  if (lease && !lease->release) {
    lease_at = updates.size();
    updates.push_back(lease_update(cache_, remote_, lease->lease));
  }
  const std::size_t first_run = updates.size();
  std::vector<std::size_t> pushed;  // index of each run update's run
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& commit = report.runs[i].commit;
    if (!commit) continue;
    updates.push_back(checkpoint_update(runs[i], *commit));
    pushed.push_back(i);
  }
  const auto steps = add_release_steps(release, updates, report);
  const bool shutdown = lease && lease->release;
  const auto fold = shutdown ? FoldPush{} : riding_fold(updates);
  const bool unsaved = std::any_of(report.runs.begin(), report.runs.end(),
                                   [](const SaveOutcome& outcome) { return outcome.error; });
  if (shutdown && unsaved) {
    report.lease_error = "not released: a run could not be saved";
  } else if (shutdown) {
    lease_at = updates.size();
    updates.push_back({.ref = lease_ref(lease->lease.pod), .commit = "", .from = {}});
  }
  if (updates.empty()) {
    if (!shutdown) tend_archive();  // due or not, with no push of its own to ride
    return report;
  }
  auto results = remote_.update(updates);
  judge_fold(fold, results);  // before the records of this push: one may name a folded run
  judge_release_steps(release, steps, updates, results, report);
  if (!shutdown) tend_archive();  // not in a shutdown's budget
  build_on_rewritten(runs, pushed, first_run, updates, results, report);
  for (std::size_t n = 0; n < pushed.size(); ++n) {
    const auto& result = results[first_run + n];
    report.runs[pushed[n]].ref = result.outcome;
    if (result.outcome != RefOutcome::updated)
      report.runs[pushed[n]].error = updates[first_run + n].ref + ": " + result.detail;
  }
  if (!lease_at) return report;
  report.lease_error = lease->release ? undo_release(results[*lease_at], report, lease->lease)
                                      : renew_taken_lease(results[*lease_at], lease->lease);
  return report;
}

// A run's checkpoint, fast-forward only; once this cache pushed its branch,
// a branch gone while the run's result is there was released by the pod
// that took and finished the run (RefUpdate::result).
RefUpdate CheckpointStore::checkpoint_update(const SaveRequest& run, const std::string& commit) {
  auto ref = branch_ref({run.origin_pod, run.info.run_id});
  auto result =
      remote_.last_pushed(ref) ? std::optional(result_ref(run.info.run_id)) : std::nullopt;
  return {.ref = std::move(ref), .commit = commit, .from = {}, .result = std::move(result)};
}

// Whether `commit` is a checkpoint of run `run_id`: its message and its
// run-params.json say so. A claim by another instance is one; a commit an
// operator force-pushed by hand is not.
bool CheckpointStore::checkpoint_of(const std::string& commit, const std::string& run_id) {
  if (parse_checkpoint_message(commit_summary(cache_, commit).message).run_id != run_id)
    return false;
  const auto text = read_file_at(cache_, commit, kRunParamsFile, kMaxRunParamsBytes);
  try {
    return text && run_params_from_text(*text).run_id == run_id;
  } catch (const std::exception&) {
    return false;
  }
}

// A taken branch whose tip is no checkpoint of its run was rewritten by
// someone, not claimed: the run stays this pod's, and its checkpoint goes on
// top of that tip (a second parent; history is read along first parents).
void CheckpointStore::build_on_rewritten(const std::vector<SaveRequest>& runs,
                                         const std::vector<std::size_t>& pushed,
                                         std::size_t first_run, std::vector<RefUpdate>& updates,
                                         std::vector<RefResult>& results, SaveAllReport& report) {
  std::vector<std::size_t> again;  // positions in updates
  std::vector<RefUpdate> merged;
  for (std::size_t n = 0; n < pushed.size(); ++n) {
    const auto at = first_run + n;
    if (results[at].outcome != RefOutcome::taken) continue;
    try {
      const auto tip = remote_.fetch(updates[at].ref);
      if (checkpoint_of(tip, runs[pushed[n]].info.run_id)) continue;
      merged.push_back({.ref = updates[at].ref,
                        .commit = merge_onto(cache_, updates[at].commit, tip),
                        .from = tip});
      again.push_back(at);
    } catch (const GitError& e) {
      if (e.network()) throw;
    }
  }
  if (merged.empty()) return;
  const auto landed = remote_.update(merged);
  for (std::size_t m = 0; m < again.size(); ++m) {
    const auto at = again[m];
    updates[at] = merged[m];
    results[at] = landed[m];
    report.runs[pushed[at - first_run]].commit = merged[m].commit;
    report.rewritten.push_back(merged[m].ref);
  }
}

// A run that another instance took is its business; one whose ref the
// server refused (or a local results repo could not write) is still this
// pod's, and its last state is on this disk only: the lease is taken again,
// so that no restore takes the run from an older tip.
std::optional<std::string> CheckpointStore::undo_release(const RefResult& result,
                                                         const SaveAllReport& report,
                                                         const Lease& lease) {
  if (result.outcome != RefOutcome::updated)
    return lease_ref(lease.pod) + " not released: " + result.detail;
  const bool refused =
      std::any_of(report.runs.begin(), report.runs.end(), [](const SaveOutcome& outcome) {
        return outcome.ref == RefOutcome::refused || outcome.ref == RefOutcome::unwritten;
      });
  if (!refused) return std::nullopt;
  try {
    hold_lease(cache_, remote_, lease);
  } catch (const GitError& e) {
    if (e.network()) throw;
    return std::string("released, and not taken again after a refused run: ") + e.what();
  }
  return "taken again: a run was refused or could not be written";
}

// A lease tip this cache did not write (a restart on a fresh disk) is renewed
// on the remote's tip; one that was refused or unwritten stays as it is.
std::optional<std::string> CheckpointStore::renew_taken_lease(const RefResult& result,
                                                              const Lease& lease) {
  if (result.outcome == RefOutcome::updated) return std::nullopt;
  if (result.outcome != RefOutcome::taken) return lease_ref(lease.pod) + ": " + result.detail;
  try {
    hold_lease(cache_, remote_, lease);
    return std::nullopt;
  } catch (const GitError& e) {
    if (e.network()) throw;
    return e.what();
  }
}

LeftOut CheckpointStore::left_out(const fs::path& run_dir) const {
  const auto it = snapshotters_.find(run_dir.string());
  return it == snapshotters_.end() ? LeftOut{} : it->second.left_out();
}

void CheckpointStore::persist() {
  cache_.persist();
  try {
    for (auto& [dir, snapshotter] : snapshotters_) snapshotter.keep_stat_cache();
  } catch (const std::exception& e) {
    throw GitError(Failure::cache, std::string("keeping the stat cache: ") + e.what());
  }
}

std::optional<std::string> CheckpointStore::pushed_final(const std::string& ref) {
  const auto last = remote_.last_pushed(ref);
  if (!last || !cache_.contains(*last)) return std::nullopt;
  if (parse_checkpoint_message(commit_summary(cache_, *last).message).reason !=
      CheckpointReason::final)
    return std::nullopt;
  return last;
}

namespace {

Error release_failure(Failure kind, std::string message) {
  return {.kind = kind, .message = std::move(message), .candidates = {}};
}

}  // namespace

std::vector<Result<void>> CheckpointStore::release(const std::vector<SaveRequest>& runs) {
  std::vector<Result<void>> answers(runs.size(), Result<void>{});
  const auto finals = push_final_states(runs, answers);
  if (config_.publish) {
    std::vector<std::string> commits;
    std::vector<std::size_t> published;  // the run of each commit
    for (std::size_t i = 0; i < runs.size(); ++i)
      if (answers[i] && finals[i]) {
        commits.push_back(*finals[i]);
        published.push_back(i);
      }
    const auto outcomes = publish(commits);
    for (std::size_t n = 0; n < outcomes.size(); ++n)
      if (!outcomes[n]) answers[published[n]] = outcomes[n].error();
  }
  for (std::size_t i = 0; i < runs.size(); ++i)
    if (answers[i]) {
      snapshotters_.erase(runs[i].run_dir.string());
      drop_stat_cache(cache_, runs[i].run_dir);
    }
  delete_branches(runs, answers);
  return answers;
}

// Each run's final checkpoint: the one this cache pushed last when its last
// push was one (a release tried again publishes it, not a new one), else a
// snapshot, all pushed at once. A final state over the restore limits cannot
// be pushed, and no retry mends it: nullopt, and the branch goes without it
// (the local run dir says the run is over), rather than stay for another pod
// to run the run again.
std::vector<std::optional<std::string>> CheckpointStore::push_final_states(
    const std::vector<SaveRequest>& runs, std::vector<Result<void>>& answers) {
  std::vector<std::optional<std::string>> finals(runs.size());
  std::vector<RefUpdate> updates;
  std::vector<std::size_t> pushed;  // the run of each update
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& run = runs[i];
    const auto ref = branch_ref({run.origin_pod, run.info.run_id});
    if ((finals[i] = pushed_final(ref))) continue;
    try {
      const auto commit = snapshot(run.run_dir, run.origin_pod, run.info);
      finals[i] = commit ? commit : remote_.last_pushed(ref);
      if (!commit) continue;
      updates.push_back(checkpoint_update(run, *commit));
      pushed.push_back(i);
    } catch (const GitError& e) {
      if (e.kind() == Failure::cache) throw;
      if (e.kind() != Failure::over_limit) answers[i] = e.error();
    }
  }
  if (updates.empty()) return finals;
  const auto results = remote_.update(updates);
  for (std::size_t n = 0; n < pushed.size(); ++n) {
    const auto& result = results[n];
    if (result.outcome == RefOutcome::updated) continue;
    answers[pushed[n]] =
        release_failure(failure_of(result.outcome), updates[n].ref + ": " + result.detail);
  }
  return finals;
}

// The branches of the runs whose release went well so far, in one push of
// their own, after their results landed; the fold into layout 2's archive rides it, or follows it
// alone (tend_archive()). The final push landed, so each branch is ours: a refused deletion is a
// failure to retry, not another owner.
void CheckpointStore::delete_branches(const std::vector<SaveRequest>& runs,
                                      std::vector<Result<void>>& answers) {
  std::vector<RefUpdate> updates;
  std::vector<std::size_t> deleted;  // the run of each update
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (!answers[i]) continue;
    updates.push_back(
        {.ref = branch_ref({runs[i].origin_pod, runs[i].info.run_id}), .commit = "", .from = {}});
    deleted.push_back(i);
  }
  if (updates.empty()) return tend_archive();
  const auto fold = riding_fold(updates);
  const auto results = remote_.update(updates);
  judge_fold(fold, results);
  tend_archive();
  for (std::size_t n = 0; n < deleted.size(); ++n)
    if (results[n].outcome != RefOutcome::updated)
      answers[deleted[n]] = release_failure(
          results[n].outcome == RefOutcome::refused ? Failure::refused : Failure::other,
          "deleting the branch: " + results[n].detail);
}

}  // namespace inflight::checkpoint
