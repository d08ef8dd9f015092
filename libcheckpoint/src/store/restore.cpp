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
#include "store/restore_push.hpp"

namespace inflight::checkpoint {

namespace fs = std::filesystem;

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

bool lists(const std::vector<RemoteBranch>& listing, std::string_view ref) {
  return std::any_of(listing.begin(), listing.end(),
                     [&](const RemoteBranch& branch) { return branch.ref == ref; });
}

}  // namespace

// Each run id with a result ref or an index entry, with the entry when an index holds a good
// one: serve answers a submit of one with it, and starts nothing. An entry counts without its
// ref: layout 2 keeps a folded result reachable from the archive alone (docs/results.md). An
// index that could not be read leaves `push` unsure of the runs without a ref.
std::vector<PublishedRun> CheckpointStore::published_runs(const std::vector<RemoteBranch>& listing,
                                                          const RestoreRequest& request,
                                                          RestorePush& push,
                                                          RestoreReport& report) {
  auto& problems = report.problems;
  if (request.only) {
    if (auto runs = looked_up_runs(listing, *request.only, push, problems)) return *runs;
  } else if (auto runs = unread_log_runs(listing, request, push, report)) {
    return *runs;
  }
  IndexReading indexed;
  try {
    indexed = read_indexes(cache_, remote_, listing, problems);
  } catch (const GitError& e) {
    if (e.network()) throw;
    problems.push_back(std::string("the index: ") + e.what());
    indexed.whole = false;
  }
  push.unsure = push.index_failed = !indexed.whole && lists(listing, kArchiveRef);
  std::vector<PublishedRun> runs;
  for (const auto& run_id : published_run_ids(listing, problems)) {
    auto entry = indexed.entries.extract(run_id);
    push.published.emplace(run_id, std::nullopt);
    runs.push_back({.run_id = run_id,
                    .entry = entry ? std::optional(std::move(entry.mapped())) : std::nullopt});
  }
  for (auto& [run_id, entry] : indexed.entries) {
    push.published.emplace(run_id, entry.result_commit.value_or(""));
    runs.push_back({.run_id = run_id, .entry = std::move(entry)});
  }
  return runs;
}

// `inflight run` and `inflight resume` (`only`) on layout 2 read no entry when they need not: the
// log holds every run ever published (3.7 s to read at 100,000), and their one run is looked up in
// the archive instead. Every entry of the log is there without a result ref only once the archive
// holds its marker (a fold, or `runs migrate`, which folds each entry it copies). The result
// refs listed, and the run named when the server serves its marker, with the status its markers
// give; a claim of it then asks no more (maybe_published). nullopt, for the log to be read as
// before, wherever an entry would say more: no log or no archive, the run's result ref listed
// (its status is in the entry), a server that serves no marker by id, a status no marker names.
std::optional<std::vector<PublishedRun>> CheckpointStore::looked_up_runs(
    const std::vector<RemoteBranch>& listing, const std::string& only, RestorePush& push,
    std::vector<std::string>& problems) {
  const auto target = parse_run_target(only);
  const auto run_id = target ? std::optional(target->run_id) : std::nullopt;
  if (!run_id || !lists(listing, kRunsLogRef) || !lists(listing, kArchiveRef) ||
      lists(listing, result_ref(*run_id)))
    return std::nullopt;
  RemoteStore::Reachable found{};
  std::optional<std::string> status;
  try {
    found = remote_.archived(*run_id);
    if (found == RemoteStore::Reachable::yes) status = remote_.archived_status(*run_id);
  } catch (const GitError& e) {
    // A server that serves only its tips by id ends both fetches ("unreachable"): the log
    // answers instead, and a network that is down fails that read as it would have.
    if (e.kind() == Failure::cache || e.kind() == Failure::auth) throw;
    return std::nullopt;
  }
  if (found == RemoteStore::Reachable::unknown || (found == RemoteStore::Reachable::yes && !status))
    return std::nullopt;
  auto runs = push.with_result_refs(published_run_ids(listing, problems));
  push.unsure = true;
  push.looked_up.emplace(*run_id, found == RemoteStore::Reachable::yes);
  if (!status) return runs;
  push.published.emplace(*run_id, std::nullopt);
  runs.push_back({.run_id = *run_id, .entry = entry_of_status(*run_id, std::move(*status))});
  return runs;
}

// A pod's restore on layout 2 reads no entry either: reading the log cost every pod's start 3.7 s
// at 100,000 runs. Each branch it would claim, each leftover final branch and each local run it
// would push is looked up in the archive instead (maybe_published), and serve asks look_up()
// about a submitted run id it does not know (RestoreReport::published_partial). nullopt, for the
// log to be read as before, where the archive cannot answer: none yet, or a server that serves
// no marker by id (one lookup tells), or more runs to ask about than kMaxRestoreLookups: a
// lookup costs two connections, one after another, and through a slow link a hundred of them
// cost more than the log.
std::optional<std::vector<PublishedRun>> CheckpointStore::unread_log_runs(
    const std::vector<RemoteBranch>& listing, const RestoreRequest& request, RestorePush& push,
    RestoreReport& report) {
  if (!lists(listing, kRunsLogRef) || !lists(listing, kArchiveRef)) return std::nullopt;
  const auto branches = std::count_if(listing.begin(), listing.end(), [&](const RemoteBranch& b) {
    const auto name = parse_branch_ref(b.ref);
    return name && !request.skip.contains(name->run_id);
  });
  const auto asked =
      static_cast<std::size_t>(branches) + request.local.size() + request.finished.size();
  if (asked > kMaxRestoreLookups) return std::nullopt;
  try {
    if (remote_.serves_markers() != RemoteStore::Reachable::yes) return std::nullopt;
  } catch (const GitError& e) {
    // A server that serves only its tips by id, or no tree, refuses K ("unreachable"): the log
    // answers instead, and a network that is down fails that read as it would have.
    if (e.kind() == Failure::cache || e.kind() == Failure::auth) throw;
    return std::nullopt;
  }
  auto runs = push.with_result_refs(published_run_ids(listing, report.problems));
  push.unsure = true;
  report.published_partial = true;
  return runs;
}

