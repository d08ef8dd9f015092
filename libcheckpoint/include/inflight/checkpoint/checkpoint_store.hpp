// The checkpoint flows of README "Checkpoints in git" on top of the git store: save a run
// dir to its branch, release the branch of a finished run, and restore the
// runs the results repo holds by claiming each one first. Synchronous: every
// call may block on the network, so callers bound it with a deadline.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "inflight/checkpoint/branch_name.hpp"
#include "inflight/checkpoint/git_store.hpp"
#include "inflight/checkpoint/lease.hpp"
#include "inflight/checkpoint/run_params.hpp"

namespace inflight::checkpoint {

// How long a claim by a pod without a lease (`inflight resume`) holds the
// claimed branch: twice --git-timeout (README "Checkpoints in git"). The one
// rule for StoreConfig::claim_lease.
constexpr std::chrono::seconds claim_lease_for(std::chrono::milliseconds network_timeout) {
  return 2 * std::chrono::duration_cast<std::chrono::seconds>(network_timeout);
}

struct StoreConfig {
  std::filesystem::path cache_dir;  // the local cache repo
  RemoteConfig remote;
  std::vector<std::string> exclude_globs;
  TreeLimits restore_limits;
  // A branch whose tip is a claim younger than this, by a pod without a
  // lease (`inflight resume`), is that pod's: it is running the run now.
  // claim_lease_for(the network timeout).
  std::chrono::seconds claim_lease{};
};

struct ClaimedRun {
  RunParams params;
  std::filesystem::path dir;
  std::string branch;  // refs/heads/inflight/…
  std::string claim;   // the claim commit, the branch's tip now
};

// A run found resumable on local disk, for the local-versus-branch rule.
struct LocalRun {
  std::size_t attempts = 0;
  std::string origin_pod;
};

// What the instance makes of a run before anything is claimed or written.
// The templates live outside this library, so restore asks through a judge.
struct RunVerdict {
  std::optional<std::string> refusal;  // why this instance cannot run it
  std::string progress_file;           // the configured one, relative to the run dir
};
using RunJudge = std::function<RunVerdict(const RunParams&)>;

struct RestoreRequest {
  std::filesystem::path runs_dir;
  std::string pod;                        // this instance
  std::map<std::string, LocalRun> local;  // by run id
  RunJudge judge;
  // A run id or branch: restore only that run, push no local run.
  std::optional<std::string> only;
  // This pod's lease to take or renew, in the push of the claims (serve).
  std::optional<std::int64_t> lease_until;
  // Run ids this instance holds already: a later look at the store must not
  // take its own runs a second time.
  std::set<std::string> skip;
  // This instance runs runs already: a run another pod handed over (a
  // shutdown checkpoint) less than claim_lease ago is left for an idle
  // instance, such as the new pod of a rolling deploy, so that the run moves
  // once and not to a pod that is about to stop too.
  bool leave_handovers = false;
};

// A run this instance cannot run: its branch is left as it is.
struct HeldRun {
  RunParams params;
  std::string branch;  // refs/heads/inflight/…, empty for a local run
  std::string reason;
};

// A run that another pod answers for now: left to it until `until`.
struct LeftRun {
  std::string run_id;
  std::string pod;
  std::int64_t until = 0;  // seconds since the epoch
};

struct RestoreReport {
  std::vector<ClaimedRun> claimed;     // ours now, ready to resume
  std::vector<HeldRun> held;           // refused by the judge, left alone
  std::vector<std::string> lost;       // run ids another instance claimed first
  std::vector<LeftRun> left;           // runs of other live pods, to look at again
  std::vector<std::string> released;   // branches of finished runs, deleted
  std::vector<std::string> ambiguous;  // with `only`: every branch it names, when several
  std::vector<std::string> problems;   // one line per branch that could not be used
};

// One run of a batched save.
struct SaveRequest {
  std::filesystem::path run_dir;
  std::string origin_pod;
  CheckpointInfo info;
};

struct SaveOutcome {
  std::optional<std::string> commit;  // none when nothing changed
  RefOutcome ref = RefOutcome::updated;
  std::optional<std::string> error;  // this run's own failure (its dir could not be read)
};

// What a batched save does with the pod's lease: renew it until
// `lease.until`, or (the last push of a shutdown) release it. A release
// rides the push only when every run was snapshotted; should the server then
// refuse a run's ref, the lease is taken again until `lease.until`, since
// only this disk holds that run's last state.
struct LeaseStep {
  Lease lease;
  bool release = false;
};

// What a batched save did: each run's outcome, and the lease's renewal or release.
struct SaveAllReport {
  std::vector<SaveOutcome> runs;
  std::optional<std::string> lease_error;  // set when the lease was asked for and not renewed
                                           // (or not released)
};

class CheckpointStore {
 public:
  explicit CheckpointStore(StoreConfig config);

