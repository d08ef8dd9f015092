// What operators see of the checkpoint branches (docs/recovery.md "`inflight checkpoints`: list,
// show, prune", `inflight checkpoints`): read-only summaries of fetched tips, one run's history,
// and the choice of branches to prune. Synchronous and networked like the rest of the git store, so
// callers bound every call with a deadline.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "inflight/checkpoint/git_store.hpp"
#include "inflight/core/branch_name.hpp"
#include "inflight/core/run_params.hpp"

namespace inflight::checkpoint {

// One checkpoint commit as its message describes it (commit_message.hpp).
// Fields the message lacks or spoils (a commit not written by inflight) keep
// their defaults.
struct CheckpointCommit {
  std::string oid;
  std::int64_t time = 0;  // committer time, seconds since the epoch
  std::optional<CheckpointReason> reason;
  int attempt = 0;
  std::string pod;
  std::uint64_t records = 0;
  std::optional<std::uint64_t> total = std::nullopt;
};

CheckpointCommit describe_commit(const CommitSummary& commit);

// Whether `id` names the branch `ref`: its run id, `inflight/<pod>/<run-id>`
// or the full ref.
bool branch_matches(const std::string& ref, const std::string& id);

// Bytes the run dir of `commit` holds once restored: each file at its full
// size, a chunked file once (its chunks add up to it).
std::uint64_t run_dir_size(CacheRepo& repo, const std::string& commit);

struct BranchSummary {
  std::string ref;
  BranchName name;
  CheckpointCommit tip;
  Result<OrderedJson> run_params;  // or why it is missing or not bounded JSON
  std::size_t attempts = 0;        // entries of run_params' "attempts"
  std::uint64_t size_bytes = 0;
};

// Fetches the branch's tip into `cache` and describes it.
BranchSummary summarize_branch(CacheRepo& cache, RemoteStore& remote, const RemoteBranch& branch);

struct BranchListing {
  std::vector<BranchSummary> branches;  // in ref order
  std::vector<std::string> problems;    // one line per branch that could not be read
};

// Every checkpoint branch on the remote, of `pod` only when given. A branch
// that cannot be read becomes a problem; an unreachable remote or refused
// credentials throw.
BranchListing list_branches(CacheRepo& cache, RemoteStore& remote,
                            const std::optional<std::string>& pod = std::nullopt);

// The checkpoint branches `id` names (see branch_matches): more than one when
// several pods hold a run of that id.
std::vector<RemoteBranch> find_run_branches(RemoteStore& remote, const std::string& id);

// Exactly one selector is meant to be set; the age is that of the last
// checkpoint (the tip's commit time).
struct PruneRequest {
  std::optional<std::int64_t> older_than_seconds;
  std::vector<std::string> run_ids;
  bool all = false;
};

struct PrunePlan {
  std::vector<RemoteBranch> listing;  // every ref of the results repo, branch tips downloaded
  std::vector<std::string> refs;      // to delete
  std::vector<std::string> missing_run_ids;  // named but without a branch
  std::vector<std::string> problems;         // branches whose age could not be read
};

// `now` is seconds since the epoch. One connection lists every ref and
// downloads the branch tips (a finished run's is published before it goes).
PrunePlan plan_prune(CacheRepo& cache, RemoteStore& remote, const PruneRequest& request,
                     std::int64_t now);

}  // namespace inflight::checkpoint
