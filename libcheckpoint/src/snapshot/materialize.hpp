// materialize() on any handle of the cache, for writers on other threads:
// every object it reads is on disk (a big file is written by two threads,
// the second with a handle of its own).
#pragma once

#include <git2.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "inflight/checkpoint/git_store.hpp"
#include "snapshot/tree_validation.hpp"

namespace inflight::checkpoint {

// Returns the complete lines of the file at `counted` (a path in the run
// dir; none when empty), counted as it was written: 0 when there is none.
std::uint64_t materialize_tree(git_repository* git, const ValidatedCommit& commit,
                               const std::filesystem::path& run_dir, const std::string& counted);

}  // namespace inflight::checkpoint