// Why run `run_id`, which no index read lists, may be published all the same: an index could not
// be read, and the server serves the run's marker, or cannot be asked (design §3.4's lookup);
// nullopt when it is not, or when every index was read.
std::optional<std::string> CheckpointStore::maybe_published(RestorePush& push,
                                                            const std::string& run_id) {
  if (!push.unsure) return std::nullopt;
  if (const auto known = push.looked_up.find(run_id); known != push.looked_up.end())
    return known->second ? std::optional(std::string(kArchiveRef) + " holds its result")
                         : std::nullopt;
  const std::string unread = push.index_failed ? "an index could not be read, and " : "";
  try {
    switch (remote_.archived(run_id)) {
      case RemoteStore::Reachable::yes:
        push.looked_up.emplace(run_id, true);
        return unread + std::string(kArchiveRef) + " holds its result";
      case RemoteStore::Reachable::unknown:
        return unread + "the server serves no marker by id";
      case RemoteStore::Reachable::no:
        push.looked_up.emplace(run_id, false);
        return std::nullopt;
    }
  } catch (const GitError& e) {
    if (e.kind() == Failure::cache) throw;
    return unread + "the archive could not be asked: " + e.what();
  }
  return std::nullopt;
}

RestoreReport CheckpointStore::restore(const RestoreRequest& request) {
  RestoreReport report;
  RestorePush push(cache_.path());
  // A serve's restore always pushes (its lease at least).
  if (request.lease_until) remote_.connect_ahead();
  // Results are listed, never downloaded: their ids are finished runs. An index is downloaded
  // with the branches, unless the archive may answer instead (fetched when read after all).
  const auto listing = remote_.list("refs/", RemoteStore::Tips::downloaded_unless_archived);
  report.published = published_runs(listing, request, push, report);
  LeaseBook leases(cache_, remote_, listing, request, report.problems);
  const auto branches = branches_to_restore(listing, request);
  if (request.only && branches.size() > 1) {
    for (const auto& branch : branches) report.ambiguous.push_back(short_branch(branch.ref));
    report.indexed_by_libgit2 = cache_.take_pack_handovers();
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
  report.indexed_by_libgit2 = cache_.take_pack_handovers();
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
    // A copy of a run published elsewhere is stale: never pushed, never resumed.
    if (push.published.contains(run_id)) {
      mark_stale({local.origin_pod, run_id}, request, report);
      continue;
    }
    // Reported either way, so that the caller does not resume the copy as it is.
    if (auto why = maybe_published(push, run_id)) {
      if (push.archived(run_id)) {  // published: this copy is stale
        mark_stale({local.origin_pod, run_id}, request, report);
        report.published.push_back({.run_id = run_id, .entry = std::nullopt});
        continue;
      }
      const auto dir = request.runs_dir / run_id;
      if (auto params = read_run_params(dir))
        report.held.push_back({std::move(*params), "",
                               "run " + run_id + " may be published (" + *why + "); not resumed"});
      report.problems.push_back(dir.string() + ": not pushed: its run may be published (" + *why +
                                ")");
      continue;
    }
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
  const auto published = push.published.find(name->run_id);
  // A finished copy here is pushed as the run's final state unless the run is published: where
  // no entry was read, the archive says; where it cannot, the branch is left alone.
  std::optional<std::string> unsure;
  if (local == LocalCopy::finished && published == push.published.end())
    unsure = maybe_published(push, name->run_id);
  const bool archived = push.archived(name->run_id);
  // A run only an index entry or the archive holds is not pushed a new final state: its result
  // could only differ from the one already published.
  if (local == LocalCopy::finished && !unsure &&
      (published == push.published.end() || !published->second))
    return publish_finished(branch, push_local_final(branch, tip, request), push, report);
  taken.insert(name->run_id);
  if (unsure && !archived) {
    report.held.push_back(
        {std::move(params), branch.ref,
         "run " + name->run_id + " may be published (" + *unsure + "); this branch is left alone"});
    return;
  }
  if (published != push.published.end() || archived) {
    const auto where = archived            ? std::string(kArchiveRef)
                       : published->second ? std::string("its index entry")
                                           : result_ref(name->run_id);
    // (`published` is the listing's when the archive answered: only then is it read.)
    report.held.push_back({std::move(params), branch.ref,
                           "run " + name->run_id + " is published already (" + where +
                               "); this branch is left alone"});
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
  if (auto why = maybe_published(push, name->run_id)) {
    report.held.push_back(
        {std::move(params), branch.ref,
         "run " + name->run_id + " may be published (" + *why + "); this branch is left alone"});
    return;
  }
  const bool branch_wins = local != LocalCopy::resumable ||
                           params.attempts.size() > request.local.at(name->run_id).attempts;
  claim(branch, tip, std::move(params), verdict, branch_wins, request, push, report);
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

}  // namespace inflight::checkpoint
