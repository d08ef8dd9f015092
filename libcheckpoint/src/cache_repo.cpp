#include <system_error>

#include "cache_repo_impl.hpp"
#include "git_error.hpp"
#include "inflight/checkpoint/git_store.hpp"

namespace inflight::checkpoint {

RepositoryHandle open_or_init_bare(const std::filesystem::path& path) {
  git_repository* raw = nullptr;
  int rc = git_repository_open_bare(&raw, path.c_str());
  if (rc == GIT_ENOTFOUND) {
    git_error_clear();
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (ec) throw GitError(GitErrorKind::other, "create " + path.string() + ": " + ec.message());
    rc = git_repository_init(&raw, path.c_str(), /*is_bare=*/1);
  }
  RepositoryHandle repo(raw);
  git_check(rc, "open repository " + path.string());
  return repo;
}

namespace {

// Checkpoint objects are mostly unique chunks and run files, so a delta
// search costs a push more time than the bytes it saves. The pack builder
// skips objects above its big-file threshold, which libgit2 1.5 reads from
// pack.deltaCacheSize (git itself reads pack.bigFileThreshold): set both.
void skip_delta_search(git_repository* repo) {
  git_config* raw = nullptr;
  if (git_repository_config(&raw, repo) != 0) return git_error_clear();
  const ConfigHandle config(raw);
  std::int64_t value = 0;
  if (git_config_get_int64(&value, raw, "pack.deltaCacheSize") == 0) return;
  // Another agent may be writing the same setting: either write will do.
  if (git_config_set_int64(raw, "pack.deltaCacheSize", 1) != 0 ||
      git_config_set_int64(raw, "pack.bigFileThreshold", 1) != 0)
    git_error_clear();
}

}  // namespace

CacheRepo::CacheRepo(const std::filesystem::path& path)
    : impl_(std::make_unique<Impl>(Impl{path, open_or_init_bare(path)})) {
  skip_delta_search(impl_->repo.get());
}

CacheRepo::~CacheRepo() = default;
CacheRepo::CacheRepo(CacheRepo&&) noexcept = default;
CacheRepo& CacheRepo::operator=(CacheRepo&&) noexcept = default;

const std::filesystem::path& CacheRepo::path() const {
  return impl_->path;
}
CacheRepo::Impl& CacheRepo::impl() {
  return *impl_;
}

}  // namespace inflight::checkpoint
