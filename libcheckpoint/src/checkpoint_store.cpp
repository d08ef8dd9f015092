#include "inflight/checkpoint/checkpoint_store.hpp"

#include <git2.h>

#include <set>

#include "cache_repo_impl.hpp"
#include "inflight/bounded_json.hpp"
#include "inflight/checkpoint/branch_listing.hpp"
#include "inflight/checkpoint/run_dir.hpp"
#include "oid_text.hpp"

namespace inflight::checkpoint {

namespace fs = std::filesystem;

namespace {

std::uint64_t records_of(const fs::path& dir, const RunVerdict& verdict) {
  return verdict.progress_file.empty() ? 0 : RecordCounter().count(dir, verdict.progress_file);
}

std::int64_t seconds_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool is_network_failure(const GitError& e) {
  return e.kind() == GitErrorKind::unreachable || e.kind() == GitErrorKind::auth;
}

}  // namespace

CheckpointStore::CheckpointStore(StoreConfig config)
    : config_(std::move(config)), cache_(config_.cache_dir), remote_(cache_, config_.remote) {}

std::optional<std::string> CheckpointStore::save(const fs::path& run_dir,
                                                 const std::string& origin_pod,
                                                 const CheckpointInfo& info) {
  const auto commit = snapshot(run_dir, origin_pod, info);
  if (commit) remote_.push(branch_ref({origin_pod, info.run_id}), *commit);
  return commit;
}

// A commit of run_dir on top of what this cache last pushed to its branch;
// each run dir keeps its snapshotter, for the stat cache.
std::optional<std::string> CheckpointStore::snapshot(const fs::path& run_dir,
                                                     const std::string& origin_pod,
                                                     const CheckpointInfo& info) {
  auto [it, inserted] = snapshotters_.try_emplace(run_dir.string(), cache_, config_.exclude_globs);
  return it->second.snapshot(run_dir, info,
                             remote_.last_pushed(branch_ref({origin_pod, info.run_id})));
}

SaveAllReport CheckpointStore::save_all(const std::vector<SaveRequest>& runs,
                                        const std::optional<Lease>& lease) {
  SaveAllReport report{.runs = std::vector<SaveOutcome>(runs.size()), .lease_error = std::nullopt};
  std::vector<RefUpdate> updates;
  std::vector<std::size_t> pushed;  // index of each run update's run
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& run = runs[i];
    auto& outcome = report.runs[i];
    try {
      outcome.commit = snapshot(run.run_dir, run.origin_pod, run.info);
    } catch (const GitError& e) {
      if (e.kind() == GitErrorKind::cache) throw;
      outcome.error = e.what();
    } catch (const std::exception& e) {
      outcome.error = e.what();
    }
    if (!outcome.commit) continue;
    updates.push_back(
        {.ref = branch_ref({run.origin_pod, run.info.run_id}), .commit = *outcome.commit});
    pushed.push_back(i);
  }
  if (lease) updates.push_back(lease_update(cache_, remote_, *lease));
  if (updates.empty()) return report;
  const auto results = remote_.update(updates);
  for (std::size_t n = 0; n < pushed.size(); ++n) {
    report.runs[pushed[n]].ref = results[n].outcome;
    if (results[n].outcome != RefOutcome::updated)
      report.runs[pushed[n]].error = updates[n].ref + ": " + results[n].detail;
  }
  if (lease) report.lease_error = renew_taken_lease(results.back(), *lease);
  return report;
}

// A lease tip this cache did not write (a restart on a fresh disk) is renewed
// on the remote's tip; one the server refused stays as it is.
std::optional<std::string> CheckpointStore::renew_taken_lease(const RefResult& result,
                                                              const Lease& lease) {
  if (result.outcome == RefOutcome::updated) return std::nullopt;
  if (result.outcome == RefOutcome::refused) return lease_ref(lease.pod) + ": " + result.detail;
  try {
    hold_lease(cache_, remote_, lease);
    return std::nullopt;
  } catch (const GitError& e) {
    if (is_network_failure(e)) throw;
    return e.what();
  }
}

