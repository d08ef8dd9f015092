// The steps of finished runs that ride a periodic push (store_types.hpp's
// ReleaseSteps): what each adds to the push, and what its ref's outcome
// says. Each step is the next push's once the one before it landed, so a
// pod whose runs finish makes no push of its own for them.
#include "git/cache_repo_impl.hpp"
#include "git/git_error.hpp"
#include "git/git_handle.hpp"
#include "git/markers.hpp"
#include "git/oid_text.hpp"
#include "git/repo_objects.hpp"
#include "inflight/checkpoint/checkpoint_store.hpp"
#include "inflight/checkpoint/index_entry.hpp"
#include "inflight/core/clock.hpp"
#include "snapshot/stat_cache.hpp"
#include "store/archive_fold.hpp"
#include "store/index_commit.hpp"
#include "store/runs_index.hpp"
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
  return step_failure(failure_of(result.outcome), update.ref + ": " + result.detail);
}

}  // namespace

CheckpointStore::ReleasePush CheckpointStore::add_release_steps(const ReleaseSteps& steps,
                                                                std::vector<RefUpdate>& updates,
                                                                SaveAllReport& report) {
  ReleasePush push;
  std::vector<RunEntry> entries;
  for (const auto& run : steps.finals) {
    report.finals.emplace_back(std::nullopt);
    push.finals.push_back(add_final(run, updates, report.finals.back(), entries));
  }
  for (const auto& final_commit : steps.indexed) {
    try {
      auto indexed = publication(final_commit);
      push.indexed.emplace_back(indexed.run_id, indexed.result);
      entries.push_back(std::move(indexed.entry));
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
  push.fold = add_fold(updates);
  return push;
}

// The run's final state on its branch (the one this cache pushed last, when
// it was one) and its result ref on top of it. A final state over the
// restore limits is neither: the branch goes as it is.
CheckpointStore::ReleaseFinal CheckpointStore::add_final(
    const SaveRequest& run, std::vector<RefUpdate>& updates,
    Result<std::optional<std::string>>& outcome, std::vector<RunEntry>& entries) {
  ReleaseFinal final{.branch = std::nullopt, .result = std::nullopt, .run_id = run.info.run_id};
  const auto ref = branch_ref({run.origin_pod, run.info.run_id});
  try {
    auto commit = pushed_final(ref);
    if (!commit) {
      commit = snapshot(run.run_dir, run.origin_pod, run.info);
      if (commit) {
        final.branch = updates.size();
        updates.push_back(checkpoint_update(run, *commit));
      } else {
        commit = remote_.last_pushed(ref);
      }
    }
    outcome = commit;
    if (!config_.publish || !commit) return final;
    auto published = publication(*commit);
    final.result = updates.size();
    updates.push_back({.ref = result_ref(run.info.run_id), .commit = published.result, .from = ""});
    final.entry = published.entry.entry;
    entries.push_back(std::move(published.entry));
  } catch (const GitError& e) {
    if (e.kind() == Failure::cache || e.network()) throw;
    if (e.kind() != Failure::over_limit) outcome = e.error();
  } catch (const std::exception& e) {
    outcome = step_failure(Failure::other, e.what());
  }
  return final;
}

// One index update with every entry: a commit on layout 1's index as it is now, or a delta of
// layout 2's log.
void CheckpointStore::add_index(const std::vector<RunEntry>& entries,
                                std::vector<RefUpdate>& updates, ReleasePush& push,
                                Result<void>& outcome) {
  try {
    push.target = index_target();
    auto update = index_update(cache_, push.target, entries);
    if (!update) return;  // every entry is there already
    push.index = updates.size();
    updates.push_back(std::move(*update));
  } catch (const GitError& e) {
    if (e.kind() == Failure::cache || e.network()) throw;
    outcome = e.error();
  } catch (const std::exception& e) {
    outcome = step_failure(Failure::other, e.what());
  }
}

void CheckpointStore::judge_release_steps(const ReleaseSteps& steps, const ReleasePush& push,
                                          const std::vector<RefUpdate>& updates,
                                          const std::vector<RefResult>& results,
                                          SaveAllReport& report) {
  std::vector<Standing> standing;  // each final's result: landed with its final state
  for (std::size_t i = 0; i < push.finals.size(); ++i)
    standing.push_back(judge_final(push.finals[i], updates, results, report.finals[i]));
  const bool indexed = push.index && results[*push.index].outcome == RefOutcome::updated;
  if (push.index && !indexed) report.index = unlanded(updates[*push.index], results[*push.index]);
  take_back(push, updates, results, standing, indexed, report);
  judge_fold(push.fold, results);  // before the records of this push: one may name a folded run
  if (indexed && push.target.log) {
    for (std::size_t i = 0; i < push.finals.size(); ++i)
      if (standing[i].stands)
        record_for_fold(push.finals[i].run_id,
                        standing[i].served.value_or(updates[*push.finals[i].result].commit));
    for (const auto& [run_id, result] : push.indexed) record_for_fold(run_id, result);
  }
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
// Whether the result stands: landed, with its final state.
CheckpointStore::Standing CheckpointStore::judge_final(
    const ReleaseFinal& final, const std::vector<RefUpdate>& updates,
    const std::vector<RefResult>& results, Result<std::optional<std::string>>& outcome) {
  if (!outcome) return {};
  if (final.branch && results[*final.branch].outcome != RefOutcome::updated) {
    outcome = branch_failure(updates[*final.branch], results[*final.branch]);
    return {};
  }
  if (!final.result) return {};
  const auto& result = results[*final.result];
  if (result.outcome == RefOutcome::updated) return {.stands = true};
  std::optional<HeldResult> held;
  try {
    if (result.outcome == RefOutcome::taken)
      held = held_result(final.run_id, updates[*final.result].commit);
  } catch (const GitError& e) {
    // What this push landed stands; the comparison is made again next time.
    outcome = step_failure(Failure::other, e.what());
    return {};
  }
  if (held && held->same) return {.stands = true, .served = held->commit};
  outcome = held ? step_failure(Failure::rejected, "run " + final.run_id +
                                                       " was published by another pod first (" +
                                                       result.detail + ")")
                 : unlanded(updates[*final.result], result);
  return {};
}

// What this push published for a run that does not stand is taken back, in
// a push of its own: a result it created for a run whose branch another
// instance took, and each index entry whose result did not land (layout 1's
// entry goes back to what the index held before: the other pod's, or none;
// layout 2's log takes the entry of the result that stands, or a removal,
// and the entry of a run that stands with another pod's result commit names
// that commit). Rare: a run fenced as it finished, the same run id finished
// on two pods, a result the server refused. What cannot be taken back is
// said in the index's outcome; a line that cannot be worked out holds back
// neither the others nor the results to delete.
void CheckpointStore::take_back(const ReleasePush& push, const std::vector<RefUpdate>& updates,
                                const std::vector<RefResult>& results,
                                const std::vector<Standing>& standing, bool indexed,
                                SaveAllReport& report) {
  std::vector<RefUpdate> undo;
  std::vector<std::string> paths;
  std::string lines;
  std::optional<std::string> failure;
  const bool log = indexed && push.target.log;
  for (std::size_t i = 0; i < push.finals.size(); ++i) {
    const auto& final = push.finals[i];
    if (!final.result) continue;
    if (standing[i].stands) {
      if (log && standing[i].served && final.entry) {
        auto entry = *final.entry;
        entry.result_commit = standing[i].served;
        lines += write_index_line(entry);
      }
      continue;
    }
    const bool created = results[*final.result].outcome == RefOutcome::updated;
    if (log) {
      try {
        lines += standing_line(final.run_id, created);
      } catch (const GitError& e) {
        failure = std::string("the entry of run ") + final.run_id + ": " + e.what();
      }
    }
    if (indexed && !push.target.log) paths.push_back(index_path(final.run_id));
    const auto& update = updates[*final.result];
    if (report.finals[i].failed_with(Failure::rejected) && created)
      undo.push_back({.ref = update.ref, .commit = "", .from = update.commit});
  }
  try {
    if (!lines.empty()) undo.push_back(runs_log_delta(std::move(lines)));
    if (!paths.empty())
      if (const auto index = updates[*push.index].commit;
          const auto reverted = index_with_paths_of(cache_, index, push.target.flat_tip, paths))
        undo.push_back({.ref = std::string(kIndexRef), .commit = *reverted, .from = index});
    if (!undo.empty())
      for (const auto& result : remote_.update(undo))
        if (result.outcome != RefOutcome::updated) failure = result.detail;
  } catch (const GitError& e) {
    failure = e.what();
  }
  if (failure)
    report.index = step_failure(
        Failure::other, "taking back what was published for runs that do not stand: " + *failure);
}

// The log line that sets a run's entry right once this push published it and the result does
// not stand: a removal when the result the push created is ours (taken back in the same push, or
// left for the release's next try), else the entry of the result another pod holds, or a removal
// when none is there or it cannot be read.
std::string CheckpointStore::standing_line(const std::string& run_id, bool ours_created) {
  if (ours_created) return write_removal_line(run_id);
  try {
    const auto theirs = remote_.fetch(result_ref(run_id));
    const CommitHandle result = lookup_commit(raw_repo(cache_), theirs);
    if (git_commit_parentcount(result.get()) == 0) return write_removal_line(run_id);
    auto entry = publication(oid_hex(*git_commit_parent_id(result.get(), 0))).entry.entry;
    entry.result_commit = theirs;
    return write_index_line(entry);
  } catch (const GitError& e) {
    if (e.network() || e.kind() == Failure::cache) throw;
  } catch (const std::exception&) {
    // Not a result this code could have written: nothing of it is listed.
  }
  return write_removal_line(run_id);
}

void CheckpointStore::record_for_fold(const std::string& run_id, const std::string& result) {
  cache_.remember_pushed(fold_record(run_id), result);
}

// Every result this pod published into layout 2's log and has not folded yet, up to
// kRunsFoldedPerPush: folded by this push, on the archive as the server has it. A record whose
// result the cache cannot read, or whose run cannot have markers, is dropped: its result ref
// keeps the result reachable. And the result refs whose fold landed longer ago than the
// retention: deleted, each expected to hold the result folded (the unref).
CheckpointStore::FoldPush CheckpointStore::add_fold(std::vector<RefUpdate>& updates) {
  FoldPush fold;
  for (const auto& [record, result] : cache_.pushed_under(std::string(kFoldRecordPrefix))) {
    if (fold.runs.size() == kRunsFoldedPerPush) break;
    const auto run_id = record.substr(kFoldRecordPrefix.size());
    try {
      const auto text = read_file_at(cache_, result, kRunParamsFile, kMaxRunParamsBytes);
      const auto status = text ? run_params_from_text(*text).final_status : std::nullopt;
      if (!status || !makes_markers(run_id, *status)) throw std::runtime_error("no markers");
      fold.runs.push_back({.run_id = run_id, .result = result, .final_status = *status});
    } catch (const GitError& e) {
      if (e.kind() == Failure::cache) throw;
      cache_.forget_pushed(record);
    } catch (const std::exception&) {
      cache_.forget_pushed(record);
    }
  }
  if (!fold.runs.empty()) {
    fold.at = updates.size();
    updates.push_back(archive_fold(fold.runs));
  }
  add_unrefs(fold, updates);
  return fold;
}

void CheckpointStore::add_unrefs(FoldPush& fold, std::vector<RefUpdate>& updates) {
  const auto now = SystemClock::to_time_t(SystemClock::now());
  for (const auto& [record, result] : cache_.pushed_under(std::string(kFoldedRecordPrefix))) {
    if (fold.unrefs.size() == kUnrefsPerPush) break;
    const auto folded = parse_folded_record(record);
    if (!folded) {
      cache_.forget_pushed(record);
      continue;
    }
    if (now - folded->unix_seconds < config_.results_ref_retention.count()) continue;
    fold.unrefs.emplace_back(updates.size(), record);
    updates.push_back({.ref = result_ref(folded->run_id), .commit = "", .from = result});
  }
}

// A fold that did not land is carried again by the next push, on the tip the server has then;
// one that landed leaves a folded record for the unref. A result ref deleted, or gone or moved
// already (pruned, published again), is done with; one the server refused is tried again.
void CheckpointStore::judge_fold(const FoldPush& fold, const std::vector<RefResult>& results) {
  if (fold.at && results[*fold.at].outcome == RefOutcome::updated) {
    const auto now = SystemClock::to_time_t(SystemClock::now());
    for (const auto& run : fold.runs) {
      cache_.forget_pushed(fold_record(run.run_id));
      cache_.remember_pushed(folded_record(run.run_id, now), run.result);
    }
  }
  for (const auto& [at, record] : fold.unrefs)
    if (results[at].outcome == RefOutcome::updated || results[at].outcome == RefOutcome::taken)
      cache_.forget_pushed(record);
}

}  // namespace inflight::checkpoint
