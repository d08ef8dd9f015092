// The steps of finished runs that ride a periodic push (store_types.hpp's
// ReleaseSteps): what each adds to the push, and what its ref's outcome
// says. Each step is the next push's once the one before it landed, so a
// pod whose runs finish makes no push of its own for them, but for layout 2's
// upkeep (tend_archive()).
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
  std::optional<Error> unlisted;  // the look at the layout failed: no index update this time
  if (config_.publish && (!steps.finals.empty() || !steps.indexed.empty())) try {
      push.target = index_target();
    } catch (const GitError& e) {
      if (e.kind() == Failure::cache || e.network()) throw;
      unlisted = e.error();
    }
  for (const auto& run : steps.finals) {
    report.finals.emplace_back(std::nullopt);
    push.finals.push_back(
        add_final(run, push.target, unlisted, updates, report.finals.back(), entries));
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
  if (!entries.empty() && !report.index)
    report.index = unlisted ? Result<void>(*unlisted) : Result<void>{};
  if (!entries.empty() && !unlisted) add_index(entries, updates, push, *report.index);
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
    const SaveRequest& run, const IndexTarget& target, const std::optional<Error>& unlisted,
    std::vector<RefUpdate>& updates, Result<std::optional<std::string>>& outcome,
    std::vector<RunEntry>& entries) {
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
    // Without the look at the archive, a create could make a second result: the next tick.
    if (auto failure = unlisted ? unlisted : folded_elsewhere(target, run.info.run_id)) {
      outcome = std::move(*failure);
      return final;
    }
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
// keeps the result reachable.
CheckpointStore::FoldPush CheckpointStore::add_fold(std::vector<RefUpdate>& updates) {
  FoldPush fold;
  for (const auto& [record, result] : cache_.pushed_under(std::string(kFoldRecordPrefix))) {
    if (fold.runs.size() == kRunsFoldedPerPush) break;
    const auto run_id = record.substr(kFoldRecordPrefix.size());
    try {
      const auto text = read_file_at(cache_, result, kRunParamsFile, kMaxRunParamsBytes);
      const auto status = text ? run_params_from_text(*text).final_status : std::nullopt;
      if (!status || !makes_markers(run_id, *status)) throw std::runtime_error("no markers");
      fold.runs.push_back(
          {.run_id = run_id, .result = result, .final_status = *status, .marked = true});
    } catch (const GitError& e) {
      if (e.kind() == Failure::cache) throw;
      cache_.forget_pushed(record);
    } catch (const std::exception&) {
      cache_.forget_pushed(record);
    }
  }
  if (fold.runs.empty()) return fold;
  fold.at = updates.size();
  updates.push_back(archive_fold(fold.runs));
  return fold;
}

// A fold that landed leaves a folded record for the unref, unless this pod keeps every result ref
// for pods of earlier releases (--results-layout 1), and lets the next folds ride pushes. A refusal
// makes the next fold go alone: a hook declines a whole push, for any ref of it. A fold refused
// alone is the archive's refusal, and is not asked again: those results keep their refs, as in
// layout 1. Any other is pushed again, on the tip the server has then.
void CheckpointStore::judge_fold(const FoldPush& fold, const std::vector<RefResult>& results) {
  if (!fold.at) return;
  const auto outcome = results[*fold.at].outcome;
  if (outcome == RefOutcome::updated)
    cache_.remember_pushed(std::string(kFoldsTakenRecord), fold.runs.front().result);
  if (outcome == RefOutcome::refused) cache_.forget_pushed(std::string(kFoldsTakenRecord));
  if (outcome != RefOutcome::updated && !(outcome == RefOutcome::refused && fold.alone)) return;
  const auto now = SystemClock::to_time_t(SystemClock::now());
  for (const auto& run : fold.runs) {
    cache_.forget_pushed(fold_record(run.run_id));
    if (outcome == RefOutcome::updated && config_.results_layout == 2)
      cache_.remember_pushed(folded_record(run.run_id, now), run.result);
  }
}

// The fold a push of checkpoints carries: none until the server took one from this cache.
CheckpointStore::FoldPush CheckpointStore::riding_fold(std::vector<RefUpdate>& updates) {
  if (cache_.pushed_under(std::string(kFoldsTakenRecord)).empty()) return {};
  return add_fold(updates);
}

// Layout 2's upkeep once a push landed (docs/results.md "The history layout"), never in a
// shutdown's budget: the fold of the results this pod published, where no push carries it yet,
// then the unref of those whose retention passed, each in a push of its own, so that a server
// that refuses either (a hook declines a whole push) refuses no checkpoint. Nothing of it fails
// the caller, whose push landed, but a cache that cannot be read.
void CheckpointStore::tend_archive() {
  if (cache_.pushed_under(std::string(kFoldsTakenRecord)).empty()) fold_published();
  unref_folded();
}

void CheckpointStore::fold_published() try {
  std::vector<RefUpdate> updates;
  auto fold = add_fold(updates);
  if (updates.empty()) return;
  fold.alone = true;
  judge_fold(fold, remote_.update(updates));
} catch (const GitError& e) {
  if (e.kind() == Failure::cache) throw;  // else the records stay, for the next upkeep
} catch (const std::exception&) {
  // The records stay: the next push's upkeep folds them.
}

namespace {

// The folded records whose retention passed, one per run (two agents may each have folded it):
// the deletions that unref them, and every record each deletion settles.
struct DueUnrefs {
  std::vector<RefUpdate> deletions;
  std::vector<std::vector<std::string>> records;  // per deletion
};

DueUnrefs due_unrefs(CacheRepo& cache, std::chrono::seconds retention) {
  DueUnrefs due;
  std::map<std::string, std::size_t> by_run;
  const auto now = SystemClock::to_time_t(SystemClock::now());
  for (const auto& [record, result] : cache.pushed_under(std::string(kFoldedRecordPrefix))) {
    const auto folded = parse_folded_record(record);
    if (!folded) {
      cache.forget_pushed(record);
      continue;
    }
    // A record dated ahead of this clock (set back since) counts from now.
    if (now - std::min(folded->unix_seconds, now) < retention.count()) continue;
    if (const auto seen = by_run.find(folded->run_id); seen != by_run.end()) {
      due.records[seen->second].push_back(record);
      continue;
    }
    if (due.deletions.size() == kUnrefsPerPush) continue;
    by_run.emplace(folded->run_id, due.deletions.size());
    due.deletions.push_back({.ref = result_ref(folded->run_id), .commit = "", .from = result});
    due.records.push_back({record});
  }
  return due;
}

}  // namespace

// The unref (docs/results.md "The history layout"): the result refs of runs this pod folded
// longer ago than the retention are deleted, each expected at the result folded, in a push of
// their own, so that a server that refuses them (a hook declines a whole push) refuses nothing
// else. Only where the server serves a marker by id: the same lookup is what keeps a later
// publish of the run from making a second result (folded_elsewhere()). A deletion done, or moot
// (the ref moved or went: a prune, a publish again), or refused, is never asked again; one
// unwritten is asked at the next push. Nothing of it fails the caller, whose push landed.
void CheckpointStore::unref_folded() try {
  if (config_.results_layout != 2) return;  // folded with an earlier setting: the refs stay
  auto due = due_unrefs(cache_, config_.results_ref_retention);
  if (due.deletions.empty()) return;
  const auto forget = [&](std::size_t i) {
    for (const auto& record : due.records[i]) cache_.forget_pushed(record);
  };
  const auto run_id = *parse_result_ref(due.deletions.front().ref);
  const auto served = remote_.archived(run_id);
  if (served != RemoteStore::Reachable::yes) {
    // No marker by id (the refs stay, as in layout 1), or not this one (an archive rebuilt).
    for (std::size_t i = 0; i < due.deletions.size(); ++i)
      if (served == RemoteStore::Reachable::unknown || i == 0) forget(i);
    return;
  }
  const auto results = remote_.update(due.deletions);
  for (std::size_t i = 0; i < results.size(); ++i)
    if (results[i].outcome != RefOutcome::unwritten) forget(i);
} catch (const std::exception&) {
  // The push before it landed, and its report must reach the caller: the next push asks again.
}

}  // namespace inflight::checkpoint
