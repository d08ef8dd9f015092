// The checkpoint flows of SPEC §4 and §5 on top of the git store: save a run
// dir to its branch, release the branch of a finished run, and restore the
// runs the results repo holds by claiming each one first. Synchronous: every
// call may block on the network, so callers bound it with a deadline.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "inflight/checkpoint/git_store.hpp"
#include "inflight/checkpoint/run_params.hpp"

namespace inflight::checkpoint {

struct StoreConfig {
  std::filesystem::path cache_dir;  // the local cache repo
  RemoteConfig remote;
  std::vector<std::string> exclude_globs;
  std::uint64_t restore_max_bytes = 1ull << 30;
  // A branch whose tip is another pod's claim younger than this is that
  // pod's: it started the run moments ago and has not checkpointed yet.
  std::chrono::seconds claim_lease{120};
};

// `refs/heads/inflight/<origin-pod>/<run-id>`
std::string branch_ref(const std::string& origin_pod, const std::string& run_id);

struct ClaimedRun {
  RunParams params;
  std::filesystem::path dir;
  std::string branch;  // refs/heads/inflight/…
  std::string claim;   // the claim commit, the branch's tip now
};

struct RestoreReport {
  std::vector<ClaimedRun> claimed;    // ours now, ready to resume
  std::vector<std::string> lost;      // run ids another instance claimed first
  std::vector<std::string> problems;  // one line per branch that could not be used
};

class CheckpointStore {
 public:
  explicit CheckpointStore(StoreConfig config);

  // Pushes a snapshot of run_dir fast-forward onto its branch; returns the
  // commit, or nullopt when nothing changed since the last one. A rejected
  // push throws GitError(rejected): another instance owns the run.
  std::optional<std::string> save(const std::filesystem::path& run_dir,
                                  const std::string& origin_pod, const CheckpointInfo& info);
  void release(const std::string& origin_pod, const std::string& run_id);

  // Claims every unfinished run on `inflight/*` by pushing a claim commit on
  // the fetched tip, and materialises those whose branch copy beats the local
  // one (`local_attempts`: attempts of each resumable local run dir). A claim
  // that is rejected means another instance took the run: it is lost. Local
  // runs with no branch get one. Problems with single branches are
  // collected; an unreachable remote or refused credentials throw.
  // `only`, when set, restores that one run and pushes no local run.
  RestoreReport restore(const std::filesystem::path& runs_dir, const std::string& pod,
                        const std::map<std::string, std::size_t>& local_attempts,
                        const std::optional<std::string>& only = std::nullopt);

  RemoteStore& remote() { return remote_; }
  CacheRepo& cache() { return cache_; }

 private:
  void push_local_run(const std::filesystem::path& dir, const std::string& pod,
                      RestoreReport& report);
  void refuse_live_claim(const std::string& tip, const std::string& pod);
  std::optional<ClaimedRun> claim(const RemoteBranch& branch, const std::filesystem::path& runs_dir,
                                  const std::string& pod,
                                  const std::map<std::string, std::size_t>& local_attempts);

  StoreConfig config_;
  CacheRepo cache_;
  RemoteStore remote_;
  std::map<std::string, RunSnapshotter> snapshotters_;  // by run dir, for the stat cache
};

}  // namespace inflight::checkpoint
