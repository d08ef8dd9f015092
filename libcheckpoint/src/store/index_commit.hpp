// A commit of the `inflight-index` branch (docs/results.md "The result and the index"): made by a
// publish of its own and by the release steps that ride a periodic push.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "inflight/checkpoint/git_store.hpp"

namespace inflight::checkpoint {

// An index file: its path and its text.
using IndexFile = std::pair<std::string, std::string>;

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
