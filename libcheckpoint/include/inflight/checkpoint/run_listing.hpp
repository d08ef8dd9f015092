// Every run a results repo knows (docs/results.md "Every run of the fleet: `inflight runs`"),
// for `inflight runs list|show|logs|prune` on any machine with only
// --results-repo: one listing of its refs, the tips of the run branches and
// leases, and the index branch, never the results themselves. No ownership is
// decided here: a lease's time is shown as the lease says it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "inflight/checkpoint/git_store.hpp"
#include "inflight/checkpoint/index_entry.hpp"

namespace inflight::checkpoint {

struct RunListing {
  std::vector<RunRow> runs;           // by run id
  std::vector<std::string> problems;  // one line per ref or index file that could not be read
  // What the rows follow from: the refs listed and their tips, which name commits that never
  // change, and what was asked. The same digest, the same rows. Empty when a branch could not
  // be read: that may be this machine's doing, and pass.
  std::string digest;
  bool unchanged = false;  // the digest was the one the caller knew: no row was read
};

// Published runs from the index, unfinished ones from their branches (live:
// the pod that wrote the tip holds a lease; waiting: none does). A run id
// with a result is published, whatever branches it still has. Without
// `finished`, the index is neither downloaded nor read: the unfinished runs
// alone, at the cost of branches and leases whatever the history holds.
// With `known`, the digest of the caller's last listing, an unchanged repo reads nothing more.
RunListing list_runs(CacheRepo& cache, RemoteStore& remote, bool finished = true,
                     const std::optional<std::string>& known = std::nullopt);

// The run ids with a result ref in `refs`: finished runs. A ref under the
// results prefix whose name is no run id is a problem, left alone.
std::set<std::string> published_run_ids(const std::vector<RemoteBranch>& refs,
                                        std::vector<std::string>& problems);

// The entries both layouts' indexes in `listing` hold, layout 2's entry of an id over layout 1's
// (a repo being migrated holds both); a bad file or line is a problem of its own, and an index
// that cannot be read at all (a tip that is no commit) is one too, which `whole` tells.
struct IndexReading {
  std::map<std::string, IndexEntry> entries;  // by run id
  bool whole = true;
};
IndexReading read_indexes(CacheRepo& cache, RemoteStore& remote,
                          const std::vector<RemoteBranch>& listing,
                          std::vector<std::string>& problems);

// Every entry of `runs/` in the index commit `tip`; a bad file is a problem
// of its own.
std::vector<IndexEntry> read_index(CacheRepo& cache, const std::string& tip,
                                   std::vector<std::string>& problems);

// Where the run's data is: its result ref when published, else its one
// branch, else the result commit layout 2's log names (a folded run's ref may be gone); fetched
// (that ref or commit alone), so that read_file_at() reads it. Throws
// GitError(not_found) for an unknown run id, GitError(ambiguous) when
// several pods hold a branch of it.
struct FetchedRun {
  std::string commit;
  std::string where;  // the result ref, or the branch (inflight/<pod>/<run-id>)
};
FetchedRun fetch_run(CacheRepo& cache, RemoteStore& remote, const std::string& run_id);

// The published runs the index holds, older than `older_than_seconds` (by
// finished_at) or named; deletes their result refs and index entries in one
// push unless `dry_run`, and in that push replaces layout 2's archive by one
// of every other published run, so that no ref keeps a pruned result. Returns
// the run ids deleted (or that would be).
struct RunPruneRequest {
  std::optional<std::int64_t> older_than_seconds;
  std::vector<std::string> run_ids;
  bool dry_run = false;
};
struct RunPruneReport {
  std::vector<std::string> deleted;
  std::vector<std::string> missing;   // named, but not published
  std::vector<std::string> problems;  // index files that could not be read
  std::vector<std::string> failed;    // refs the server did not update, each with why
};
RunPruneReport prune_runs(CacheRepo& cache, RemoteStore& remote, const RunPruneRequest& request,
                          std::int64_t now);

// A results repo of layout 1 moved to layout 2 (docs/results.md "The history layout"): each entry
// of `inflight-index` that layout 2's log lacks is added to the log, naming its result commit,
// and each such result is folded into the archive; the result refs and `inflight-index` stay.
// Run again, it copies what pods of layout 1 published since, and finishes one cut short. Unless
// `dry_run`, one push per 10,000 folds, then one for the log: an entry reaches the log only once
// its result is folded.
struct MigrationReport {
  std::size_t copied = 0;  // entries added to the log (or that would be)
  std::size_t folded = 0;  // results folded into the archive (or that would be)
  std::vector<std::string> problems;
  std::vector<std::string> failed;  // refs the server did not update
};
MigrationReport migrate_runs(CacheRepo& cache, RemoteStore& remote, bool dry_run);

// Layout 2's log rewritten as a new root and few deltas that hold what it says: the last line of
// each run it lists or removed, byte for byte (docs/results.md "The history layout"). Each
// publish adds a commit to the log, and a reader walks them all. Only a log read whole is
// rewritten, expecting the tip it was read at: on a server, a publish since makes the rewrite
// fail, and loses nothing (a local path's transport forces it). Unless `dry_run`, one push; none
// for a repo with no log.
struct CompactionReport {
  std::size_t entries = 0;         // runs the log lists
  std::size_t removals = 0;        // runs it removed
  std::size_t commits_before = 0;  // after the root
  std::size_t commits_after = 0;   // after the new root (or that would be)
  std::vector<std::string> problems;
  std::vector<std::string> failed;  // the log, when it was not rewritten
};
CompactionReport compact_runs(CacheRepo& cache, RemoteStore& remote, bool dry_run);

}  // namespace inflight::checkpoint
