// materialize() on any handle of the cache, for writers on other threads.
#pragma once

#include <git2.h>

#include <filesystem>
#include <string>

#include "inflight/checkpoint/git_store.hpp"

namespace inflight::checkpoint {

void materialize_tree(git_repository* git, const std::string& commit,
                      const std::filesystem::path& run_dir, const TreeLimits& limits);

}  // namespace inflight::checkpoint
