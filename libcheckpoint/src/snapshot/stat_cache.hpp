// The snapshotter's stat cache outlives the agent process that built it: one
// file per run dir in the cache repo, written once the objects it names are
// on disk, so the next periodic save reads only the files that changed. What
// is read back is checked: a file that does not parse, names another run dir
// or an object the cache lacks is ignored and the files are read again.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "inflight/checkpoint/git_store.hpp"
#include "snapshot/stored_file.hpp"

namespace inflight::checkpoint {

// By path relative to the run dir.
using StatCache = std::map<std::string, StoredFile>;

// The stat cache kept for run_dir, or an empty one.
StatCache load_stat_cache(CacheRepo& cache, const std::filesystem::path& run_dir);

// Keeps `stat_cache` for run_dir; every object it names must be on disk.
void save_stat_cache(CacheRepo& cache, const std::filesystem::path& run_dir,
                     const StatCache& stat_cache);

// Forgets what was kept for run_dir (the run is over).
void drop_stat_cache(CacheRepo& cache, const std::filesystem::path& run_dir);

}  // namespace inflight::checkpoint
