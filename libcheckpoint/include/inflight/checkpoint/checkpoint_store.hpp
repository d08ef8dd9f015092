// The checkpoint flows of docs/checkpoints.md on top of the git store: save a run
// dir to its branch, release the branch of a finished run, and restore the
// runs the results repo holds by claiming each one first. Synchronous: every
// call may block on the network, so callers bound it with a deadline.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "inflight/checkpoint/git_store.hpp"
#include "inflight/checkpoint/lease.hpp"
#include "inflight/checkpoint/store_types.hpp"
#include "inflight/core/branch_name.hpp"
#include "inflight/core/run_params.hpp"

namespace inflight::checkpoint {

struct RunEntry;     // store/index_commit.hpp
struct IndexTarget;  // …

class CheckpointStore {
 public:
  explicit CheckpointStore(StoreConfig config);

  // Pushes a snapshot of run_dir fast-forward onto its branch; returns the
  // commit, or nullopt when nothing changed since the last one. A rejected
  // push is Failure::rejected: another instance owns the run; a run dir over
  // the restore limits, Failure::over_limit (left_out() says what was left out).
  Result<std::optional<std::string>> save(const std::filesystem::path& run_dir,
                                          const std::string& origin_pod,
                                          const CheckpointInfo& info);
  // save() of many runs, pushed over one connection with the lease's step,
  // when given; each run's outcome is its own (a taken branch fences that
  // run only).
  // `release`: the steps of finished runs that ride this push (store_types.hpp).
  SaveAllReport save_all(const std::vector<SaveRequest>& runs,
                         const std::optional<LeaseStep>& lease, const ReleaseSteps& release = {});
  // save_all() in two steps, for runs that come one at a time (a shutdown
  // takes each run's snapshot as its child exits): a snapshot of each run
  // as it comes, then one push of them all. `snapshots` answer `runs` in order.
  SaveOutcome snapshot_to_save(const SaveRequest& run);
  SaveAllReport push_saved(const std::vector<SaveRequest>& runs, std::vector<SaveOutcome> snapshots,
                           const std::optional<LeaseStep>& lease, const ReleaseSteps& release);
  // The runs are over: a last commit of each carrying its final
  // run-params.json, their publication (with StoreConfig::publish), then
  // their branches are deleted, each step one push for all of them and each
  // run's outcome its own. A crash or a failure between them leaves a branch
  // that every restore publishes and deletes instead of running. A rejected
  // push is Failure::rejected: the branch is another instance's, untouched,
  // or another pod published the run id first, and the branch is kept for an
  // operator. A final state over the restore limits is neither pushed nor
  // published: the branch is deleted as is.
  std::vector<Result<void>> release(const std::vector<SaveRequest>& runs);
  // Publishes the finished runs whose final checkpoints are `final_commits`
  // (docs/results.md): their result refs, each created
  // only if absent, in one push, then their index entries in one commit on
  // the index tip, built again on a tip another pod moved. Landed when both
  // are there, now or before; Failure::rejected when another pod published
  // the run id first. One answer per commit, in order. `logged`: the result commit an index
  // entry names, by run id, for runs an entry holds without a result ref (layout 2 deletes a
  // folded one's, docs/results.md); a run whose result would be another is rejected, never
  // published twice, and the same one is published again (the same commit is no second result).
  std::vector<Result<void>> publish(const std::vector<std::string>& final_commits,
                                    const std::map<std::string, std::string>& logged = {});
  // Before `checkpoints prune` deletes `refs`: each branch whose tip holds a
  // finished run that has no result yet is published (with
  // StoreConfig::publish), so that no prune loses a finished run's results.
  // `listing` is the results repo's refs, branch tips downloaded. Returns,
  // by ref, each publication's outcome; other refs are not named.
  std::map<std::string, Result<void>> publish_before_prune(
      const std::vector<std::string>& refs, const std::vector<RemoteBranch>& listing);

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
  // Whether each run (at most kMaxLookedUp) is published: its result ref listed, or its marker in
  // layout 2's archive; with the status its markers give, once folded. What a restore whose
  // `published` is partial leaves to ask, run by run.
  static constexpr std::size_t kMaxLookedUp = 64;
  // A restore with more runs than this to ask about reads layout 2's log instead (restore.cpp).
  static constexpr std::size_t kMaxRestoreLookups = 16;
  std::vector<LookedUpRun> look_up(const std::vector<std::string>& run_ids);

