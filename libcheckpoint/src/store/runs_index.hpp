// Layout 2's index of published runs (docs/design/history-layout.md §3.1, §3.2), read and
// added to: a snapshot of entries in 256 buckets, and a log of what was added and removed since.
// Both refs are branches anyone with push access writes, so everything here is bounded, and a bad
// line, file or commit is left out with a problem that names it; the rest is read.
//
// The snapshot (kRunsRef) is a commit whose tree holds `layout` ("inflight-runs 2\n") and
// `b/<hh>/<NNNNNN>.jsonl` segments: the entry lines (index_entry.hpp) of the runs whose
// runs_bucket() is hh, a later segment's line of an id replacing an earlier one's. The log
// (kRunsLogRef) is a chain of commits from a root whose tree holds `layout`; each later commit's
// tree holds `entries.jsonl`, entry and removal lines. Read in order onto the snapshot, the last
// line of each id wins: a delta that the snapshot already holds changes nothing read again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "inflight/checkpoint/git_store.hpp"
#include "inflight/checkpoint/index_entry.hpp"

namespace inflight::checkpoint {

inline constexpr std::string_view kRunsLayout = "inflight-runs 2\n";
inline constexpr std::size_t kMaxSegmentsPerBucket = 64;
inline constexpr std::uint64_t kMaxIndexFileBytes = 8 * 1024 * 1024;
inline constexpr std::size_t kMaxIndexFileLines = 4096;
inline constexpr std::size_t kMaxLogCommits = 100'000;

struct RunsIndex {
  std::map<std::string, IndexEntry> entries;  // by run id
  std::set<std::string> removed;              // the ids whose last line is a removal (a prune's)
  std::vector<std::string> problems;
  std::size_t log_commits = 0;  // read after the log's root
  // With LogReading::keep_lines, the text of each id's last line, as it was written.
  std::map<std::string, std::string> lines;
};

struct LogReading {
  bool keep_lines = false;
  std::size_t max_commits = kMaxLogCommits;  // after the root; the older ones are a problem
};

// The entries of the snapshot at `snapshot` and of the log from `log_tip` back to its root, each
// a commit the cache holds with what it reaches (either may be absent).
RunsIndex read_runs_index(CacheRepo& cache, const std::optional<std::string>& snapshot,
                          const std::optional<std::string>& log_tip, const LogReading& how = {});

// The update that adds `lines` (entry and removal lines, each ending in a newline) to the log,
// built on the tip the server advertises, which is never downloaded: one delta, or a chain of
// them where the lines are more than a reader takes from one file (kMaxIndexFileLines,
// kMaxIndexFileBytes). A log that went between the listing that chose it and the push starts
// again from a root of its own.
RefUpdate runs_log_delta(std::string lines);

// The update that replaces the log at `tip` by a new root and the fewest deltas that hold `lines`
// (compaction: a reader then walks a few commits, not one per publish). A delta that landed since
// the caller read the log at `tip` makes it `taken`: nothing is lost, and it can be asked again.
RefUpdate runs_log_compacted(std::string lines, std::string tip);
// The deltas that hold `lines` after a compaction.
std::size_t runs_log_deltas(std::string_view lines);

}  // namespace inflight::checkpoint
