// materialize() on any handle of the cache, for writers on other threads:
// every object it reads is on disk (a big file is written by two threads,
// the second with a handle of its own).
#pragma once

#include <git2.h>

#include <filesystem>
#include <string>

#include "inflight/checkpoint/git_store.hpp"

namespace inflight::checkpoint {

void materialize_tree(git_repository* git, const std::string& commit,
                      const std::filesystem::path& run_dir, const TreeLimits& limits);

}  // namespace inflight::checkpoint