  // Pushes a snapshot of run_dir fast-forward onto its branch; returns the
  // commit, or nullopt when nothing changed since the last one. A rejected
  // push throws GitError(rejected): another instance owns the run.
  std::optional<std::string> save(const std::filesystem::path& run_dir,
                                  const std::string& origin_pod, const CheckpointInfo& info);
  // save() of many runs, pushed over one connection with the lease's step,
  // when given; each run's outcome is its own (a taken branch fences that
  // run only).
  SaveAllReport save_all(const std::vector<SaveRequest>& runs,
                         const std::optional<LeaseStep>& lease);
  // The run is over: a last commit carrying its final run-params.json, then
  // the branch is deleted. A crash or a failure between the two leaves a
  // branch that every restore deletes instead of running. A rejected push
  // throws GitError(rejected): the branch is another instance's, untouched.
  void release(const std::filesystem::path& run_dir, const std::string& origin_pod,
               const CheckpointInfo& info);

  // Claims every unfinished run on `inflight/*` that the judge accepts by
  // pushing a claim commit on the fetched tip, and materialises those whose
  // branch copy beats the local one. A run whose tip another pod wrote is
  // left to it while that pod's lease lasts, unless the tip is a shutdown
  // checkpoint (handed over). A claim that is rejected means another
  // instance took the run: it is lost. A branch whose run is final is
  // deleted. A run id is restored from one branch only, and never into a run
  // dir of another origin pod. Local runs with no branch get one. One
  // connection lists and downloads, one push carries every claim, deletion
  // and the lease. Problems with single branches are collected; an
  // unreachable remote or refused credentials throw.
  RestoreReport restore(const RestoreRequest& request);

  // Writes what this store's steps made to the cache's disk (CacheRepo::
  // persist) with each run dir's stat cache; throws GitError(cache).
  void persist();

  RemoteStore& remote() { return remote_; }
  CacheRepo& cache() { return cache_; }

 private:
  // What the run dir of a branch's run holds: nothing, a copy to weigh
  // against the branch's, a finished run, or a copy handed over to another
  // instance (the branch's copy replaces it).
  enum class LocalCopy { none, resumable, finished, stale };

  // The ref updates a restore pushes at its end, each with what follows
  // from its outcome (restore.cpp).
  struct RestorePush;

  std::optional<std::string> snapshot(const std::filesystem::path& run_dir,
                                      const std::string& origin_pod, const CheckpointInfo& info);
  std::optional<std::string> renew_taken_lease(const RefResult& result, const Lease& lease);
  std::optional<std::string> undo_release(const RefResult& result, const SaveAllReport& report,
                                          const Lease& lease);
  void restore_branch(const RemoteBranch& branch, const RestoreRequest& request, LeaseBook& leases,
                      std::set<std::string>& taken, RestorePush& push, RestoreReport& report);
  LocalCopy local_copy(const BranchName& name, const RestoreRequest& request);
  void mark_stale(const BranchName& name, const RestoreRequest& request, RestoreReport& report);
  void push_local_run(const std::filesystem::path& dir, const RestoreRequest& request,
                      RestorePush& push, RestoreReport& report);
  std::optional<LeftRun> live_owner(const BranchName& name, const std::string& tip,
                                    const RestoreRequest& request, LeaseBook& leases);
  void claim(const RemoteBranch& branch, const std::string& tip, RunParams params,
             const RunVerdict& verdict, bool branch_wins, const RestoreRequest& request,
             RestorePush& push, RestoreReport& report);
  void claim_written(const RestoreRequest& request, RestorePush& push, RestoreReport& report);
  void add_claim(const RemoteBranch& branch, const std::string& tip, RunParams params,
                 const std::optional<std::filesystem::path>& staging, std::string commit,
                 const RestoreRequest& request, RestorePush& push, RestoreReport& report);
  void push_restore(RestorePush& push, RestoreReport& report);

  StoreConfig config_;
  CacheRepo cache_;
  RemoteStore remote_;
  std::map<std::string, RunSnapshotter> snapshotters_;  // by run dir, for the stat cache
};

}  // namespace inflight::checkpoint