  // What the last snapshot of run_dir left out (tree_rules.hpp): nothing
  // before the first.
  LeftOut left_out(const std::filesystem::path& run_dir) const;

  // Writes what this store's steps made to the cache's disk (CacheRepo::
  // persist) with each run dir's stat cache; throws GitError(cache).
  void persist();

  RemoteStore& remote() { return remote_; }
  CacheRepo& cache() { return cache_; }
  // How many temp files of killed agents the store's opening removed.
  std::size_t swept_temp_files() const { return swept_; }

 private:
  // What the run dir of a branch's run holds: nothing, a copy to weigh
  // against the branch's, a finished run, or a copy handed over to another
  // instance (the branch's copy replaces it).
  enum class LocalCopy { none, resumable, finished, stale };

  // The ref updates a restore pushes at its end, each with what follows
  // from its outcome (restore.cpp).
  struct RestorePush;
  // A branch copy beside its run dir and the writer materialising it.
  struct StagedCopy {
    std::filesystem::path dir;
    std::shared_future<std::uint64_t> written;
  };

  struct Publication;
  // Where the release steps' ref updates sit in a push (release_steps.cpp).
  struct ReleaseFinal;
  struct ReleasePush;
  struct FoldPush;

  ReleasePush add_release_steps(const ReleaseSteps& steps, std::vector<RefUpdate>& updates,
                                SaveAllReport& report);
  ReleaseFinal add_final(const SaveRequest& run, const IndexTarget& target,
                         const std::optional<Error>& unlisted, std::vector<RefUpdate>& updates,
                         Result<std::optional<std::string>>& outcome,
                         std::vector<RunEntry>& entries);
  void add_index(const std::vector<RunEntry>& entries, std::vector<RefUpdate>& updates,
                 ReleasePush& push, Result<void>& outcome);
  // Whether a final's result stands, and the result commit the server holds for it when that is
  // not the one this push made (the same run dir published from another final commit).
  struct Standing {
    bool stands = false;
    std::optional<std::string> served = std::nullopt;
  };
  std::string standing_line(const std::string& run_id, bool ours_created);
  void take_back(const ReleasePush& push, const std::vector<RefUpdate>& updates,
                 const std::vector<RefResult>& results, const std::vector<Standing>& standing,
                 bool indexed, SaveAllReport& report);
  void judge_release_steps(const ReleaseSteps& steps, const ReleasePush& push,
                           const std::vector<RefUpdate>& updates,
                           const std::vector<RefResult>& results, SaveAllReport& report);
  Standing judge_final(const ReleaseFinal& final, const std::vector<RefUpdate>& updates,
                       const std::vector<RefResult>& results,
                       Result<std::optional<std::string>>& outcome);
  // Layout 2's archive (archive_fold.hpp): the record of a result whose entry landed in the log,
  // then, after a push, the fold of every recorded result and the unref.
  void record_for_fold(const std::string& run_id, const std::string& result);
  void tend_archive();
  FoldPush riding_fold(std::vector<RefUpdate>& updates);
  FoldPush add_fold(std::vector<RefUpdate>& updates);
  void fold_published();
  void judge_fold(const FoldPush& fold, const std::vector<RefResult>& results);
  void unref_folded();