void CheckpointStore::release(const fs::path& run_dir, const std::string& origin_pod,
                              const CheckpointInfo& info) {
  save(run_dir, origin_pod, info);
  try {
    remote_.remove(branch_ref({origin_pod, info.run_id}));
  } catch (const GitError& e) {
    if (e.kind() == GitErrorKind::not_found) return;
    // The final push landed, so the branch is ours: a refused deletion is a
    // failure to retry, not another owner.
    if (e.kind() == GitErrorKind::rejected)
      throw GitError(GitErrorKind::other, std::string("deleting the branch: ") + e.what());
    throw;
  }
}

RestoreReport CheckpointStore::restore(const RestoreRequest& request) {
  RestoreReport report;
  if (request.lease_until) take_lease(request, report);
  auto branches = remote_.list(std::string(kInflightPrefix), RemoteStore::Tips::downloaded);
  LeaseBook leases(cache_, remote_, branches, seconds_now(), report.problems);
  std::erase_if(branches, [&](const RemoteBranch& b) {
    const auto name = parse_branch_ref(b.ref);
    if (name && request.skip.count(name->run_id)) return true;
    return !b.ref.starts_with(kBranchPrefix) ||
           (request.only && !branch_matches(b.ref, *request.only));
  });
  if (request.only && branches.size() > 1) {
    for (const auto& branch : branches) report.ambiguous.push_back(short_branch(branch.ref));
    return report;
  }
  std::set<std::string> taken;     // run ids restored or held from a branch
  std::set<std::string> branched;  // every ref seen, for the local runs below
  for (const auto& branch : branches) {
    branched.insert(branch.ref);
    try {
      restore_branch(branch, request, leases, taken, report);
    } catch (const GitError& e) {
      if (is_network_failure(e)) throw;
      const auto name = parse_branch_ref(branch.ref);
      if (e.kind() == GitErrorKind::rejected && name) {
        report.lost.push_back(name->run_id);
        mark_stale(*name, request, report);
      }
      report.problems.push_back(printable(branch.ref) + ": " + e.what());
    } catch (const std::exception& e) {
      report.problems.push_back(printable(branch.ref) + ": " + e.what());
    }
  }
  if (request.only) return report;
  leases.drop_ended(request.pod);
  for (const auto& [run_id, local] : request.local)
    if (!branched.count(branch_ref({local.origin_pod, run_id})) && !taken.count(run_id) &&
        !request.skip.count(run_id))
      push_local_run(request.runs_dir / run_id, request, report);
  return report;
}

// A lease the server refuses (a hook that allows only `inflight/*`) costs
// this pod the protection of its runs, not its restore.
void CheckpointStore::take_lease(const RestoreRequest& request, RestoreReport& report) {
  try {
    hold_lease(cache_, remote_, {.pod = request.pod, .until = *request.lease_until});
  } catch (const GitError& e) {
    if (is_network_failure(e) || e.kind() == GitErrorKind::cache) throw;
    report.problems.push_back(lease_ref(request.pod) + ": lease not taken: " + e.what());
  }
}

