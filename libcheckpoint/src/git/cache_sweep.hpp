// An agent killed at its deadline leaves its temp files in the cache repo: a
// pack it was writing, libgit2's, a lock. Nothing else removes them, and a
// pack of hundreds of MB may be among them, so the next agent that opens the
// cache does.
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <string_view>

namespace inflight::checkpoint {

// Where RemoteStore::reachable makes its throwaway repositories, one directory each.
inline constexpr std::string_view kLookupDir = "inflight-lookup";

// Removes the temp files of ours and of libgit2 in the cache at `cache` whose
// last write is older than `older_than`: objects/pack/tmp_pack_inflight_*,
// objects/pack/pack_git2_*, objects/pack/*.lock, and the `.NAME.tmp` copies of
// files written atomically in the cache and in inflight-stat/, and the repositories under
// kLookupDir. `older_than` is
// the longest deadline an agent of this cache gets: agents run at once on one
// cache, and a younger file may be a live one's. Returns how many went; a file
// that cannot be removed is left to the next agent.
std::size_t sweep_temp_files(const std::filesystem::path& cache, std::chrono::seconds older_than);

}  // namespace inflight::checkpoint
