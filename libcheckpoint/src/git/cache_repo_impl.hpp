// What a CacheRepo holds behind its public face, for the store's own files:
// the libgit2 handle, the in-memory object backend and what persist() owes.
#pragma once

#include <filesystem>
#include <string_view>
#include <vector>

#include "git/git_handle.hpp"
#include "git/pack_writer.hpp"
#include "inflight/checkpoint/git_store.hpp"

namespace inflight::checkpoint {

// Where the cache keeps the tip last pushed to each remote ref (the remote
// ref's name under refs/heads/ or refs/ follows): CacheRepo::remember_pushed.
inline constexpr std::string_view kLocalPrefix = "refs/inflight-local/";

struct CacheRepo::Impl {
  std::filesystem::path path;
  RepositoryHandle repo;
  git_odb_backend* memory = nullptr;  // new objects until persist(); owned by the repo's odb
  std::vector<git_oid> new_commits;   // in `memory`: what persist() packs
  // remember_pushed()'s records, until keep_pushed() or persist() packs them.
  std::vector<std::pair<std::string, git_oid>> pending_refs;
  PackHandovers* handovers = nullptr;  // the pack writer's; owned by the repo's odb
};

// Opens the bare repository at `path`, creating it and its parents if absent
// and replacing whatever is there when it is not a repository.
RepositoryHandle open_or_init_bare(const std::filesystem::path& path);
// Another handle of a repository that exists: one per thread, or one whose
// refs or objects are set apart.
RepositoryHandle open_bare(const std::filesystem::path& path);

// The libgit2 repository behind a CacheRepo.
inline git_repository* raw_repo(CacheRepo& repo) {
  return repo.impl().repo.get();
}

}  // namespace inflight::checkpoint