// Another instance took the run or answers for it: this disk's copy, if any,
// is stale from now on, so that no later start here resumes it once the
// owner deleted the branch.
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
                                     RestoreReport& report) {
  const auto name = parse_branch_ref(branch.ref);
  if (!name) throw std::runtime_error("not an inflight/<pod>/<run-id> branch");
  if (taken.count(name->run_id))
    throw std::runtime_error("run id " + name->run_id +
                             " is already restored from another pod's branch; this one is left "
                             "alone (`inflight resume " +
                             short_branch(branch.ref) + "` where that id is free)");
  const auto tip = remote_.fetch_listed(branch);
  const auto text = read_file_at(cache_, tip, kRunParamsFile);
  if (!text) throw std::runtime_error("the checkpoint has no run-params.json");
  auto params = run_params_from_text(*text);
  if (params.run_id != name->run_id || params.origin_pod != name->pod)
    throw std::runtime_error("run-params.json names run " + params.origin_pod + "/" +
                             params.run_id + ", not this branch's");
  const auto local = local_copy(*name, request);
  if (params.final_status || local == LocalCopy::finished) {
    remote_.remove(branch.ref);
    report.released.push_back(short_branch(branch.ref));
    return;
  }
  taken.insert(name->run_id);
  if (auto owner = live_owner(*name, tip, request.pod, leases)) {
    report.left.push_back(std::move(*owner));
    return mark_stale(*name, request, report);
  }
  const auto verdict = request.judge(params);
  if (verdict.refusal) {
    report.held.push_back({std::move(params), branch.ref, *verdict.refusal});
    return;
  }
  const bool branch_wins = local != LocalCopy::resumable ||
                           params.attempts.size() > request.local.at(name->run_id).attempts;
  report.claimed.push_back(claim(branch, tip, std::move(params), verdict, branch_wins, request));
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
                                     RestoreReport& report) {
  try {
    auto params = read_run_params(dir);
    if (!params) return;
    const auto verdict = request.judge(*params);
    if (verdict.refusal) {
      report.held.push_back({std::move(*params), "", *verdict.refusal});
      return;
    }
    const CheckpointInfo info{params->run_id, static_cast<int>(params->attempts.size()), "claim",
                              request.pod, records_of(dir, verdict)};
    const auto commit = save(dir, params->origin_pod, info);
    auto branch = branch_ref({params->origin_pod, params->run_id});
    report.claimed.push_back({std::move(*params), dir, std::move(branch), commit.value_or("")});
  } catch (const GitError& e) {
    if (is_network_failure(e)) throw;
    report.problems.push_back(dir.string() + ": " + e.what());
  }
}

// The pod that answers for the run, when it is another one: the writer of
// the tip, unless it handed the run over (a shutdown checkpoint) or its lease
// is over. A pod without a lease (`inflight resume`) holds what it claimed
// for claim_lease. Pushing on top of a live owner would take the run from an
// instance that is running it now.
std::optional<LeftRun> CheckpointStore::live_owner(const BranchName& name, const std::string& tip,
                                                   const std::string& pod, LeaseBook& leases) {
  const auto last = describe_commit(commit_summary(cache_, tip));
  if (last.pod == pod || last.reason == "shutdown") return std::nullopt;
  auto until = leases.until(last.pod).value_or(0);
  if (last.reason == "claim") until = std::max(until, last.time + config_.claim_lease.count());
  if (until <= seconds_now()) return std::nullopt;
  return LeftRun{.run_id = name.run_id, .pod = last.pod, .until = until};
}

// The branch copy is materialised beside the run dir and moved in only once
// the claim landed, so a lost claim or a hostile tree leaves nothing behind.
ClaimedRun CheckpointStore::claim(const RemoteBranch& branch, const std::string& tip,
                                  RunParams params, const RunVerdict& verdict, bool branch_wins,
                                  const RestoreRequest& request) {
  const auto dir = request.runs_dir / params.run_id;
  const auto staging = request.runs_dir / (".restore-" + params.run_id);
  fs::remove_all(staging);
  const auto claim_from = branch_wins ? staging : dir;
  if (branch_wins) materialize(cache_, tip, staging, config_.restore_limits);
  std::string claim_commit;
  try {
    const CheckpointInfo info{params.run_id, static_cast<int>(params.attempts.size()), "claim",
                              request.pod, records_of(claim_from, verdict)};
    claim_commit = *RunSnapshotter(cache_, config_.exclude_globs).snapshot(claim_from, info, tip);
    remote_.push(branch.ref, claim_commit);
  } catch (...) {
    fs::remove_all(staging);
    throw;
  }
  if (branch_wins) {
    fs::remove_all(dir);
    fs::rename(staging, dir);
  } else if (auto local = read_run_params(dir)) {
    params = std::move(*local);
  }
  return {std::move(params), dir, branch.ref, claim_commit};
}

}  // namespace inflight::checkpoint
