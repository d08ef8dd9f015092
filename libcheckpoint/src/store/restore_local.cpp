// Restore and this disk's copies: a finished run published (its branch's
// final state, or one that only this disk holds), and a run that only this
// disk holds pushed to a branch of its own (restore.cpp).
#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "git/cache_repo_impl.hpp"
#include "git/git_error.hpp"
#include "git/repo_objects.hpp"
#include "inflight/checkpoint/branch_listing.hpp"
#include "inflight/checkpoint/checkpoint_store.hpp"
#include "inflight/checkpoint/run_listing.hpp"
#include "inflight/core/bounded_json.hpp"
#include "inflight/core/run_dir.hpp"
#include "snapshot/run_dir_writers.hpp"
#include "snapshot/tree_validation.hpp"
#include "store/restore_push.hpp"
#include "store/store_steps.hpp"

namespace inflight::checkpoint {

namespace fs = std::filesystem;

namespace {

// What the final checkpoint of this disk's copy of a finished run says.
CheckpointInfo final_info(const fs::path& dir, const RunParams& params,
                          const RestoreRequest& request) {
  const auto verdict = request.judge(params);
  return {.run_id = params.run_id,
          .attempt = static_cast<int>(params.attempts.size()),
          .reason = CheckpointReason::final,
          .pod = request.pod,
          .records = records_of(dir, verdict),
          .total = verdict.progress_total};
}

}  // namespace

// A finished run's branch (its tip `final_commit` carries the final state):
// published, with StoreConfig::publish, then deleted in the restore's push.
// One whose run id another pod published first is kept for an operator.
void CheckpointStore::publish_finished(const RemoteBranch& branch, const std::string& final_commit,
                                       RestorePush& push, RestoreReport& report) {
  if (config_.publish) {
    // A run only an index entry holds (layout 2 deletes a folded result's ref) is published only
    // as the result the entry names: the same commit again, never a second result.
    const auto run_id = parse_branch_ref(branch.ref)->run_id;
    const auto entry = push.published.find(run_id);
    std::map<std::string, std::string> logged;
    if (entry != push.published.end() && entry->second) logged.emplace(run_id, *entry->second);
    // A run the archive holds, or may, whose entry was not read (looked_up_runs,
    // unread_log_runs): read now, for the result it names, in this rare case of a leftover final
    // branch.
    if (logged.empty() && push.unsure && maybe_published(push, run_id)) {
      std::vector<std::string> unread;  // a bad entry is the listing's to report, not this branch's
      auto indexed = read_indexes(cache_, remote_, remote_.list("refs/"), unread);
      if (const auto found = indexed.entries.find(run_id); found != indexed.entries.end())
        logged.emplace(run_id, found->second.result_commit.value_or(""));
    }
    if (const auto published = publish({final_commit}, logged).front(); !published) {
      const auto& error = published.error();
      if (network_failure(error.kind)) throw GitError(error.kind, error.message);
      throw std::runtime_error("kept, not published: " + error.message);
    }
  }
  push.add({.ref = branch.ref, .commit = "", .from = final_commit},
           [&report, branch](const RefResult& result) {
             if (result.outcome != RefOutcome::updated)
               return report.problems.push_back(printable(branch.ref) + ": " + result.detail);
             report.released.push_back(short_branch(branch.ref));
           });
}

// Finished run dirs with neither a branch nor a result: an earlier release
// of inflight (or --publish off) released them without publishing. Each is
// published from the final checkpoint this cache pushed, or from its run dir;
// not one this cache published already (its result was pruned on purpose).
void CheckpointStore::publish_local_finished(const std::vector<RemoteBranch>& listing,
                                             const RestoreRequest& request, RestorePush& push,
                                             RestoreReport& report) {
  if (!config_.publish) return;
  std::set<std::string> branched;
  for (const auto& ref : listing)
    if (const auto name = parse_branch_ref(ref.ref)) branched.insert(name->run_id);
  std::vector<std::string> commits, ids;
  for (const auto& run_id : request.finished) {
    if (branched.contains(run_id) || push.published.contains(run_id) ||
        remote_.last_pushed(result_ref(run_id)))
      continue;
    // Where no entry was read, a run the archive holds is published already.
    if (maybe_published(push, run_id) && push.archived(run_id)) continue;
    for_one_ref(run_id, report.problems, [&] {
      if (const auto commit = local_final(request, run_id)) {
        commits.push_back(*commit);
        ids.push_back(run_id);
      }
    });
  }
  const auto outcomes = publish(commits);
  for (std::size_t i = 0; i < outcomes.size(); ++i)
    if (!outcomes[i])
      report.problems.push_back(ids[i] + ": not published: " + outcomes[i].error().message);
}

// The final checkpoint of a finished run dir: the one this cache pushed to
// its branch, or a commit of the dir as it is.
std::optional<std::string> CheckpointStore::local_final(const RestoreRequest& request,
                                                        const std::string& run_id) {
  const auto dir = request.runs_dir / run_id;
  const auto params = read_run_params(dir);
  if (!params || !params->final_status || params->run_id != run_id) return std::nullopt;
  const auto ref = branch_ref({params->origin_pod, run_id});
  if (auto pushed = pushed_final(ref)) return pushed;
  const auto commit = snapshot(dir, params->origin_pod, final_info(dir, *params, request));
  return commit ? commit : remote_.last_pushed(ref);
}

// The final state that only this disk holds (its release stopped after
// writing it), pushed on top of the branch's tip.
std::string CheckpointStore::push_local_final(const RemoteBranch& branch, const std::string& tip,
                                              const RestoreRequest& request) {
  const auto name = *parse_branch_ref(branch.ref);
  const auto dir = request.runs_dir / name.run_id;
  const auto params = read_run_params(dir);
  const auto commit = *RunSnapshotter(cache_, config_.exclude_globs, config_.restore_limits)
                           .snapshot(dir, final_info(dir, *params, request), tip);
  remote_.push(branch.ref, commit);
  return commit;
}

// What the run dir of the branch's run id holds. Another origin pod's run of
// the same id, or anything else that is not this run, keeps the branch out.
CheckpointStore::LocalCopy CheckpointStore::local_copy(const BranchName& name,
                                                       const RestoreRequest& request) {
  const auto dir = request.runs_dir / name.run_id;
  if (const auto it = request.local.find(name.run_id); it != request.local.end()) {
    if (it->second.origin_pod == name.pod) return LocalCopy::resumable;
    throw std::runtime_error("run dir " + dir.string() + " holds the run of pod " +
                             it->second.origin_pod +
                             " with the same id; this branch is left alone");
  }
  std::error_code ec;
  if (fs::symlink_status(dir, ec).type() == fs::file_type::not_found) return LocalCopy::none;
  std::optional<RunParams> params;
  try {
    params = read_run_params(dir);
  } catch (const std::exception& e) {
    throw std::runtime_error("run dir " + dir.string() + " is in the way: " + e.what());
  }
  if (params && params->origin_pod == name.pod) {
    if (params->handed_over) return LocalCopy::stale;
    if (params->final_status) return LocalCopy::finished;
  }
  throw std::runtime_error("run dir " + dir.string() +
                           " exists and is not a resumable copy of this run; the branch is left "
                           "alone");
}

// A run that only this disk holds (its shutdown push failed, or it never had
// one) gets its branch now, which also claims it.
void CheckpointStore::push_local_run(const fs::path& dir, const RestoreRequest& request,
                                     RestorePush& push, RestoreReport& report) {
  try {
    auto params = read_run_params(dir);
    if (!params) return;
    const auto verdict = request.judge(*params);
    if (verdict.refusal) {
      report.held.push_back({std::move(*params), "", *verdict.refusal});
      return;
    }
    const auto commit = snapshot(
        dir, params->origin_pod,
        claim_info(*params, request.pod, records_of(dir, verdict), verdict.progress_total));
    auto branch = branch_ref({params->origin_pod, params->run_id});
    ClaimedRun claimed{std::move(*params), dir, branch, commit.value_or("")};
    if (!commit) return report.claimed.push_back(std::move(claimed));
    push.add({.ref = branch, .commit = *commit, .from = std::nullopt},
             [&report, claimed = std::move(claimed)](const RefResult& result) {
               if (result.outcome != RefOutcome::updated)
                 return report.problems.push_back(claimed.dir.string() + ": " + result.detail);
               report.claimed.push_back(claimed);
             });
  } catch (const GitError& e) {
    if (e.network()) throw;
    report.problems.push_back(dir.string() + ": " + e.what());
  }
}

}  // namespace inflight::checkpoint
