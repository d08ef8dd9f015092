// What a publish writes into the index of published runs: a commit of layout 1's `inflight-index`
// branch (docs/results.md "The result and the index"), or a delta of layout 2's log
// (runs_index.hpp), made by a publish of its own and by the release steps that ride a periodic
// push.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "inflight/checkpoint/git_store.hpp"
#include "inflight/checkpoint/index_entry.hpp"

namespace inflight::checkpoint {

// An index file: its path and its text.
using IndexFile = std::pair<std::string, std::string>;

// One run's entry, and its text as layout 1's file (layout 2's line is written from the entry,
// whose result_commit may change once the server says which result stands).
struct RunEntry {
  IndexEntry entry;
  std::string file;
};

// Where a publish writes: layout 2's log when the results repo has one or has no published run
// yet (StoreConfig::results_layout), else layout 1's index at `flat_tip` (none: no index yet). And
// what the same listing says of results: whether layout 2's archive is there, and which runs have a
// result ref.
struct IndexTarget {
  bool log = false;
  std::optional<std::string> flat_tip = std::nullopt;
  bool archive = false;
  std::set<std::string> results = {};
};

// The update that writes `entries` where `target` says; nullopt when layout 1's index holds them
// all as they are already.
std::optional<RefUpdate> index_update(CacheRepo& cache, const IndexTarget& target,
                                      const std::vector<RunEntry>& entries);

// The index of `tip` (none: an empty one) with `files` in it; nullopt when it
// holds them all as they are already.
std::optional<std::string> write_index(CacheRepo& cache, const std::optional<std::string>& tip,
                                       const std::vector<IndexFile>& files);

// The index `index` with each of `paths` as the index `base` holds it
// (removed where `base` has none); nullopt when that changes nothing.
std::optional<std::string> index_with_paths_of(CacheRepo& cache, const std::string& index,
                                               const std::optional<std::string>& base,
                                               const std::vector<std::string>& paths);

}  // namespace inflight::checkpoint
