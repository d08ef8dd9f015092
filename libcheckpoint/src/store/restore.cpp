// Restore: which runs of the results repo this instance takes, and taking
// them. One connection lists the branches and downloads their tips; every
// branch is judged on its own; one push carries every claim, every deletion
// and the lease, while writer threads materialise the claimed copies, and
// each ref's outcome settles its own run.
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

namespace inflight::checkpoint {

namespace fs = std::filesystem;

namespace {

std::uint64_t records_of(const fs::path& dir, const RunVerdict& verdict) {
  return verdict.progress_file.empty() ? 0 : RecordCounter().count(dir, verdict.progress_file);
}

// What a claim commit says: this pod took the run at its attempt so far.
CheckpointInfo claim_info(const RunParams& params, const std::string& pod, std::uint64_t records,
                          std::optional<std::uint64_t> total) {
  return {.run_id = params.run_id,
          .attempt = static_cast<int>(params.attempts.size()),
          .reason = CheckpointReason::claim,
          .pod = pod,
          .records = records,
          .total = total};
}

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

struct CheckpointStore::RestorePush {
  // A branch copy a writer is materialising while the claim is pushed; moved
  // in once both are done.
  struct WrittenCopy {
    RemoteBranch branch;
    std::string tip;
    RunParams params;
    StagedCopy staged;                     // its future: the records it counted, if asked
    std::optional<std::uint64_t> records;  // known before the write: one blob
    std::optional<std::uint64_t> total;
  };

  RestorePush(const fs::path& cache, const TreeLimits& limits) : writers(cache, limits) {}
  // A copy not moved in by now was not claimed (or the restore failed): it
  // goes, once no writer is at work on it.
  ~RestorePush() {
    writers.stop();
    std::error_code ec;
    for (const auto& dir : staging) fs::remove_all(dir, ec);
  }

  std::vector<RefUpdate> updates;
  std::vector<std::function<void(const RefResult&)>> settle;  // one per update
  std::vector<fs::path> staging;  // branch copies written beside their run dirs
  RunDirWriters writers;
  std::vector<WrittenCopy> written;  // claim_written() adds their claims
  std::set<std::string> published;   // run ids with a result ref: never run again

