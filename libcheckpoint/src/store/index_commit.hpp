// A commit of the `inflight-index` branch (README "Results that outlive the
// pod"): made by a publish of its own and by the release steps that ride a
// periodic push.
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

}  // namespace inflight::checkpoint