  Publication publication(const std::string& final_commit);
  std::optional<Error> publish_all(std::vector<Publication>& publications,
                                   std::optional<IndexTarget> look);
  bool push_results(std::vector<Publication>& publications, std::string& last_failure);
  std::vector<std::optional<std::string>> push_final_states(const std::vector<SaveRequest>& runs,
                                                            std::vector<Result<void>>& answers);
  void delete_branches(const std::vector<SaveRequest>& runs, std::vector<Result<void>>& answers);
  IndexTarget index_target();
  std::optional<Error> folded_elsewhere(const IndexTarget& target, const std::string& run_id);
  // The result ref another push made: its commit, and whether it holds the same run dir.
  struct HeldResult {
    std::string commit;
    bool same = false;
  };
  std::optional<HeldResult> held_result(const std::string& run_id, const std::string& result);
  // The final checkpoint this cache pushed to the run's branch, if its last
  // push was one: a release tried again publishes it, not a new one.
  std::optional<std::string> pushed_final(const std::string& ref);
  void publish_finished(const RemoteBranch& branch, const std::string& final_commit,
                        RestorePush& push, RestoreReport& report);
  std::string push_local_final(const RemoteBranch& branch, const std::string& tip,
                               const RestoreRequest& request);
  std::optional<std::string> snapshot(const std::filesystem::path& run_dir,
                                      const std::string& origin_pod, const CheckpointInfo& info);
  RefUpdate checkpoint_update(const SaveRequest& run, const std::string& commit);
  bool checkpoint_of(const std::string& commit, const std::string& run_id);
  void build_on_rewritten(const std::vector<SaveRequest>& runs,
                          const std::vector<std::size_t>& pushed, std::size_t first_run,
                          std::vector<RefUpdate>& updates, std::vector<RefResult>& results,
                          SaveAllReport& report);
  std::optional<std::string> renew_taken_lease(const RefResult& result, const Lease& lease);
  std::optional<std::string> undo_release(const RefResult& result, const SaveAllReport& report,
                                          const Lease& lease);
  std::vector<PublishedRun> published_runs(const std::vector<RemoteBranch>& listing,
                                           const RestoreRequest& request, RestorePush& push,
                                           RestoreReport& report);
  std::optional<std::vector<PublishedRun>> looked_up_runs(const std::vector<RemoteBranch>& listing,
                                                          const std::string& only,
                                                          RestorePush& push,
                                                          std::vector<std::string>& problems);
  std::optional<std::vector<PublishedRun>> unread_log_runs(const std::vector<RemoteBranch>& listing,
                                                           const RestoreRequest& request,
                                                           RestorePush& push,
                                                           RestoreReport& report);
  std::optional<std::string> maybe_published(RestorePush& push, const std::string& run_id);
  std::set<std::string> restore_branches(const std::vector<RemoteBranch>& branches,
                                         const RestoreRequest& request, LeaseBook& leases,
                                         RestorePush& push, RestoreReport& report);
  void drop_ended_leases(LeaseBook& leases, const std::string& own_pod, RestorePush& push,
                         RestoreReport& report);
  void push_unbranched_runs(const std::vector<RemoteBranch>& branches,
                            const std::set<std::string>& taken, const RestoreRequest& request,
                            LeaseBook& leases, RestorePush& push, RestoreReport& report);
  std::optional<std::string> local_runner(const BranchName& name, const RestoreRequest& request);
  void take_lease(const Lease& lease, RestorePush& push, RestoreReport& report);
  void publish_local_finished(const std::vector<RemoteBranch>& listing,
                              const RestoreRequest& request, RestorePush& push,
                              RestoreReport& report);
  std::optional<std::string> local_final(const RestoreRequest& request, const std::string& run_id);
  void restore_branch(const RemoteBranch& branch, const RestoreRequest& request, LeaseBook& leases,
                      std::set<std::string>& taken, RestorePush& push, RestoreReport& report);
  LocalCopy local_copy(const BranchName& name, const RestoreRequest& request);
  void mark_stale(const BranchName& name, const RestoreRequest& request, RestoreReport& report);
  void push_local_run(const std::filesystem::path& dir, const RestoreRequest& request,
                      RestorePush& push, RestoreReport& report);
  std::optional<LeftRun> live_owner(const RemoteBranch& branch, const std::string& tip,
                                    const RestoreRequest& request, LeaseBook& leases,
                                    RestoreReport& report);
  void claim(const RemoteBranch& branch, const std::string& tip, RunParams params,
             const RunVerdict& verdict, bool branch_wins, const RestoreRequest& request,
             RestorePush& push, RestoreReport& report);
  void claim_written(const RestoreRequest& request, RestorePush& push, RestoreReport& report);
  void add_claim(const RemoteBranch& branch, const std::string& tip, RunParams params,
                 const std::optional<StagedCopy>& staged, std::string commit,
                 const RestoreRequest& request, RestorePush& push, RestoreReport& report);
  void push_restore(RestorePush& push, RestoreReport& report);

  StoreConfig config_;
  CacheRepo cache_;
  RemoteStore remote_;
  std::map<std::string, RunSnapshotter> snapshotters_;  // by run dir, for the stat cache
  std::size_t swept_ = 0;
};

}  // namespace inflight::checkpoint