  void add(RefUpdate update, std::function<void(const RefResult&)> then) {
    updates.push_back(std::move(update));
    settle.push_back(std::move(then));
  }
};

namespace {

// The listed checkpoint branches this restore looks at: not the runs this
// instance holds already, and with `only`, just the branches it names.
std::vector<RemoteBranch> branches_to_restore(std::vector<RemoteBranch> listing,
                                              const RestoreRequest& request) {
  std::erase_if(listing, [&](const RemoteBranch& b) {
    const auto name = parse_branch_ref(b.ref);
    if (name && request.skip.count(name->run_id)) return true;
    return !b.ref.starts_with(kBranchPrefix) ||
           (request.only && !branch_matches(b.ref, *request.only));
  });
  return listing;
}

}  // namespace

// Each run id with a result ref, with its index entry when the index holds a
// good one: serve answers a submit of one with it, and starts nothing.
std::vector<PublishedRun> CheckpointStore::published_runs(const std::vector<RemoteBranch>& listing,
                                                          const std::set<std::string>& published,
                                                          std::vector<std::string>& problems) {
  std::map<std::string, IndexEntry> indexed;
  const auto index = std::find_if(listing.begin(), listing.end(),
                                  [](const RemoteBranch& ref) { return ref.ref == kIndexRef; });
  try {
    if (index != listing.end())
      for (auto& entry : read_index(cache_, remote_.fetch_listed(*index), problems))
        indexed.emplace(entry.id, std::move(entry));
  } catch (const GitError& e) {
    if (e.network()) throw;
    problems.push_back(std::string(kIndexRef) + ": " + e.what());
  }
  std::vector<PublishedRun> runs;
  for (const auto& run_id : published) {
    const auto it = indexed.find(run_id);
    runs.push_back({.run_id = run_id,
                    .entry = it == indexed.end() ? std::nullopt : std::optional(it->second)});
  }
  return runs;
}

RestoreReport CheckpointStore::restore(const RestoreRequest& request) {
  RestoreReport report;
  RestorePush push(cache_.path(), config_.restore_limits);
  // A serve's restore always pushes (its lease at least).
  if (request.lease_until) remote_.connect_ahead();
  // Results are listed, never downloaded: their ids are finished runs.
  const auto listing = remote_.list("refs/", RemoteStore::Tips::downloaded);
  push.published = published_run_ids(listing, report.problems);
  report.published = published_runs(listing, push.published, report.problems);
  LeaseBook leases(cache_, remote_, listing, request, report.problems);
  const auto branches = branches_to_restore(listing, request);
  if (request.only && branches.size() > 1) {
    for (const auto& branch : branches) report.ambiguous.push_back(short_branch(branch.ref));
    return report;
  }
  const auto taken = restore_branches(branches, request, leases, push, report);
  if (!request.only) {
    drop_ended_leases(leases, request.pod, push, report);
    push_unbranched_runs(branches, taken, request, leases, push, report);
  }
  // `inflight run` names the one finished run dir of its id, if any.
  publish_local_finished(listing, request, push, report);
  if (request.lease_until) take_lease({request.pod, *request.lease_until}, push, report);
  claim_written(request, push, report);
  push_restore(push, report);
  const auto leases_watched = leases.watched();
  report.watched.insert(report.watched.end(), leases_watched.begin(), leases_watched.end());
  return report;
}

// Each branch on its own: one that cannot be read or claimed is a problem of
// its own, unless the connection itself failed. Returns the run ids restored
// or held from a branch.
std::set<std::string> CheckpointStore::restore_branches(const std::vector<RemoteBranch>& branches,
                                                        const RestoreRequest& request,
                                                        LeaseBook& leases, RestorePush& push,
                                                        RestoreReport& report) {
  std::set<std::string> taken;
  for (const auto& branch : branches)
    for_one_ref(branch.ref, report.problems,
                [&] { restore_branch(branch, request, leases, taken, push, report); });
  return taken;
}

// Whoever may take over an ended lease's runs also deletes the lease; only
// as listed, since a lease renewed since is its pod's again.
void CheckpointStore::drop_ended_leases(LeaseBook& leases, const std::string& own_pod,
                                        RestorePush& push, RestoreReport& report) {
  for (const auto& lease : leases.ended(own_pod))
    push.add({.ref = lease.ref, .commit = "", .from = lease.oid},
             [&report, ref = lease.ref](const RefResult& result) {
               if (result.outcome != RefOutcome::updated)
                 report.problems.push_back(ref + ": " + result.detail);
             });
}

// Local runs no branch holds get one.
void CheckpointStore::push_unbranched_runs(const std::vector<RemoteBranch>& branches,
                                           const std::set<std::string>& taken,
                                           const RestoreRequest& request, LeaseBook& leases,
                                           RestorePush& push, RestoreReport& report) {
  std::set<std::string> branched;
  for (const auto& branch : branches) branched.insert(branch.ref);
  for (const auto& [run_id, local] : request.local) {
    if (branched.count(branch_ref({local.origin_pod, run_id})) || taken.count(run_id) ||
        request.skip.count(run_id))
      continue;
    // A run that another pod under a live lease ran here last is its own.
    const auto runner = local_runner({local.origin_pod, run_id}, request);
    if (runner && *runner != request.pod && leases.live(*runner)) {
      report.left.push_back({.run_id = run_id, .pod = *runner, .until = leases.until(*runner)});
      continue;
    }
    push_local_run(request.runs_dir / run_id, request, push, report);
  }
}

// A lease the server refuses (a hook that allows only `inflight/*`) costs
// this pod the protection of its runs, not its restore.
void CheckpointStore::take_lease(const Lease& lease, RestorePush& push, RestoreReport& report) {
  push.add(lease_update(cache_, remote_, lease), [this, &report, lease](const RefResult& result) {
    if (const auto error = renew_taken_lease(result, lease))
      report.problems.push_back(lease_ref(lease.pod) + ": lease not taken: " + *error);
  });
}

// A failure of one ref's aftermath (a run dir that cannot be moved in) is
// that run's alone.
void CheckpointStore::push_restore(RestorePush& push, RestoreReport& report) {
  if (push.updates.empty()) return;
  const auto results = remote_.update(push.updates);
  for (std::size_t i = 0; i < results.size(); ++i)
    for_one_ref(push.updates[i].ref, report.problems, [&] { push.settle[i](results[i]); });
}

// Another instance took the run or answers for it: this disk's copy, if any,
// is stale from now on, so that no later start here resumes it once the
// owner deleted the branch.
// The pod of the last attempt of this disk's copy of the branch's run, when
// there is one of the same origin pod.
std::optional<std::string> CheckpointStore::local_runner(const BranchName& name,
                                                         const RestoreRequest& request) {
  const auto it = request.local.find(name.run_id);
  if (it == request.local.end() || it->second.origin_pod != name.pod) return std::nullopt;
  const auto params = read_run_params(request.runs_dir / name.run_id);
  if (!params || params->attempts.empty()) return std::nullopt;
  return params->attempts.back().pod;
}

void CheckpointStore::mark_stale(const BranchName& name, const RestoreRequest& request,
                                 RestoreReport& report) {
  const auto it = request.local.find(name.run_id);
  if (it == request.local.end() || it->second.origin_pod != name.pod) return;
  try {
    mark_handed_over(request.runs_dir / name.run_id,
                     "another instance holds the run, not pod " + request.pod);
  } catch (const std::exception& e) {
    report.problems.push_back((request.runs_dir / name.run_id).string() +
                              ": not marked as handed over: " + e.what());
  }
}

// One branch, with everything it says checked before anything is claimed or
// written; whatever it holds, it can only fail itself.
void CheckpointStore::restore_branch(const RemoteBranch& branch, const RestoreRequest& request,
                                     LeaseBook& leases, std::set<std::string>& taken,
                                     RestorePush& push, RestoreReport& report) {
  const auto name = parse_branch_ref(branch.ref);
  if (!name) throw std::runtime_error("not an inflight/<pod>/<run-id> branch");
  if (taken.count(name->run_id))
    throw std::runtime_error("run id " + name->run_id +
                             " is already restored from another pod's branch; this one is left "
                             "alone (`inflight resume " +
                             short_branch(branch.ref) + "` where that id is free)");
  const auto tip = remote_.fetch_listed(branch);
  const auto text = read_file_at(cache_, tip, kRunParamsFile, kMaxRunParamsBytes);
  if (!text) throw std::runtime_error("the checkpoint has no run-params.json");
  auto params = run_params_from_text(*text);
  if (params.run_id != name->run_id || params.origin_pod != name->pod)
    throw std::runtime_error("run-params.json names run " + params.origin_pod + "/" +
                             params.run_id + ", not this branch's");
  const auto local = local_copy(*name, request);
  if (params.final_status) {
    // Its own pod releases it at its next push: left to it while its lease
    // lives, so that pods do not race it for the same release. (A pod gives
    // its lease up at exit when only such branches are left.)
    if (auto owner = live_owner(branch, tip, request, leases, report))
      return report.left.push_back(std::move(*owner));
    return publish_finished(branch, tip, push, report);
  }
  if (local == LocalCopy::finished)
    return publish_finished(branch, push_local_final(branch, tip, request), push, report);
  taken.insert(name->run_id);
  if (push.published.contains(name->run_id)) {
    report.held.push_back({std::move(params), branch.ref,
                           "run " + name->run_id + " is published already (" +
                               result_ref(name->run_id) + "); this branch is left alone"});
    return;
  }
  if (auto owner = live_owner(branch, tip, request, leases, report)) {
    // This disk's copy, when the live pod ran it last here (it stopped
    // before pushing, and this is another name on its disk), is that pod's
    // own and the freshest: untouched, for whoever takes the run later.
    const bool owners_copy = local_runner(*name, request) == owner->pod;
    report.left.push_back(std::move(*owner));
    if (!owners_copy) mark_stale(*name, request, report);
    return;
  }
  const auto verdict = request.judge(params);
  if (verdict.refusal) {
    report.held.push_back({std::move(params), branch.ref, *verdict.refusal});
    return;
  }
  const bool branch_wins = local != LocalCopy::resumable ||
                           params.attempts.size() > request.local.at(name->run_id).attempts;
  claim(branch, tip, std::move(params), verdict, branch_wins, request, push, report);
}

// A finished run's branch (its tip `final_commit` carries the final state):
// published, with StoreConfig::publish, then deleted in the restore's push.
// One whose run id another pod published first is kept for an operator.
void CheckpointStore::publish_finished(const RemoteBranch& branch, const std::string& final_commit,
                                       RestorePush& push, RestoreReport& report) {
  if (config_.publish)
    if (const auto published = publish({final_commit}).front(); !published) {
      const auto& error = published.error();
      if (network_failure(error.kind)) throw GitError(error.kind, error.message);
      throw std::runtime_error("kept, not published: " + error.message);
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
                                             const RestoreRequest& request, const RestorePush& push,
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

// The pod that answers for the run, when it is another one: the writer of
// the tip, unless it handed the run over (a shutdown checkpoint) or its lease
// is over. A claim by a pod without a lease (`inflight resume`) holds its
// run, and a busy instance leaves a handed-over run to an idle one
// (RestoreRequest::leave_handovers), while the caller has not yet watched
// that tip unchanged for claim_lease. Pushing on top of a live owner would
// take the run from an instance that is running it now. No wall clock
// decides: `until` is shown, never compared.
std::optional<LeftRun> CheckpointStore::live_owner(const RemoteBranch& branch,
                                                   const std::string& tip,
                                                   const RestoreRequest& request, LeaseBook& leases,
                                                   RestoreReport& report) {
  const auto name = *parse_branch_ref(branch.ref);
  const auto last = describe_commit(commit_summary(cache_, tip));
  if (last.pod == request.pod || request.take_over) return std::nullopt;
  const auto left = [&](std::int64_t until) {
    return LeftRun{.run_id = name.run_id, .pod = last.pod, .until = until};
  };
  // The tip itself is the record: it holds the run until watched unchanged.
  const auto tip_holds = [&] {
    const auto expired = request.expired.find(branch.ref);
    if (expired != request.expired.end() && expired->second == tip) return false;
    report.watched.push_back({.ref = branch.ref,
                              .oid = tip,
                              .term = config_.claim_lease.count(),
                              .written = last.time,
                              .pod = last.pod});
    return true;
  };
  const std::int64_t tip_until = last.time + config_.claim_lease.count();
  if (last.reason == CheckpointReason::shutdown)
    return request.leave_handovers && tip_holds() ? std::optional(left(tip_until)) : std::nullopt;
  if (leases.live(last.pod)) return left(leases.until(last.pod));
  if (last.reason == CheckpointReason::claim && tip_holds()) return left(tip_until);
  return std::nullopt;
}

// The branch copy is materialised beside the run dir (by a writer thread,
// while the claim is pushed) and moved in only once the claim landed, so a
// lost claim or a hostile tree leaves nothing behind. The tree is validated
// before the claim: a claim on a hostile branch would be made again by every
// later look. The local copy is claimed as it is.
void CheckpointStore::claim(const RemoteBranch& branch, const std::string& tip, RunParams params,
                            const RunVerdict& verdict, bool branch_wins,
                            const RestoreRequest& request, RestorePush& push,
                            RestoreReport& report) {
  const auto dir = request.runs_dir / params.run_id;
  auto staging = request.runs_dir / (".restore-" + params.run_id);
  fs::remove_all(staging);  // left by a restore that stopped half-way
  if (branch_wins) {
    validate_run_tree(raw_repo(cache_), tree_of(lookup_commit(raw_repo(cache_), tip).get()).get(),
                      config_.restore_limits);
    push.staging.push_back(staging);
    const auto records = verdict.progress_file.empty()
                             ? std::optional<std::uint64_t>(0)
                             : lines_of_blob_at(cache_, tip, verdict.progress_file);
    auto written = push.writers.write(tip, staging, records ? "" : verdict.progress_file);
    push.written.push_back({.branch = branch,
                            .tip = tip,
                            .params = std::move(params),
                            .staged = {std::move(staging), written.share()},
                            .records = records,
                            .total = verdict.progress_total});
    return;
  }
  const auto info =
      claim_info(params, request.pod, records_of(dir, verdict), verdict.progress_total);
  auto commit = *RunSnapshotter(cache_, config_.exclude_globs).snapshot(dir, info, tip);
  add_claim(branch, tip, std::move(params), {}, std::move(commit), request, push, report);
}

// Each branch copy claimed on its own tree; a chunked progress file's
// records are counted by its writer first. One that cannot be claimed, or
// whose writer failed already (the disk), fails alone (~RestorePush removes
// what it left).
void CheckpointStore::claim_written(const RestoreRequest& request, RestorePush& push,
                                    RestoreReport& report) {
  for (auto& written : push.written) {
    try {
      const auto& writer = written.staged.written;
      const bool ask_writer =
          !written.records || writer.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
      const auto counted = ask_writer ? writer.get() : 0;  // throws what the writer threw
      const auto records = written.records.value_or(counted);
      auto commit = commit_on_own_tree(
          cache_, written.tip, claim_info(written.params, request.pod, records, written.total));
      add_claim(written.branch, written.tip, std::move(written.params), written.staged,
                std::move(commit), request, push, report);
    } catch (const std::exception& e) {
      report.problems.push_back(printable(written.branch.ref) + ": " + e.what());
    }
  }
  push.written.clear();
}

// A claim that does not land means another instance took the run first.
// `staged`, when set, is the branch copy that replaces the run dir once its
// writer is done. A copy the disk could not take after its claim landed is a
// problem of its run alone: the claim is this pod's, so its next look takes
// the run again.
void CheckpointStore::add_claim(const RemoteBranch& branch, const std::string& tip,
                                RunParams params, const std::optional<StagedCopy>& staged,
                                std::string commit, const RestoreRequest& request,
                                RestorePush& push, RestoreReport& report) {
  const auto dir = request.runs_dir / params.run_id;
  const auto name = *parse_branch_ref(branch.ref);
  push.add({.ref = branch.ref, .commit = commit, .from = tip},
           [this, &request, &report, name, dir, staged, commit, branch,
            params = std::move(params)](const RefResult& result) mutable {
             if (result.outcome != RefOutcome::updated) {
               // Unwritten by a local results repo, the run is still on its
               // branch for a later start; judged, it is another's.
               if (judged_against(result.outcome)) {
                 report.lost.push_back(name.run_id);
                 mark_stale(name, request, report);
               }
               return report.problems.push_back(printable(branch.ref) + ": " + result.detail);
             }
             if (staged) {
               staged->written.get();
               fs::remove_all(dir);
               fs::rename(staged->dir, dir);
             } else if (auto local = read_run_params(dir)) {
               params = std::move(*local);
             }
             report.claimed.push_back({std::move(params), dir, branch.ref, commit});
           });
}

}  // namespace inflight::checkpoint
